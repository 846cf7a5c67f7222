//! Garbage collection and erasure take turns.
//!
//! gc deletes the blobs that no kept version reaches. An erasure writes
//! replacement versions that reach old, shared data files, and they become
//! reachable only when it moves the refs onto them: a gc sweeping in
//! between could delete a file a replacement needs, and an erasure
//! deleting old versions could pull files from under a gc's plan. A commit
//! does not have this problem, because it freshens (writes again) every
//! blob it reuses, so a concurrent gc spares it as young; an erasure cannot
//! afford that (it would write every file of every version again).
//!
//! So each gc and erasure run holds a lease while it plans and while it
//! applies: a document `locks/<kind>-<random>.json`, created put-if-absent.
//! After creating its own, a run looks for anyone else's; if it finds one,
//! it deletes its own, waits a random, growing pause, and tries again
//! until its deadline. Two runs that start together may both step back;
//! never do both go on, because each created its lease before it looked.
//!
//! A run that steps back deletes its lease, except an erasure or a
//! streamed commit waiting for a gc: it keeps its lease while it waits, so
//! that the next gc finds it and steps back. Otherwise a loop of gc runs,
//! each starting as the last ends, could take the lease every time and
//! starve an erasure (as `writers_racing_gc_and_an_erase_on_s3` once
//! found). Exclusion does not depend on it: a run goes on only when it
//! finds no other lease at all.
//!
//! A streamed commit takes a lease of its own kind, for the same reason an
//! erasure does (it cannot write its blobs again when it lands); gc and
//! erasure wait for it, and streamed commits do not wait for each other.
//!
//! A lease whose process is gone (same host, no such process) or that is
//! older than [`LEASE_TTL_MS`] belonged to a run that crashed; it is
//! ignored, and removed by the next run that finds it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tablepin_store::layout;

use super::{now_ms, retry_pause, Repo};
use crate::error::{Error, Result};

/// A lease older than this is a crashed run's, wherever it ran.
pub(crate) const LEASE_TTL_MS: i64 = 3_600_000;

/// How long a run waits for another's lease to go.
pub(crate) const LEASE_WAIT: Duration = Duration::from_secs(60);

/// What holds a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseKind {
    /// A garbage collection.
    Gc,
    /// An erasure.
    Erase,
    /// A streamed commit (`repo::streamed`), which does not keep its
    /// blobs' bytes to write them again: gc and erasure wait for it, other
    /// commits do not.
    Commit,
}

