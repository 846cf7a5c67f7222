//! Repositories in a bucket: `s3://`, `gs://` and `az://` URLs opened with
//! `object_store`'s builders, which read each cloud's usual environment
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`: keys, regions, endpoints, instance and
//! workload credentials). Nothing here reads, prints or stores a secret: a
//! URL carrying credentials is refused, and errors name the URL only.

use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::ObjectStore;

/// The cloud a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Amazon S3 and S3-compatible servers (`s3://`, `s3a://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage and Data Lake (`az://`, `azure://`, `abfs://`, `abfss://`).
    Azure,
}

impl Backend {
    /// The backend of a URL scheme, if it names one.
    pub fn of_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "az" | "azure" | "abfs" | "abfss" | "adl" => Some(Self::Azure),
            _ => None,
        }
    }
}

/// A location fit to print: a URL's user name, password and query (where
/// a careless user might put a key) are left out.
pub fn redacted(location: &str) -> String {
    match url::Url::parse(location) {
        Ok(mut url)
            if !url.username().is_empty() || url.password().is_some() || url.query().is_some() =>
        {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.to_string()
        }
        _ => location.to_string(),
    }
}

/// The way out of a failure whose cause a user may not see in the store's
/// words: an S3 client that found no keys in the environment asks the
/// instance metadata service (169.254.169.254), and reports that failure.
pub(crate) fn hint(e: &object_store::Error) -> &'static str {
    if e.to_string().contains("169.254.169.254") {
        "; no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_REGION), or run where an instance role provides them"
    } else {
        ""
    }
}

/// Why a remote location could not be opened (the store turns it into
/// [`crate::StoreError::Location`]).
pub(crate) type Refusal = String;

/// The object store for a bucket URL, under the URL's path as a prefix.
pub(crate) fn open(url: &url::Url, backend: Backend) -> Result<Arc<dyn ObjectStore>, Refusal> {
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
        return Err(
            "credentials and options do not belong in the repository URL; \
                    set them in the environment (AWS_*, GOOGLE_*, AZURE_* variables)"
                .to_string(),
        );
    }
    let store: Arc<dyn ObjectStore> = match backend {
        Backend::S3 => {
            let builder = AmazonS3Builder::from_env().with_url(url.as_str());
            if builder
                .get_config_value(&AmazonS3ConfigKey::ConditionalPut)
                .is_some_and(|v| v == "disabled")
            {
                return Err(
                    "conditional writes are disabled (AWS_CONDITIONAL_PUT=disabled): two writers \
                     could both move a branch; tablepin needs put-if-absent"
                        .to_string(),
                );
            }
            Arc::new(builder.build().map_err(|e| e.to_string())?)
        }
        Backend::Gcs => Arc::new(
            GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .build()
                .map_err(|e| e.to_string())?,
        ),
        Backend::Azure => Arc::new(
            MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .build()
                .map_err(|e| e.to_string())?,
        ),
    };
    let prefix = url.path().trim_matches('/');
    if prefix.is_empty() {
        return Ok(store);
    }
    let prefix = Path::from_url_path(prefix).map_err(|e| format!("bad path in the URL: {e}"))?;
    Ok(Arc::new(PrefixStore::new(store, prefix)))
}
