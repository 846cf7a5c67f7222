//! Commits: the one way data gets into a repository ([`Transaction`]).
//!
//! A commit writes, in this order, the data blobs, the table snapshot, the
//! version, and last the ref entry that makes it visible (invariant 3): a
//! crash before the ref entry leaves only unreferenced blobs, which garbage
//! collection removes after its grace period. Refs move by creating entry
//! N+1 put-if-absent; a commit that loses that race plans again against the
//! new head (a rebase) and retries, in [`Transaction::commit`] alone.
//!
//! Its input is rows in memory, a stream of rows (`repo::streamed`), or
//! data files other processes wrote and described (`table::staged`): many
//! workers write, one driver commits them as one version.
//!
//! [`Transaction::plan`] decides and writes nothing, [`Transaction::apply`]
//! lands a reviewed plan, [`Transaction::attempt`] lands once or loses the
//! race, and [`Transaction::commit`] is the only retry loop. Staged files
//! (`Transaction::stage`, described as `StagedFiles`, JSON: blob, rows,
//! bytes, the sum of the rows' hashes, key range) enter the snapshot as
//! written; the driver reads only their key columns and the staged rows that
//! meet a parent key. Staged and streamed commits hold the commit lease,
//! since they cannot write their blobs again when they land; a staged file a
//! gc removed is named (`Error::StagedGone`) and nothing lands; files the
//! table holds already land nothing again (a driver that commits twice makes
//! one version).

mod land;
mod prepare;

pub(crate) use land::*;
pub use prepare::*;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tablepin_format::{
    encode_manifest, ContentHash, ObjectId, RefEntry, RefKind, TableChange, TableSnapshot, Version,
    VersionId, FORMAT_VERSION,
};
use tablepin_store::{PutOutcome, StoreError};

use super::lease::LeaseKind;
use super::streamed::{self, CommitInput};
use super::{check_name, closest, named, now_ms, Repo};
use crate::error::{Error, Result};
use crate::table::plan::{self, Mode, PlanInput, TablePlan};
use crate::table::{self, StagedFiles};

/// Options of a commit.
#[derive(Debug, Clone)]
pub struct CommitOptions {
    /// How the input relates to the table.
    pub mode: Mode,
    /// Key columns (first commit: declares them; later: must match).
    pub key: Option<Vec<String>>,
    /// Accept a schema change other than an added nullable column or a
    /// widened number.
    pub allow_schema_change: bool,
    /// Cast input columns to the table's types when no value changes (a
    /// value that would change refuses the commit, naming it).
    pub cast: bool,
    /// The commit message.
    pub message: String,
    /// The branch to commit to.
    pub branch: String,
    /// The commit time (default: now).
    pub time_ms: Option<i64>,
    /// Create `branch` if it does not exist, starting at the head of
    /// [`DEFAULT_BRANCH`] (or empty when that has none). Without it, a
    /// commit to a branch that does not exist is refused, unless the
    /// repository has no branch yet.
    pub create_branch: bool,
    /// How long to keep retrying when other writers move the branch first
    /// (each retry plans again against the new head, after a random pause
    /// that grows with the attempts).
    pub retry_for: std::time::Duration,
    /// The rows a streamed commit ([`Input::Stream`]) plans at a
    /// time: an input with more is committed a window at a time, with
    /// memory bounded by the window and not by the table (0: never).
    pub window_rows: usize,
    /// Make a version even when the commit changes nothing (the table's
    /// snapshot would be the head's own): true by default here, so that an
    /// embedder replaying a history (the lab) gets one version per step;
    /// the command line and Python refuse empty commits by default, as git
    /// does ([`CommitResult::empty`]).
    pub allow_empty: bool,
}

/// [`CommitOptions::window_rows`] by default: eight data files of the
/// default size, a few hundred MB of memory for a table of a dozen columns.
pub const DEFAULT_WINDOW_ROWS: usize = 2 * 1024 * 1024;

/// The branch commits go to when none is named.
pub const DEFAULT_BRANCH: &str = "main";

impl Default for CommitOptions {
    fn default() -> Self {
        Self {
            mode: Mode::Overwrite,
            key: None,
            allow_schema_change: false,
            cast: false,
            message: String::new(),
            branch: DEFAULT_BRANCH.into(),
            time_ms: None,
            create_branch: false,
            retry_for: std::time::Duration::from_secs(60),
            window_rows: DEFAULT_WINDOW_ROWS,
            allow_empty: true,
        }
    }
}