impl LeaseKind {
    fn name(self) -> &'static str {
        match self {
            LeaseKind::Gc => "gc",
            LeaseKind::Erase => "erase",
            LeaseKind::Commit => "commit",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct LeaseDoc {
    kind: String,
    time_ms: i64,
    host: String,
    pid: u32,
}

/// A held lease; [`Lease::release`] gives it back.
#[derive(Debug)]
pub(crate) struct Lease {
    path: String,
}

/// This machine's name where Linux gives it; elsewhere none, and then no
/// lease is ever judged stale by its process (see [`stale`]).
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The lease's holder is certainly gone: a process of this host that no
/// longer runs, or a lease past its time.
fn stale(doc: &LeaseDoc, now: i64, this_host: &str) -> bool {
    if now - doc.time_ms > LEASE_TTL_MS {
        return true;
    }
    let proc_root = std::path::Path::new("/proc");
    !doc.host.is_empty()
        && doc.host == this_host
        && proc_root.join("self").exists()
        && !proc_root.join(doc.pid.to_string()).exists()
}

impl Repo {
    /// Takes the lease for a gc or an erasure, waiting up to
    /// [`LEASE_WAIT`] for another run's to go.
    pub(crate) async fn take_lease(&self, kind: LeaseKind) -> Result<Lease> {
        let started = Instant::now();
        let this_host = host();
        let mut attempt = 0u32;
        // An erasure or streamed commit that waits for a gc keeps its lease
        // meanwhile (see the module's documentation).
        let mut kept: Option<String> = None;
        loop {
            let path = match kept.take() {
                Some(path) => path,
                None => self.create_lease(kind, &this_host).await?,
            };
            let other = self.other_lease(&path, kind, &this_host).await;
            let other = match other {
                Ok(o) => o,
                Err(e) => {
                    self.store().delete_doc(&path).await?;
                    return Err(e);
                }
            };
            let Some((other_path, other_doc)) = other else {
                // Blobs this process read before may have been deleted
                // by a gc or erasure that held the lease since.
                self.store().forget_memo();
                return Ok(Lease { path });
            };
            let waited = started.elapsed() >= LEASE_WAIT;
            if kind != LeaseKind::Gc && other_doc.kind == LeaseKind::Gc.name() && !waited {
                kept = Some(path);
            } else {
                self.store().delete_doc(&path).await?;
            }
            if waited {
                return Err(Error::Busy {
                    what: format!(
                        "{} started at {} by process {} on '{}' ({other_path})",
                        match other_doc.kind.as_str() {
                            "gc" => "a garbage collection",
                            "commit" => "a streamed commit",
                            _ => "an erasure",
                        },
                        chrono::DateTime::from_timestamp_millis(other_doc.time_ms)
                            .map(|t| t.to_rfc3339())
                            .unwrap_or_default(),
                        other_doc.pid,
                        other_doc.host
                    ),
                    waited_s: started.elapsed().as_secs(),
                });
            }
            attempt += 1;
            tokio::time::sleep(retry_pause(attempt)).await;
        }
    }

    /// Creates a lease document of `kind` for this process; its path.
    async fn create_lease(&self, kind: LeaseKind, this_host: &str) -> Result<String> {
        let doc = LeaseDoc {
            kind: kind.name().into(),
            time_ms: now_ms(),
            host: this_host.to_string(),
            pid: std::process::id(),
        };
        let path = layout::lock(kind.name(), rand::random::<u64>());
        let bytes = serde_json::to_vec(&doc)
            .map_err(|e| Error::Internal(format!("encoding a lease: {e}")))?;
        self.store().create_doc(&path, Bytes::from(bytes)).await?;
        Ok(path)
    }

    /// A live lease other than `own` that a run of `kind` must wait for,
    /// if any (a streamed commit does not wait for another); stale ones
    /// are removed.
    async fn other_lease(
        &self,
        own: &str,
        kind: LeaseKind,
        this_host: &str,
    ) -> Result<Option<(String, LeaseDoc)>> {
        let now = now_ms();
        let commits = layout::lock_prefix(LeaseKind::Commit.name());
        for path in self.store().list_docs(layout::LOCKS).await? {
            if path == own || !path.ends_with(".json") {
                continue;
            }
            if kind == LeaseKind::Commit && path.starts_with(&commits) {
                continue;
            }
            let Some(bytes) = self.store().get_doc(&path).await? else {
                continue; // released meanwhile
            };
            match serde_json::from_slice::<LeaseDoc>(&bytes) {
                Ok(doc) if !stale(&doc, now, this_host) => return Ok(Some((path, doc))),
                // A crashed run's lease, or a lease file a crash left
                // half-written: nobody holds it.
                _ => self.store().delete_doc(&path).await?,
            }
        }
        Ok(None)
    }
}

impl Lease {
    /// Gives the lease back. A lease that cannot be deleted is left for
    /// the next run to find stale (its process will have ended), so this
    /// never fails the work done under it.
    pub(crate) async fn release(self, repo: &Repo) {
        let _ = repo.store().delete_doc(&self.path).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_stale_past_its_time_or_when_its_process_is_gone() {
        let now = 10 * LEASE_TTL_MS;
        let me = LeaseDoc {
            kind: "gc".into(),
            time_ms: now,
            host: "h".into(),
            pid: std::process::id(),
        };
        assert!(!stale(&me, now, "h"));
        let old = LeaseDoc {
            time_ms: now - LEASE_TTL_MS - 1,
            ..me.clone()
        };
        assert!(stale(&old, now, "h"));
        // No process has pid u32::MAX on Linux.
        let gone = LeaseDoc {
            pid: u32::MAX,
            ..me.clone()
        };
        assert!(stale(&gone, now, "h"));
        // Another host's process cannot be checked from here.
        assert!(!stale(&gone, now, "other"));
    }

    #[tokio::test]
    async fn gc_waits_for_a_streamed_commit_and_streamed_commits_not_for_each_other() {
        let repo = Repo::init("memory://", crate::WriteSettings::default())
            .await
            .unwrap();
        let a = repo.take_lease(LeaseKind::Commit).await.unwrap();
        // A second streamed commit goes on at once.
        let b = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            repo.take_lease(LeaseKind::Commit),
        )
        .await
        .expect("a streamed commit waited for another")
        .unwrap();
        let me = host();
        for kind in [LeaseKind::Gc, LeaseKind::Erase] {
            let own = format!("locks/{}-0.json", kind.name());
            let other = repo.other_lease(&own, kind, &me).await.unwrap();
            assert!(other.is_some_and(|(p, _)| p.starts_with("locks/commit-")));
        }
        a.release(&repo).await;
        b.release(&repo).await;
        let other = repo
            .other_lease("locks/gc-0.json", LeaseKind::Gc, &me)
            .await;
        assert!(other.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_erasure_waiting_for_a_gc_keeps_its_lease_so_the_next_gc_steps_back() {
        let repo = Repo::init("memory://", crate::WriteSettings::default())
            .await
            .unwrap();
        let gc = repo.take_lease(LeaseKind::Gc).await.unwrap();
        let me = host();
        let erasures = || async {
            let docs = repo.store().list_docs(layout::LOCKS).await.unwrap();
            docs.into_iter()
                .filter(|p| p.starts_with("locks/erase-"))
                .count()
        };
        let watch = async {
            // Until the erasure has looked once, then over several of its
            // pauses: its lease is there all along, for a gc to find.
            let mut seen = 0;
            for _ in 0..200 {
                if erasures().await == 1 {
                    seen += 1;
                    if seen == 40 {
                        break;
                    }
                } else {
                    assert_eq!(seen, 0, "the waiting erasure dropped its lease");
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert_eq!(seen, 40, "the erasure made no lease while it waited");
            let next_gc = repo
                .other_lease("locks/gc-1.json", LeaseKind::Gc, &me)
                .await
                .unwrap();
            assert!(next_gc.is_some_and(|(p, _)| p.starts_with("locks/erase-")));
            gc.release(&repo).await;
        };
        let (erase, ()) = tokio::join!(repo.take_lease(LeaseKind::Erase), watch);
        erase.unwrap().release(&repo).await;
        assert_eq!(erasures().await, 0);
    }
}
