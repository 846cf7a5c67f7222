//! `upgrade`: a repository of an older format brought to this build's
//! ([`REPO_FORMAT`]).
//!
//! Format 3 keeps a BLAKE3 outboard beside every blob of 1 MiB or more, so
//! that a reader can fetch and verify any part of it
//! (`tablepin_store::ranged`). A repository of format 1 or 2 is read and
//! written as it is (new large blobs get their outboard; the older ones are
//! read whole); `upgrade` writes the older large blobs' outboards, each from
//! the blob itself, read from the repository and checked against its name,
//! then the config's format number. What it would do is planned first with
//! no write ([`UpgradePlan`]); a run stopped half way leaves a repository
//! of its old format with some more outboards, which every build reads, and
//! running it again finishes.
//!
//! A build of format 2 writing meanwhile may store a large blob without its
//! outboard: once the config says 3 such a build refuses the repository,
//! and the run lists the blobs again and writes the outboards still
//! missing. `verify` names any large blob of a format-3 repository that has
//! none, and `upgrade` (run on a repository of format 3 as well) writes it.

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;
use tablepin_store::ranged::OUTBOARD_FROM;
use tablepin_store::BlobMeta;

use super::*;

/// The chunk group of the outboards `upgrade` writes: the format it takes
/// the repository to writes them so.
const TARGET_GROUP_LOG: u8 = tablepin_store::ranged::GROUP_LOG;

/// What `upgrade` would do.
#[derive(Debug, Clone, Serialize)]
pub struct UpgradePlan {
    /// The repository's format now.
    pub from: u32,
    /// The format it would have.
    pub to: u32,
    /// The blobs of 1 MiB or more that have no outboard, each to be read
    /// whole once.
    pub blobs: Vec<LackingBlob>,
    /// Their bytes.
    pub bytes: u64,
}

/// A blob without the outboard its size calls for.
#[derive(Debug, Clone, Serialize)]
pub struct LackingBlob {
    /// The blob.
    pub blob: ObjectId,
    /// Its size in bytes.
    pub bytes: u64,
}

/// What `upgrade` did.
#[derive(Debug, Clone, Serialize)]
pub struct UpgradeReport {
    /// The repository's format before.
    pub from: u32,
    /// Its format now.
    pub to: u32,
    /// Outboards written.
    pub outboards_written: u64,
    /// Bytes of blobs read to write them.
    pub bytes_read: u64,
    /// Seconds taken.
    pub seconds: f64,
}

/// The blobs of `blobs` that call for an outboard and are not in
/// `outboards`, by name.
fn lacking(blobs: &[BlobMeta], outboards: &HashSet<ObjectId>) -> Vec<LackingBlob> {
    blobs
        .iter()
        .filter(|b| b.size >= OUTBOARD_FROM as u64 && !outboards.contains(&b.id))
        .map(|b| LackingBlob {
            blob: b.id,
            bytes: b.size,
        })
        .collect()
}

/// Blobs read at once to write their outboards.
const AT_ONCE: usize = 4;

impl Repo {
    /// What [`Repo::upgrade`] would do; reads listings only.
    pub async fn upgrade_plan(&self) -> Result<UpgradePlan> {
        let blobs = self.lacking_outboards().await?;
        Ok(UpgradePlan {
            from: self.config().format,
            to: REPO_FORMAT.max(self.config().format),
            bytes: blobs.iter().map(|b| b.bytes).sum(),
            blobs,
        })
    }

    /// Brings the repository to this build's format: writes the outboard
    /// of every blob of 1 MiB or more that lacks one, then the config's
    /// format number, then the outboards of large blobs another process
    /// stored meanwhile (see the module's docs).
    pub async fn upgrade(&self, progress: &dyn Progress) -> Result<UpgradeReport> {
        let start = Instant::now();
        let plan = self.upgrade_plan().await?;
        let mut report = UpgradeReport {
            from: plan.from,
            to: plan.to,
            outboards_written: 0,
            bytes_read: 0,
            seconds: 0.0,
        };
        progress.begin("writing outboards", plan.bytes);
        self.write_outboards(&plan.blobs, progress, &mut report)
            .await?;
        if plan.from < plan.to {
            let config = RepoConfig {
                format: plan.to,
                write: self.config().write.clone(),
            };
            let bytes = serde_json::to_vec_pretty(&config)
                .map_err(|e| Error::Internal(format!("encoding the config: {e}")))?;
            self.store()
                .replace_doc(layout::CONFIG, Bytes::from(bytes))
                .await?;
            let late = self.lacking_outboards().await?;
            self.write_outboards(&late, progress, &mut report).await?;
        }
        progress.end();
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    async fn lacking_outboards(&self) -> Result<Vec<LackingBlob>> {
        let blobs = self.store().list_blobs().await?;
        let outboards = self.store().list_outboards().await?;
        Ok(lacking(&blobs, &outboards))
    }

    async fn write_outboards(
        &self,
        blobs: &[LackingBlob],
        progress: &dyn Progress,
        report: &mut UpgradeReport,
    ) -> Result<()> {
        let store = self.store();
        // Owned ids, so that the stream's future is `Send` for any caller
        // (a closure over borrowed items is not general enough for it).
        let ids: Vec<ObjectId> = blobs.iter().map(|b| b.blob).collect();
        let mut written = futures::stream::iter(ids)
            .map(|id| async move { store.write_outboard(&id, TARGET_GROUP_LOG).await })
            .buffer_unordered(AT_ONCE);
        while let Some(read) = written.next().await {
            let read = read?;
            progress.advance(read);
            report.outboards_written += 1;
            report.bytes_read += read;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_blobs_of_a_mib_or_more_without_an_outboard_lack_one() {
        let meta = |n: u8, size: u64| BlobMeta {
            id: ObjectId::of(&[n]),
            size,
            last_modified: chrono::DateTime::UNIX_EPOCH,
        };
        let mib = OUTBOARD_FROM as u64;
        let blobs = [
            meta(1, mib - 1),
            meta(2, mib),
            meta(3, 5 * mib),
            meta(4, 10),
        ];
        let has = HashSet::from([blobs[2].id]);
        let got: Vec<(ObjectId, u64)> = lacking(&blobs, &has)
            .into_iter()
            .map(|b| (b.blob, b.bytes))
            .collect();
        assert_eq!(got, [(blobs[1].id, mib)]);
    }
}
