//! Revisions: how a user names a version.
//!
//! `REV` is a tag, a branch, a version id or a unique prefix of one (at
//! least 4 hex digits), any of these followed by `~N` (N first parents
//! back), or `@TIME` / `BRANCH@TIME` (RFC 3339): the version the branch
//! (default `main`) named at that time, read from the branch's log, so it
//! answers "what did `main` hold then", not "which commit has an older date".
//! A time may be a date alone (`@2010-11-30`: midnight UTC at its start).
//! `HEAD` is the head of the default branch (`main`). A name that is both
//! a tag and a branch (possible in repositories made before such names were
//! refused) is ambiguous and refused, never silently one of the two.

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;
use tablepin_format::{ObjectId, RefKind, VersionId};
use tablepin_store::layout;

use super::Repo;
use crate::error::{Error, Result};

/// An old version id that an erasure replaced, and what stands for it now.
#[derive(Debug, Clone, Serialize)]
pub struct Replaced {
    /// The version id asked for.
    pub old: VersionId,
    /// The version that stands for it now (after every later erasure).
    pub new: VersionId,
    /// The erasures that replaced it, oldest first.
    pub erasures: Vec<ReplacedBy>,
}

/// One erasure that replaced a version.
#[derive(Debug, Clone, Serialize)]
pub struct ReplacedBy {
    /// The audit record's number (`tablepin audit`).
    pub audit: u64,
    /// When the erasure ran (ms).
    pub time_ms: i64,
    /// Its reason.
    pub reason: String,
    /// The version it wrote in place of the one before.
    pub new: VersionId,
}

impl Repo {
    /// Resolves a revision to a version id. A version id that an erasure
    /// replaced resolves to its replacement ([`Repo::snapshot`] says so,
    /// in [`crate::Snapshot::replaced`]).
    pub async fn resolve(&self, rev: &str) -> Result<VersionId> {
        Ok(self.resolve_noted(rev).await?.0)
    }

    /// Resolves a revision, saying when it named a version that an erasure
    /// replaced: reading it then reads the replacement, which holds the
    /// same rows but the erased ones.
    pub(crate) async fn resolve_noted(&self, rev: &str) -> Result<(VersionId, Option<Replaced>)> {
        if let Some((branch, time)) = rev.split_once('@').filter(|_| !rev.contains('~')) {
            let at = self.at_time(branch, time).await?;
            return Ok(match self.erased_since(at).await? {
                Some(r) => (r.new, Some(r)),
                None => (at, None),
            });
        }
        match self.resolve_stored(rev).await {
            Err(Error::UnknownRev { .. }) if is_hex_prefix(rev) => {
                match self.replaced(rev).await? {
                    Some(r) => Ok((r.new, Some(r))),
                    None => Err(self.expired_by_prefix(rev).await?.unwrap_or_else(|| {
                        Error::UnknownRev {
                            rev: rev.to_string(),
                        }
                    })),
                }
            }
            other => other.map(|id| (id, None)),
        }
    }

    /// The erasures that replaced the version a hex prefix names, from the
    /// audit records; `None` when no erased version id starts so.
    pub(crate) async fn replaced(&self, prefix: &str) -> Result<Option<Replaced>> {
        let lower = prefix.to_ascii_lowercase();
        let records = self.erasure().audit().await?;
        let mut by_old = std::collections::HashMap::new();
        for r in &records {
            for v in &r.versions {
                by_old.insert(
                    v.old,
                    ReplacedBy {
                        audit: r.seq,
                        time_ms: r.time_ms,
                        reason: r.reason.clone(),
                        new: v.new,
                    },
                );
            }
        }
        let matches: Vec<VersionId> = by_old
            .keys()
            .filter(|v| v.to_string().starts_with(&lower))
            .copied()
            .collect();
        let old = match matches.as_slice() {
            [] => return Ok(None),
            [one] => *one,
            many => return Err(ambiguous(prefix, many)),
        };
        let mut erasures = Vec::new();
        let mut at = old;
        while let Some(step) = by_old.get(&at) {
            if erasures.len() > by_old.len() {
                break;
            }
            at = step.new;
            erasures.push(step.clone());
        }
        Ok(Some(Replaced {
            old,
            new: at,
            erasures,
        }))
    }