/// The pause before retry `attempt` (1, 2, …) of a commit that lost its
/// ref race: exponential from 5 ms up to 0.5 s, times a random factor in
/// [0.5, 1.5), so writers that collided do not collide again in step.
pub(crate) fn retry_pause(attempt: u32) -> std::time::Duration {
    use rand::Rng;
    let base_ms = (5u64 << attempt.min(7)).min(500) as f64;
    let factor: f64 = rand::rng().random_range(0.5..1.5);
    std::time::Duration::from_micros((base_ms * factor * 1000.0) as u64)
}

/// The attempts of a write that retries while other writers move its
/// branch first: each attempt after the first waits [`retry_pause`], and
/// none starts after `retry_for`.
pub(crate) struct Retry<'a> {
    branch: &'a str,
    retry_for: std::time::Duration,
    started: std::time::Instant,
    attempt: u32,
}

impl<'a> Retry<'a> {
    pub(crate) fn new(branch: &'a str, retry_for: std::time::Duration) -> Self {
        Self {
            branch,
            retry_for,
            started: std::time::Instant::now(),
            attempt: 0,
        }
    }

    /// Waits before the next attempt, or says the branch kept moving.
    pub(crate) async fn next(&mut self) -> Result<()> {
        if self.attempt > 0 {
            if self.started.elapsed() >= self.retry_for {
                return Err(Error::Conflict {
                    branch: self.branch.to_string(),
                    waited_s: self.started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(retry_pause(self.attempt)).await;
        }
        self.attempt += 1;
        Ok(())
    }
}

/// A commit that took this long from writing its first blob to landing
/// freshens everything it wrote after landing (see `write_commit`).
const SLOW_LANDING: std::time::Duration = std::time::Duration::from_secs(1);

/// What a commit did.
#[derive(Debug, Clone, Serialize)]
pub struct CommitResult {
    /// The new version.
    pub version: VersionId,
    /// Its parent.
    pub parent: Option<VersionId>,
    /// The branch it is on.
    pub branch: String,
    /// The table committed.
    pub table: String,
    /// Rows the table has now.
    pub rows: u64,
    /// Its content hash.
    pub content_hash: ContentHash,
    /// What changed.
    pub change: TableChange,
    /// Bytes of the version record itself (not in `change.bytes_new`).
    pub version_bytes: u64,
    /// Nothing changed and nothing was written (the commit did not ask
    /// for an empty version, [`CommitOptions::allow_empty`]): `version` is
    /// the branch head, which holds these rows already.
    pub empty: bool,
}

/// What one attempt of a commit came to ([`Transaction::attempt`]).
#[must_use = "a commit that lost the race for its branch stored nothing visible; try again or use Transaction::commit, which retries"]
#[derive(Debug, Clone)]
pub enum CommitOutcome {
    /// The version landed on the branch.
    Landed(CommitResult),
    /// Another writer moved the branch first: no version of this commit is
    /// visible. Planning again on the new head and trying again is safe.
    Lost {
        /// The branch.
        branch: String,
    },
}

/// A commit planned against a branch head and not written
/// ([`Transaction::plan`]): what decides it (table, branch, mode, key,
/// schema rules), the version it starts from, and the [`TablePlan`] of ids
/// and counts. It holds no rows; [`Transaction::apply`] applies it to the
/// same input, and only while the branch is where it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitPlan {
    /// The table.
    pub table: String,
    /// The branch.
    pub branch: String,
    /// How the input relates to the table.
    pub mode: Mode,
    /// The key columns given (`None`: the table's own).
    pub key: Option<Vec<String>>,
    /// See [`CommitOptions::allow_schema_change`].
    pub allow_schema_change: bool,
    /// See [`CommitOptions::cast`].
    pub cast: bool,
    /// See [`CommitOptions::create_branch`].
    pub create_branch: bool,
    /// The version the commit starts from (`None`: the first).
    pub parent: Option<VersionId>,
    /// What it writes and what it comes to.
    pub plan: TablePlan,
}

impl CommitPlan {
    /// `opts` with what decides the commit taken from this plan (what is
    /// left of `opts`: the message, the time, how long to retry).
    pub fn options(&self, opts: &CommitOptions) -> CommitOptions {
        CommitOptions {
            mode: self.mode,
            key: self.key.clone(),
            allow_schema_change: self.allow_schema_change,
            cast: self.cast,
            branch: self.branch.clone(),
            create_branch: self.create_branch,
            ..opts.clone()
        }
    }

    /// What of `other`'s table plan differs from this one's, named for a
    /// message; `None` when they are the same.
    fn differs_from(&self, other: &CommitPlan) -> Option<String> {
        let (a, b) = (&self.plan, &other.plan);
        let pairs = [
            ("schema", a.snapshot.schema == b.snapshot.schema),
            ("key", a.snapshot.key == b.snapshot.key),
            ("row count", a.snapshot.rows == b.snapshot.rows),
            (
                "content hash",
                a.snapshot.content_hash == b.snapshot.content_hash,
            ),
            ("files", a.snapshot.files == b.snapshot.files),
            ("writes", a.writes == b.writes),
            (
                "rows added, changed or deleted",
                (a.rows_added, a.rows_changed, a.rows_deleted)
                    == (b.rows_added, b.rows_changed, b.rows_deleted),
            ),
        ];
        let off: Vec<&str> = pairs
            .iter()
            .filter(|(_, same)| !same)
            .map(|(w, _)| *w)
            .collect();
        (!off.is_empty() || a != b).then(|| {
            if off.is_empty() {
                "plan".to_string()
            } else {
                off.join(", ")
            }
        })
    }
}

/// A commit to one table of a branch: the one way data gets into a
/// repository ([`Repo::transaction`]). It plans against the branch head
/// as read ([`Transaction::plan`]), lands or loses the race for the branch
/// ([`Transaction::attempt`]), or retries until it lands
/// ([`Transaction::commit`]); a saved plan is applied only while the
/// branch is where it was ([`Transaction::apply`]). Its input is rows,
/// a stream of rows, or files written elsewhere ([`Transaction::stage`]).
pub struct Transaction<'r> {
    repo: &'r Repo,
    table: String,
    opts: CommitOptions,
}

impl Repo {
    /// A commit of `table` with `opts` (branch, mode, key, schema rules,
    /// message): see [`Transaction`].
    pub fn transaction(&self, table: &str, opts: &CommitOptions) -> Transaction<'_> {
        Transaction {
            repo: self,
            table: table.to_string(),
            opts: opts.clone(),
        }
    }

