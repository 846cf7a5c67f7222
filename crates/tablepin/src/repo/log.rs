//! The log: the versions a ref reached, newest first, with what each
//! changed.

use super::*;

/// One line of `log`.
#[derive(Debug, Clone, Serialize)]
pub struct LogEntry {
    /// The version.
    pub id: VersionId,
    /// Its parents.
    pub parents: Vec<VersionId>,
    /// Commit time (ms).
    pub time_ms: i64,
    /// Author.
    pub author: String,
    /// Message.
    pub message: String,
    /// Each table's rows and content hash.
    pub tables: BTreeMap<String, (u64, ContentHash)>,
    /// What the commit changed, by table.
    pub changes: BTreeMap<String, TableChange>,
    /// The version was expired by retention: only its tombstone is left.
    pub expired: bool,
    /// The version this one replaced (erasure).
    pub replaces: Option<VersionId>,
}

/// What `log` lists.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// At most this many entries.
    pub max: Option<usize>,
    /// Only versions that changed this table.
    pub table: Option<String>,
    /// Follow every parent (a merge's second parent too), newest first,
    /// a version always before its parents; default: first parents only.
    pub all_parents: bool,
}

impl Repo {
    /// The versions of a branch, newest first, following first parents
    /// (every parent with `opts.all_parents`), stopping after `opts.max`
    /// entries and keeping only the versions that changed `opts.table`
    /// when given. Expired versions appear from their tombstones.
    pub async fn log(&self, branch: &str, opts: &LogOptions) -> Result<Vec<LogEntry>> {
        let head = self.refs().target(RefKind::Branch, branch).await?;
        // Read only when a version is gone: a damaged audit record then
        // stops only the logs that need it.
        let mut replaced: Option<std::collections::HashMap<VersionId, VersionId>> = None;
        let mut out: Vec<LogEntry> = Vec::new();
        // (entry, version, table, snapshot) for the snapshots to read.
        let mut snapshots: Vec<(usize, VersionId, String, ObjectId)> = Vec::new();
        // Versions to list, newest first: (time, id), the newest popped
        // first (with first parents only there is never more than one).
        let mut frontier: Vec<(i64, VersionId)> = vec![(i64::MAX, head)];
        let mut queued = std::collections::HashSet::from([head]);
        let wanted = |e: &LogEntry| {
            opts.table
                .as_ref()
                .is_none_or(|t| e.changes.contains_key(t))
        };
        while let Some((time, id)) = pop_newest(&mut frontier) {
            if out.len() >= opts.max.unwrap_or(usize::MAX) {
                break;
            }
            let next: Vec<VersionId>;
            match self.store.get_blob(&id.0).await {
                Ok(bytes) => {
                    let v: Version = decode_manifest("version", &bytes)?;
                    // Each table's rows and hash are filled in below, from
                    // snapshots read all at once.
                    let tables = BTreeMap::new();
                    for (name, sid) in &v.tables {
                        snapshots.push((out.len(), id, name.clone(), *sid));
                    }
                    next = follow(&v.parents, opts.all_parents);
                    let e = LogEntry {
                        id,
                        parents: v.parents,
                        time_ms: v.time_ms,
                        author: v.author,
                        message: v.message,
                        tables,
                        changes: v.changes,
                        expired: false,
                        replaces: v.replaces,
                    };
                    if wanted(&e) {
                        out.push(e);
                    } else {
                        snapshots.retain(|(at, ..)| *at < out.len());
                    }
                }
                Err(StoreError::NotFound { .. }) => match self.tombstone(&id).await? {
                    Some(t) => {
                        next = follow(&t.parents, opts.all_parents);
                        let e = LogEntry {
                            id,
                            parents: t.parents,
                            time_ms: t.time_ms,
                            author: String::new(),
                            message: t.message,
                            tables: t.tables,
                            changes: BTreeMap::new(),
                            expired: true,
                            replaces: None,
                        };
                        // What an expired version changed is not kept.
                        if opts.table.is_none() {
                            out.push(e);
                        }
                    }
                    None => {
                        if replaced.is_none() {
                            replaced = Some(self.replacements().await?);
                        }
                        match replaced.as_ref().and_then(|r| r.get(&id)) {
                            // An erasure replaced it: history goes on
                            // through its replacement.
                            Some(new) => next = vec![*new],
                            None => {
                                return Err(Error::version_record(
                                    id,
                                    StoreError::NotFound {
                                        path: layout::blob(&id.0).to_string(),
                                    },
                                ))
                            }
                        }
                    }
                },
                Err(source) => return Err(Error::version_record(id, source)),
            }
            for p in next {
                if queued.insert(p) {
                    let t = match opts.all_parents {
                        true => self.version_time(&p).await?.unwrap_or(time),
                        false => time,
                    };
                    frontier.push((t.min(time), p));
                }
            }
        }
        self.fill_log_tables(&mut out, snapshots).await?;
        Ok(out)
    }

    /// A version's commit time, from its record or its tombstone (`None`:
    /// neither is stored).
    pub(crate) async fn version_time(&self, id: &VersionId) -> Result<Option<i64>> {
        match self.store.get_blob(&id.0).await {
            Ok(bytes) => Ok(Some(decode_manifest::<Version>("version", &bytes)?.time_ms)),
            Err(StoreError::NotFound { .. }) => Ok(self.tombstone(id).await?.map(|t| t.time_ms)),
            Err(source) => Err(Error::version_record(*id, source)),
        }
    }

    /// Fills each log entry's tables with their rows and content hash,
    /// reading every distinct snapshot once, several at a time: the walk
    /// along the parents is one read after another, these need not be.
    pub(crate) async fn fill_log_tables(
        &self,
        out: &mut [LogEntry],
        snapshots: Vec<(usize, VersionId, String, ObjectId)>,
    ) -> Result<()> {
        let mut first: BTreeMap<ObjectId, (VersionId, String)> = BTreeMap::new();
        for (_, id, name, sid) in &snapshots {
            first.entry(*sid).or_insert_with(|| (*id, name.clone()));
        }
        let reads = first.into_iter().map(|(sid, (id, name))| async move {
            let s = self.load_snapshot(&id, &name, &sid).await?;
            Ok::<_, Error>((sid, (s.rows, s.content_hash)))
        });
        let read: BTreeMap<ObjectId, (u64, ContentHash)> = futures::stream::iter(reads)
            .buffered(16)
            .try_collect()
            .await?;
        for (at, _, name, sid) in snapshots {
            if let (Some(e), Some(facts)) = (out.get_mut(at), read.get(&sid)) {
                e.tables.insert(name, *facts);
            }
        }
        Ok(())
    }
}