    async fn resolve_stored(&self, rev: &str) -> Result<VersionId> {
        let unknown = || Error::UnknownRev {
            rev: rev.to_string(),
        };
        if let Some((base, n)) = rev.rsplit_once('~') {
            let n: usize = n.parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "'{rev}': the number after '~' must be a whole number, as in main~2"
                ))
            })?;
            let mut id = Box::pin(self.resolve_stored(base)).await?;
            for i in 0..n {
                // Through expired versions, as `log` walks.
                let parents = match self.version(&id).await {
                    Ok(v) => v.parents,
                    Err(e) if e.is_missing() => match self.tombstone(&id).await? {
                        Some(t) => t.parents,
                        None => return Err(e),
                    },
                    Err(e) => return Err(e),
                };
                id = *parents.first().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "'{rev}' goes back {n} versions, but '{base}' has only {i} before it"
                    ))
                })?;
            }
            return match self.erased_since(id).await? {
                Some(r) => Ok(r.new),
                None => Ok(id),
            };
        }
        if rev == "HEAD" {
            return Box::pin(self.resolve_stored(super::DEFAULT_BRANCH)).await;
        }
        if let Some((branch, time)) = rev.split_once('@') {
            let at = self.at_time(branch, time).await?;
            return Ok(self.erased_since(at).await?.map_or(at, |r| r.new));
        }
        let tag = self.store().ref_head(RefKind::Tag, rev).await?;
        let branch = self.store().ref_head(RefKind::Branch, rev).await?;
        match (tag.and_then(|e| e.target), branch.and_then(|e| e.target)) {
            (Some(t), Some(b)) if t != b => {
                return Err(Error::TagAndBranch {
                    rev: rev.to_string(),
                    tag: t.short(12),
                    branch: b.short(12),
                })
            }
            (Some(t), _) | (None, Some(t)) => return Ok(t),
            (None, None) => {}
        }
        if !is_hex_prefix(rev) {
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
            many => Err(ambiguous(rev, many)),
        }
    }

    /// The version a branch named at a time, as its ref log says: the
    /// version as it was then, which an erasure may have replaced since.
    async fn at_time(&self, branch: &str, time: &str) -> Result<VersionId> {
        let branch = match branch {
            "" | "HEAD" => super::DEFAULT_BRANCH,
            b => b,
        };
        let t_ms = parse_time(time)?;
        let log = self.store().ref_log(RefKind::Branch, branch).await?;
        if log.is_empty() {
            return Err(self.unknown_ref(RefKind::Branch, branch).await);
        }
        log.iter()
            .rev()
            .find(|e| e.time_ms <= t_ms)
            .and_then(|e| e.target)
            .ok_or_else(|| Error::NoVersionAt {
                branch: branch.to_string(),
                time: time.to_string(),
                first: log
                    .iter()
                    .find(|e| e.target.is_some())
                    .and_then(|e| chrono::DateTime::from_timestamp_millis(e.time_ms))
                    .map_or_else(|| "no time".into(), |d| d.to_rfc3339()),
            })
    }

    /// The erasures that replaced `id` when its record is gone because
    /// of them; `None` when it is stored. A version gc expired is
    /// [`Error::Expired`]; a record missing for another reason stays the
    /// error it is.
    pub(crate) async fn erased_since(&self, id: VersionId) -> Result<Option<Replaced>> {
        match self.version(&id).await {
            Ok(_) => Ok(None),
            Err(e) if e.is_missing() => match self.replaced(&id.to_string()).await? {
                Some(r) => Ok(Some(r)),
                None => match self.tombstone(&id).await? {
                    Some(t) => Err(Error::expired(&t)),
                    None => Err(e),
                },
            },
            Err(e) => Err(e),
        }
    }

    /// [`Error::Expired`] for the one expired version whose id starts with
    /// `prefix`, if there is one.
    async fn expired_by_prefix(&self, prefix: &str) -> Result<Option<Error>> {
        let lower = prefix.to_ascii_lowercase();
        let ids: Vec<VersionId> = self
            .store()
            .list_docs(layout::TOMBSTONES)
            .await?
            .iter()
            .filter_map(|p| layout::tombstone_id(p)?.parse().ok())
            .filter(|v: &VersionId| v.to_string().starts_with(&lower))
            .collect();
        match ids.as_slice() {
            [] => Ok(None),
            [one] => Ok(self.tombstone(one).await?.map(|t| Error::expired(&t))),
            many => Err(ambiguous(prefix, many)),
        }
    }

    /// What every branch and tag names now.
    pub(crate) async fn ref_targets(&self) -> Result<Vec<VersionId>> {
        let mut roots = Vec::new();
        for kind in [RefKind::Branch, RefKind::Tag] {
            roots.extend(self.refs().list(kind).await?.into_iter().map(|r| r.target));
        }
        Ok(roots)
    }

    /// Every version that a ref names or named, and their ancestors, that is
    /// still stored.
    pub(crate) async fn known_versions(&self) -> Result<BTreeSet<VersionId>> {
        let mut roots = Vec::new();
        for kind in [RefKind::Branch, RefKind::Tag] {
            for name in self.store().ref_names(kind).await? {
                for e in self.store().ref_log(kind, &name).await? {
                    roots.extend(e.target);
                }
            }
        }
        self.stored_ancestry(roots, None).await
    }

    /// The stored versions among `roots` and their ancestors, walking
    /// through expired versions' tombstones. With `listed` (the blobs a
    /// listing of the store found), a version the listing lacks is not
    /// stored, whatever a read of it gives: a read may be served from this
    /// process's memory or this machine's cache of blobs that another
    /// machine's gc or erasure has deleted since, and a gc or an erasure
    /// must not plan on those.
    pub(crate) async fn stored_ancestry(
        &self,
        mut todo: Vec<VersionId>,
        listed: Option<&HashSet<ObjectId>>,
    ) -> Result<BTreeSet<VersionId>> {
        let mut visited = BTreeSet::new();
        let mut stored = BTreeSet::new();
        while let Some(id) = todo.pop() {
            if !visited.insert(id) {
                continue;
            }
            let read = if listed.is_some_and(|l| !l.contains(&id.0)) {
                None
            } else {
                match self.version(&id).await {
                    Ok(v) => Some(v),
                    // Present but damaged: that is damage, not an unknown
                    // revision.
                    Err(e) if !e.is_missing() => return Err(e),
                    Err(_) => None,
                }
            };
            match read {
                Some(v) => {
                    stored.insert(id);
                    todo.extend(v.parents);
                }
                // Gone: expired by gc (its tombstone names its parents) or
                // replaced by an erasure.
                None => {
                    if let Some(t) = self.tombstone(&id).await? {
                        todo.extend(t.parents);
                    }
                }
            }
        }
        Ok(stored)
    }
}