    /// Commits rows to a table: [`Transaction::commit`] of
    /// [`Input::Rows`], which retries while other writers move the branch.
    pub async fn commit(
        &self,
        table: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        opts: &CommitOptions,
    ) -> Result<CommitResult> {
        self.transaction(table, opts)
            .commit(Input::Rows(schema, batches))
            .await
    }
}

impl Transaction<'_> {
    /// Commits the input, planning again on the new head and retrying
    /// while another writer moves the branch first, for up to
    /// [`CommitOptions::retry_for`]: the one retry loop of every commit.
    pub async fn commit(&self, input: Input<'_>) -> Result<CommitResult> {
        let mut input = self.prepare(input)?;
        let leased = input.needs_lease();
        self.leased(leased, self.retrying(&mut input)).await
    }

    /// Runs `work` holding the commit lease when `needed` (an input whose
    /// blobs no version names until it lands, which gc and erasure must
    /// leave alone meanwhile), released whatever the work gives.
    async fn leased<T>(
        &self,
        needed: bool,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let lease = match needed {
            true => Some(self.repo.take_lease(LeaseKind::Commit).await?),
            false => None,
        };
        let out = work.await;
        if let Some(lease) = lease {
            lease.release(self.repo).await;
        }
        out
    }

    async fn retrying(&self, input: &mut Prepared<'_>) -> Result<CommitResult> {
        let mut retry = Retry::new(&self.opts.branch, self.opts.retry_for);
        // Blobs earlier attempts created: still this commit's new bytes
        // when the attempt that lands finds them stored.
        let mut earlier = HashSet::new();
        loop {
            retry.next().await?;
            if let CommitOutcome::Landed(done) = self.once(input, &mut earlier).await? {
                return Ok(done);
            }
        }
    }

    /// One attempt, for a caller that retries on its own terms: it lands,
    /// or it loses the race for the branch to another writer
    /// ([`CommitOutcome::Lost`]: nothing became visible; blobs it wrote
    /// are left for gc). It never waits for the branch.
    pub async fn attempt(&self, input: Input<'_>) -> Result<CommitOutcome> {
        let mut input = self.prepare(input)?;
        let leased = input.needs_lease();
        self.leased(leased, self.once(&mut input, &mut HashSet::new()))
            .await
    }

    /// Plans the commit and writes nothing: the plan says exactly what
    /// [`Transaction::apply`] will write for the same input (`--dry-run`).
    pub async fn plan(&self, input: Input<'_>) -> Result<CommitPlan> {
        let input = self.whole(self.prepare(input)?)?;
        let head = self.head().await?;
        let planned = self.plan_prepared(head, &input, &self.opts).await?;
        Ok(saved_plan(&self.table, &self.opts, &planned))
    }

    /// Applies a saved plan ([`Transaction::plan`], maybe in another
    /// process, and reviewed) to the input it was made from: plans again
    /// and writes only if that gives the same plan. The table, branch,
    /// mode, key and schema rules come from the plan; the message and time
    /// from this transaction. Otherwise nothing is committed:
    /// [`Error::PlanOutdated`] when the branch moved since (including
    /// while this ran; it does not retry, since the plan was made on that
    /// head), [`Error::PlanInput`] for another input.
    pub async fn apply(&self, saved: &CommitPlan, input: Input<'_>) -> Result<CommitResult> {
        let opts = saved.options(&self.opts);
        let this = self.repo.transaction(&saved.table, &opts);
        let input = this.whole(this.prepare(input)?)?;
        self.leased(input.needs_lease(), this.apply_prepared(saved, &input))
            .await
    }

    async fn apply_prepared(
        &self,
        saved: &CommitPlan,
        input: &Prepared<'_>,
    ) -> Result<CommitResult> {
        let moved = |now: Option<VersionId>| Error::PlanOutdated {
            what: "commit",
            detail: format!(
                "branch '{}' is at {}, the plan starts from {}",
                saved.branch,
                now.map_or("no version".into(), |v| v.short(12)),
                saved.parent.map_or("no version".into(), |v| v.short(12)),
            ),
        };
        let planned = self
            .plan_prepared(self.head().await?, input, &self.opts)
            .await?;
        if planned.parent_id != saved.parent {
            return Err(moved(planned.parent_id));
        }
        if let Some(detail) = saved_plan(&self.table, &self.opts, &planned).differs_from(saved) {
            return Err(Error::PlanInput {
                table: self.table.clone(),
                detail: format!("{detail} differ"),
            });
        }
        let prior = staged_outcomes(input);
        match self
            .repo
            .write_commit_after(
                &self.table,
                planned,
                &prior,
                &self.opts,
                &mut HashSet::new(),
            )
            .await?
        {
            Some(done) => Ok(done),
            None => Err(moved(self.head().await?.and_then(|h| h.target))),
        }
    }

    /// The table's schema at the head of the branch this transaction
    /// commits to, or `None` when the branch or the table does not exist
    /// yet (a commit then makes it).
    pub async fn schema(&self) -> Result<Option<SchemaRef>> {
        let Some(head) = self
            .repo
            .store
            .ref_head(RefKind::Branch, &self.opts.branch)
            .await?
            .and_then(|h| h.target)
        else {
            return Ok(None);
        };
        let v = self.repo.version(&head).await?;
        if !v.tables.contains_key(&self.table) {
            return Ok(None);
        }
        let snapshot = self.repo.snapshot_of(&head, &v, &self.table).await?;
        Ok(Some(crate::table::schema_of(&snapshot)))
    }

    /// Compacts the table (`tablepin compact`): commits a version whose
    /// files hold the same rows written again as full files, in key order,
    /// without deletion vectors; the content hash does not change. `None`
    /// when the table is compact already (nothing is written). The
    /// transaction's mode and key are not used.
    pub async fn compact(&self) -> Result<Option<CommitResult>> {
        let opts = CommitOptions {
            mode: Mode::Compact,
            key: None,
            ..self.opts.clone()
        };
        let none = Arc::new(arrow::datatypes::Schema::empty());
        let this = self.repo.transaction(&self.table, &opts);
        match this.commit(Input::Rows(none, Vec::new())).await {
            Ok(done) => Ok(Some(done)),
            Err(Error::AlreadyCompact { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes rows as data files of this table for a later commit by
    /// another process ([`Input::Staged`]), and describes them: a worker of
    /// a job whose driver commits once. The rows take the table's schema
    /// at the branch head when it has one (as a commit would conform
    /// them) and are sorted by its key, which must be unique among them.
    /// The files are stored put-if-absent and referenced by no version
    /// until the commit: a job that dies before it leaves them to gc. In
    /// delete mode the rows need only the key columns: the keys are
    /// staged, and a delete commit of them removes the rows with those
    /// keys.
    pub async fn stage(&self, schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<StagedFiles> {
        let (schema, batches) = prepare_input(&self.table, &schema, batches, &self.opts)?;
        let head = self.head().await?;
        let (_, _, parent) = self.repo.parent_of(&head, &self.table, &self.opts).await?;
        let settings = &self.repo.config.write;
        let (staged, blobs) = match self.opts.mode {
            Mode::Delete => {
                table::staged::stage_keys(&self.table, parent.as_ref(), &schema, batches, settings)?
            }
            _ => table::staged::stage(
                &self.table,
                parent.as_ref(),
                &schema,
                batches,
                &self.opts.key,
                settings,
            )?,
        };
        futures::future::try_join_all(blobs.into_iter().map(|b| self.repo.store.put_blob(b)))
            .await?;
        Ok(staged)
    }

    fn prepare<'i>(&self, input: Input<'i>) -> Result<Prepared<'i>> {
        check_name("table", &self.table)?;
        check_name("branch", &self.opts.branch)?;
        Ok(match input {
            Input::Rows(schema, batches) => {
                let (s, b) = prepare_input(&self.table, &schema, batches, &self.opts)?;
                Prepared::Rows(s, b)
            }
            Input::Stream(src) => {
                let (schema, batches) = src.open()?;
                match streamed::whole_if_within(batches, self.opts.window_rows)? {
                    Some(all) => {
                        let (s, b) = prepare_input(&self.table, &schema, all, &self.opts)?;
                        Prepared::Rows(s, b)
                    }
                    None => {
                        crate::files::check_unique_columns(&schema).map_err(|m| {
                            Error::InvalidArgument(format!(
                                "the input of table '{}' {m}",
                                self.table
                            ))
                        })?;
                        Prepared::Stream(src)
                    }
                }
            }
            Input::Staged(sets) => Prepared::Staged(StagedFiles::combine(&self.table, sets)?),
        })
    }

    /// The input as rows or staged files: a stream is read whole (a plan
    /// names every blob, so it is made of the whole input).
    fn whole<'i>(&self, input: Prepared<'i>) -> Result<Prepared<'i>> {
        match input {
            Prepared::Stream(src) => {
                let (schema, batches) = src.open()?;
                let all = batches.collect::<Result<Vec<_>>>()?;
                let (s, b) = prepare_input(&self.table, &schema, all, &self.opts)?;
                Ok(Prepared::Rows(s, b))
            }
            other => Ok(other),
        }
    }

    async fn head(&self) -> Result<Option<RefEntry>> {
        self.repo.head_to_write(&self.opts.branch).await
    }

    /// One attempt on the branch head as read. A stream that turns out not
    /// to stream (see `repo::streamed`) is read whole and tried at once.
    async fn once(
        &self,
        input: &mut Prepared<'_>,
        earlier: &mut HashSet<ObjectId>,
    ) -> Result<CommitOutcome> {
        let (table, opts) = (self.table.as_str(), &self.opts);
        if let Prepared::Stream(src) = input {
            match self
                .repo
                .attempt_streamed(table, *src, opts, earlier)
                .await?
            {
                streamed::Streamed::Landed(done) => return Ok(CommitOutcome::Landed(*done)),
                streamed::Streamed::Lost => return Ok(self.lost()),
                streamed::Streamed::Whole => {
                    let rows = self.whole(Prepared::Stream(*src))?;
                    *input = rows;
                }
            }
        }
        let head = self.head().await?;
        let planned = match self.plan_prepared(head.clone(), input, opts).await {
            Ok(p) => p,
            // A blob of the head vanished because the branch moved on (an
            // erasure replaced the head and deleted it): a lost race, not
            // damage.
            Err(e) if e.is_missing() && self.head().await? != head => return Ok(self.lost()),
            Err(e) => return Err(e),
        };
        // Staged files the head holds already landed before: a driver
        // that commits twice makes one version, so a staged commit never
        // makes an empty one.
        let staged_opts;
        let opts = match input {
            Prepared::Staged(_) => {
                staged_opts = CommitOptions {
                    allow_empty: false,
                    ..opts.clone()
                };
                &staged_opts
            }
            _ => opts,
        };
        let prior = staged_outcomes(input);
        Ok(
            match self
                .repo
                .write_commit_after(table, planned, &prior, opts, earlier)
                .await?
            {
                Some(done) => CommitOutcome::Landed(done),
                None => self.lost(),
            },
        )
    }

    fn lost(&self) -> CommitOutcome {
        CommitOutcome::Lost {
            branch: self.opts.branch.clone(),
        }
    }

    /// Plans rows or staged files on `head`.
    async fn plan_prepared(
        &self,
        head: Option<RefEntry>,
        input: &Prepared<'_>,
        opts: &CommitOptions,
    ) -> Result<Planned> {
        let table = self.table.as_str();
        match input {
            Prepared::Rows(schema, batches) => {
                self.repo.plan_on(head, table, schema, batches, opts).await
            }
            Prepared::Staged(staged) => self.repo.plan_staged(head, table, staged, opts).await,
            Prepared::Stream(_) => Err(Error::Internal(
                "a streamed input reached the planner unread".into(),
            )),
        }
    }
}
