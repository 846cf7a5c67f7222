//! Revisions: how a user names a version.
//!
//! `REV` is a tag, a branch, a version id or a unique prefix of one (at
//! least 4 hex digits), any of these followed by `~N` (N first parents
//! back), or `@TIME` / `BRANCH@TIME` (RFC 3339): the version the branch
//! (default `main`) named at that time, read from the branch's log, so it
//! answers "what did `main` hold then", not "which commit has an older date".
//! Tags win over branches of the same name, as in Git.

use std::collections::BTreeSet;

use tablepin_format::{RefKind, VersionId};

use super::Repo;
use crate::error::{Error, Result};

impl Repo {
    /// Resolves a revision to a version id.
    pub async fn resolve(&self, rev: &str) -> Result<VersionId> {
        let unknown = || Error::UnknownRev {
            rev: rev.to_string(),
        };
        if let Some((base, n)) = rev.rsplit_once('~') {
            let n: usize = n.parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "'{rev}': the number after '~' must be a whole number, as in main~2"
                ))
            })?;
            let mut id = Box::pin(self.resolve(base)).await?;
            for i in 0..n {
                let v = self.version(&id).await?;
                id = *v.parents.first().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "'{rev}' goes back {n} versions, but '{base}' has only {i} before it"
                    ))
                })?;
            }
            return Ok(id);
        }
        if let Some((branch, time)) = rev.split_once('@') {
            let branch = if branch.is_empty() { "main" } else { branch };
            let t = chrono::DateTime::parse_from_rfc3339(time).map_err(|e| {
                Error::InvalidArgument(format!(
                    "'{time}' is not an RFC 3339 time ({e}); write it as 2010-11-30T00:00:00Z"
                ))
            })?;
            let t_ms = t.timestamp_millis();
            let log = self.store().ref_log(RefKind::Branch, branch).await?;
            if log.is_empty() {
                return Err(Error::UnknownRef {
                    kind: "branch",
                    name: branch.to_string(),
                });
            }
            return log
                .iter()
                .rev()
                .find(|e| e.time_ms <= t_ms)
                .and_then(|e| e.target)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "branch '{branch}' named no version at {time}; its first commit is later"
                    ))
                });
        }
        for kind in [RefKind::Tag, RefKind::Branch] {
            if let Some(e) = self.store().ref_head(kind, rev).await? {
                if let Some(t) = e.target {
                    return Ok(t);
                }
            }
        }
        let is_hex =
            rev.len() >= 4 && rev.len() <= 64 && rev.chars().all(|c| c.is_ascii_hexdigit());
        if !is_hex {
            return Err(unknown());
        }
        let lower = rev.to_ascii_lowercase();
        let matches: Vec<VersionId> = self
            .known_versions()
            .await?
            .into_iter()
            .filter(|v| v.to_string().starts_with(&lower))
            .collect();
        match matches.as_slice() {
            [] => Err(unknown()),
            [one] => Ok(*one),
            many => Err(Error::AmbiguousRev {
                rev: rev.to_string(),
                candidates: many
                    .iter()
                    .map(|v| v.short(12))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Every stored version reachable from the refs as they are now.
    pub async fn reachable_versions(&self) -> Result<BTreeSet<VersionId>> {
        let mut roots = Vec::new();
        for kind in [RefKind::Branch, RefKind::Tag] {
            roots.extend(self.refs(kind).await?.into_iter().map(|r| r.target));
        }
        self.stored_ancestry(roots).await
    }

    /// Every version that a ref names or named, and their ancestors, that is
    /// still stored.
    pub async fn known_versions(&self) -> Result<BTreeSet<VersionId>> {
        let mut roots = Vec::new();
        for kind in [RefKind::Branch, RefKind::Tag] {
            for name in self.store().ref_names(kind).await? {
                for e in self.store().ref_log(kind, &name).await? {
                    roots.extend(e.target);
                }
            }
        }
        self.stored_ancestry(roots).await
    }

    /// The stored versions among `roots` and their ancestors, walking
    /// through expired versions' tombstones.
    async fn stored_ancestry(&self, mut todo: Vec<VersionId>) -> Result<BTreeSet<VersionId>> {
        let mut visited = BTreeSet::new();
        let mut stored = BTreeSet::new();
        while let Some(id) = todo.pop() {
            if !visited.insert(id) {
                continue;
            }
            if let Ok(v) = self.version(&id).await {
                stored.insert(id);
                todo.extend(v.parents);
            } else if let Some(t) = self.tombstone(&id).await? {
                todo.extend(t.parents);
            }
        }
        Ok(stored)
    }
}