/// A prefix that names several versions.
fn ambiguous(rev: &str, matches: &[VersionId]) -> Error {
    Error::AmbiguousRev {
        rev: rev.to_string(),
        candidates: matches
            .iter()
            .map(|v| v.short(12))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// 4 to 64 hex digits: what a version id prefix can be.
fn is_hex_prefix(rev: &str) -> bool {
    rev.len() >= 4 && rev.len() <= 64 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// A time of a revision: RFC 3339, or a date alone (midnight UTC).
fn parse_time(time: &str) -> Result<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(time) {
        return Ok(t.timestamp_millis());
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(time, "%Y-%m-%d") {
        return Ok(d
            .and_time(chrono::NaiveTime::MIN)
            .and_utc()
            .timestamp_millis());
    }
    Err(Error::InvalidArgument(format!(
        "'{time}' is not an RFC 3339 time or a date; write 2010-11-30T00:00:00Z or 2010-11-30"
    )))
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn a_date_alone_is_midnight_utc_and_equals_its_rfc3339_form() {
        assert_eq!(
            parse_time("2010-11-30").unwrap(),
            parse_time("2010-11-30T00:00:00Z").unwrap()
        );
        assert!(parse_time("2010-13-30").is_err());
        assert!(parse_time("yesterday").is_err());
    }
}
