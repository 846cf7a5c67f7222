//! Opening and creating a repository: found from a folder, a bucket or a
//! store, its config read and checked.

use super::*;

/// A repository's fixed settings, in `meta/config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoConfig {
    /// Format number.
    pub format: u32,
    /// How data files are written.
    pub write: WriteSettings,
}

/// The local folder a location names: a path, or a `file://` URL.
pub(crate) fn local_folder(location: &str) -> Option<std::path::PathBuf> {
    if !location.contains("://") {
        return Some(location.into());
    }
    url::Url::parse(location)
        .ok()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok())
}

/// Names as a comma-separated list, or "none".
pub(crate) fn list_or_none<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.into_iter().collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Finds the repository for a command: `location` if given (a path or
/// URL), else a `.tablepin` folder in `start` or a parent of it, or
/// one of those folders that is itself a repository (made by
/// `--repo PATH init` or `Repo.init(path)`).
pub fn discover(location: Option<&str>, start: &std::path::Path) -> Result<String> {
    if let Some(l) = location {
        // A project folder holding `.tablepin` means that repository,
        // given as a path or a `file://` URL.
        if let Some(p) = local_folder(l).filter(|p| p.join(LOCAL_DIR).is_dir()) {
            return Ok(p.join(LOCAL_DIR).to_string_lossy().into_owned());
        }
        return Ok(l.to_string());
    }
    let mut dir = Some(start);
    while let Some(d) = dir {
        let candidate = d.join(LOCAL_DIR);
        if candidate.is_dir() {
            return Ok(candidate.to_string_lossy().into_owned());
        }
        if d.join(CONFIG).is_file() {
            return Ok(d.to_string_lossy().into_owned());
        }
        dir = d.parent();
    }
    Err(Error::NoRepository {
        start: start.display().to_string(),
    })
}

/// The store a new repository at `location` goes into (a local folder
/// is created if missing): [`Repo::init`] in two steps, for a caller
/// that wants the store's request counts (`Store::stats`) even when
/// [`Repo::init_store`] then fails.
pub fn store_for_init(location: &str, settings: &StoreSettings) -> Result<Store> {
    if let Some(folder) = local_folder(location) {
        std::fs::create_dir_all(&folder).map_err(|e| Error::Output {
            path: location.to_string(),
            message: e.to_string(),
        })?;
    }
    Ok(Store::open_with(location, settings)?)
}

/// The store of the repository at `location`: a local folder or
/// `file://` URL that does not exist is [`Error::NoRepository`]; any
/// other location that cannot be opened (a scheme this build does not
/// support, say) says why.
pub fn store_at(location: &str, settings: &StoreSettings) -> Result<Store> {
    Store::open_with(location, settings).map_err(|e| match e {
        StoreError::Location { .. } if local_folder(location).is_some() => Error::NoRepository {
            start: location.to_string(),
        },
        e => e.into(),
    })
}

impl Repo {
    /// Creates a repository at `location` (a folder, created if missing, or
    /// `memory://`).
    pub async fn init(location: &str, write: WriteSettings) -> Result<Repo> {
        Self::init_store(store_for_init(location, &StoreSettings::default())?, write).await
    }

    /// Creates a repository on a store the caller supplies: any
    /// `object_store::ObjectStore`, wrapped by [`Store::from_object_store`].
    /// The store must honour put-if-absent (`PutMode::Create`), as a local
    /// folder, memory, S3, GCS and Azure do: blobs and ref entries rely on
    /// it. A store that lets a second create of one object through is
    /// refused here ([`tablepin_store::StoreError::NoConditionalWrites`]).
    pub async fn init_store(store: Store, write: WriteSettings) -> Result<Repo> {
        let config = RepoConfig {
            format: REPO_FORMAT,
            write,
        };
        config.write.properties_check()?;
        store.check_conditional_writes().await?;
        let store = with_outboards_of(store, config.format);
        let bytes = serde_json::to_vec_pretty(&config)
            .map_err(|e| Error::Internal(format!("encoding the config: {e}")))?;
        match store.create_doc(CONFIG, Bytes::from(bytes)).await {
            Err(StoreError::Exists { .. }) => {
                return Err(Error::RepositoryExists {
                    path: store.location().to_string(),
                })
            }
            other => other?,
        }
        Ok(Repo {
            store: Arc::new(store),
            config,
            author: crate::Settings::default().author,
        })
    }

    /// Opens an existing repository.
    pub async fn open(location: &str) -> Result<Repo> {
        Self::open_store(store_at(location, &StoreSettings::default())?).await
    }

    /// Opens a repository over a store (tests, fault injection).
    pub async fn open_store(store: Store) -> Result<Repo> {
        let Some(bytes) = store.get_doc(CONFIG).await? else {
            return Err(Error::NoRepository {
                start: store.location().to_string(),
            });
        };
        let config: RepoConfig = serde_json::from_slice(&bytes).map_err(|source| {
            Error::Store(StoreError::Decode {
                path: CONFIG.into(),
                source,
            })
        })?;
        // A newer tablepin's repository may hold what this one cannot read
        // and would write what that one does not expect: refused at once,
        // before any read or write.
        if config.format > REPO_FORMAT {
            return Err(Error::Format(tablepin_format::FormatError::TooNew {
                what: "the repository (meta/config.json)",
                found: config.format,
                reads: REPO_FORMAT,
            }));
        }
        Ok(Repo {
            store: Arc::new(with_outboards_of(store, config.format)),
            config,
            author: crate::Settings::default().author,
        })
    }
}

/// The store, writing (and reading by hash pairs) the outboards of a
/// repository of `format`: format 3's 16 KiB chunk groups before format 4,
/// which older builds read.
pub(crate) fn with_outboards_of(store: Store, format: u32) -> Store {
    use tablepin_store::ranged::{GROUP_LOG, GROUP_LOG_FORMAT3};
    let log = match format >= tablepin_format::SMALL_GROUPS_FROM_FORMAT {
        true => GROUP_LOG,
        false => GROUP_LOG_FORMAT3,
    };
    store.with_outboard_group_log(log)
}
