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

/// Checks a commit's input and brings it to the stored types: views and
/// dictionaries become plain arrays (see `files::normalize`), so the same
/// rows from any writer store alike.
fn prepare_input(
    table: &str,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    opts: &CommitOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    check_name("table", table)?;
    check_name("branch", &opts.branch)?;
    crate::files::check_unique_columns(schema)
        .map_err(|m| Error::InvalidArgument(format!("the input of table '{table}' {m}")))?;
    crate::files::normalize(schema, batches).map_err(Error::arrow(format!(
        "reading the input of table '{table}'"
    )))
}

/// The answer to a commit whose table snapshot is the head's own (nothing
/// changed) when it does not ask for an empty version: no version to make,
/// the head stands. `None` for any other commit.
fn unchanged(
    table: &str,
    opts: &CommitOptions,
    parent_id: Option<VersionId>,
    tables: &BTreeMap<String, ObjectId>,
    snap_bytes: &[u8],
    plan: &TablePlan,
    change: &TableChange,
) -> Option<CommitResult> {
    let head = parent_id.filter(|_| !opts.allow_empty)?;
    if tables.get(table) != Some(&ObjectId::of(snap_bytes)) {
        return None;
    }
    Some(CommitResult {
        version: head,
        parent: Some(head),
        branch: opts.branch.clone(),
        table: table.to_string(),
        rows: plan.snapshot.rows,
        content_hash: plan.snapshot.content_hash,
        change: change.clone(),
        version_bytes: 0,
        empty: true,
    })
}

/// The saved form of a commit planned with `opts`.
fn saved_plan(table: &str, opts: &CommitOptions, planned: &Planned) -> CommitPlan {
    CommitPlan {
        table: table.to_string(),
        branch: opts.branch.clone(),
        mode: opts.mode,
        key: opts.key.clone(),
        allow_schema_change: opts.allow_schema_change,
        cast: opts.cast,
        create_branch: opts.create_branch,
        parent: planned.parent_id,
        plan: planned.plan.plan.clone(),
    }
}

/// One attempt of a commit: the branch head it read and the plan on it.
pub(crate) struct Planned {
    pub(crate) head: Option<RefEntry>,
    pub(crate) parent_id: Option<VersionId>,
    /// The parent version's tables (name to snapshot id).
    pub(crate) parent_tables: BTreeMap<String, ObjectId>,
    pub(crate) plan: plan::Staged,
}

/// What a [`Transaction`] commits.
pub enum Input<'a> {
    /// Rows held in memory: the table now (overwrite), or the rows to
    /// append, upsert or delete.
    Rows(SchemaRef, Vec<RecordBatch>),
    /// Rows read a batch at a time (a file): committed a window at a time,
    /// with memory bounded by [`CommitOptions::window_rows`], where the
    /// input allows (see `repo::streamed`); otherwise read whole.
    Stream(&'a dyn CommitInput),
    /// Data files that other processes wrote and described
    /// ([`Transaction::stage`]), committed as one version.
    Staged(Vec<StagedFiles>),
}

/// An input checked and brought to the stored types.
enum Prepared<'a> {
    Rows(SchemaRef, Vec<RecordBatch>),
    Stream(&'a dyn CommitInput),
    Staged(StagedFiles),
}

impl Prepared<'_> {
    /// Streamed and staged commits cannot write their data blobs again
    /// when they land (they hold only their ids), so they hold the commit
    /// lease, which gc and erasure wait for (`repo::lease`).
    fn needs_lease(&self) -> bool {
        !matches!(self, Prepared::Rows(..))
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

/// The staged data files of an input, as blobs written already (counted as
/// the commit's new bytes).
fn staged_outcomes(input: &Prepared<'_>) -> Vec<PutOutcome> {
    match input {
        Prepared::Staged(s) => s
            .files
            .iter()
            .map(|f| PutOutcome {
                id: f.data,
                bytes: f.bytes,
                new: true,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Repo {
    /// Plans staged files ([`Input::Staged`]) on the branch head as read.
    async fn plan_staged(
        &self,
        head: Option<RefEntry>,
        table: &str,
        staged: &StagedFiles,
        opts: &CommitOptions,
    ) -> Result<Planned> {
        let (parent_id, parent_tables, parent_snap) = self.parent_of(&head, table, opts).await?;
        let plan = table::staged::plan(
            &self.store,
            table,
            parent_snap.as_ref(),
            staged,
            opts.mode,
            &opts.key,
            &self.config.write,
        )
        .await
        .map_err(|e| named(e, parent_id, table))?;
        Ok(Planned {
            head,
            parent_id,
            parent_tables,
            plan,
        })
    }

    /// Plans one attempt of a commit against the branch head as read.
    pub(crate) async fn plan_on(
        &self,
        head: Option<RefEntry>,
        table: &str,
        schema: &SchemaRef,
        batches: &[RecordBatch],
        opts: &CommitOptions,
    ) -> Result<Planned> {
        let (parent_id, parent_tables, parent_snap) = self.parent_of(&head, table, opts).await?;
        let input = self.plan_input(table, parent_snap.as_ref(), schema, batches.to_vec(), opts);
        let plan = plan::plan(&self.store, input)
            .await
            .map_err(|e| named(e, parent_id, table))?;
        Ok(Planned {
            head,
            parent_id,
            parent_tables,
            plan,
        })
    }

    /// What the planner is asked for a commit of `batches` onto `parent`.
    pub(crate) fn plan_input<'a>(
        &'a self,
        table: &'a str,
        parent: Option<&'a TableSnapshot>,
        schema: &SchemaRef,
        batches: Vec<RecordBatch>,
        opts: &CommitOptions,
    ) -> PlanInput<'a> {
        PlanInput {
            table,
            parent,
            schema: schema.clone(),
            batches,
            mode: opts.mode,
            key: opts.key.clone(),
            rules: plan::SchemaRules {
                allow_change: opts.allow_schema_change,
                cast: opts.cast,
            },
            settings: &self.config.write,
        }
    }

    /// The version a commit to `opts.branch` builds on, given the branch
    /// head as read: its id, its tables and `table`'s snapshot there.
    pub(crate) async fn parent_of(
        &self,
        head: &Option<RefEntry>,
        table: &str,
        opts: &CommitOptions,
    ) -> Result<(
        Option<VersionId>,
        BTreeMap<String, ObjectId>,
        Option<TableSnapshot>,
    )> {
        let parent_id = match head.as_ref().map(|h| h.target) {
            Some(Some(t)) => Some(t),
            // A deleted branch is not started again by a commit: its old
            // history would wait, unprotected, for gc.
            Some(None) => return Err(self.deleted_branch(&opts.branch).await),
            None => {
                self.new_branch_start(&opts.branch, opts.create_branch)
                    .await?
            }
        };
        // The head's entry names the version's tables when its writer
        // recorded them; otherwise the version record is read.
        let recorded = head
            .as_ref()
            .filter(|h| h.target == parent_id)
            .and_then(|h| h.tables.clone());
        let parent_tables = match (&parent_id, recorded) {
            (Some(_), Some(tables)) => tables,
            (Some(id), None) => self.version(id).await?.tables,
            (None, _) => BTreeMap::new(),
        };
        let parent_snap = match (&parent_id, parent_tables.get(table)) {
            (Some(id), Some(snap_id)) => Some(self.load_snapshot(id, table, snap_id).await?),
            _ => None,
        };
        Ok((parent_id, parent_tables, parent_snap))
    }

    /// Writes one attempt: the blobs, the snapshot, the version, and last
    /// the ref entry; `None` when another writer moved the branch first.
    /// Some of the plan's blobs may be written already (`prior`, counted
    /// in the change: a streamed commit writes each window's blobs as it
    /// goes, a staged commit's data files were written by its workers).
    pub(crate) async fn write_commit_after(
        &self,
        table: &str,
        p: Planned,
        prior: &[PutOutcome],
        opts: &CommitOptions,
        earlier: &mut HashSet<ObjectId>,
    ) -> Result<Option<CommitResult>> {
        let Planned {
            head,
            parent_id,
            parent_tables: mut tables,
            plan: plan::Staged { plan, blobs },
        } = p;
        let mut change = TableChange {
            rows_added: plan.rows_added,
            rows_changed: plan.rows_changed,
            rows_deleted: plan.rows_deleted,
            bytes_new: 0,
            blobs_new: 0,
            checks: plan.checks,
        };
        // Freshen blobs the repository holds already: a gc running now
        // spares young blobs, so this commit's reuse of an old one is safe.
        // The writes are independent (each blob is its own file) and run
        // at once; all of them end before the version that names them
        // is written.
        let snap_bytes = Bytes::from(encode_manifest("table snapshot", &plan.snapshot)?);
        if let Some(same) = unchanged(table, opts, parent_id, &tables, &snap_bytes, &plan, &change)
        {
            return Ok(Some(same));
        }
        let started = std::time::Instant::now();
        let (written, out) = futures::try_join!(
            futures::future::try_join_all(blobs.iter().map(|b| self.store.freshen_blob(b.clone()))),
            self.store.freshen_blob(snap_bytes.clone()),
        )?;
        for o in prior.iter().chain(&written).chain([&out]) {
            if o.new || earlier.contains(&o.id) {
                change.bytes_new += o.bytes;
                change.blobs_new += 1;
            }
        }
        earlier.extend(
            prior
                .iter()
                .chain(&written)
                .chain([&out])
                .filter(|o| o.new)
                .map(|o| o.id),
        );
        tables.insert(table.to_string(), out.id);
        let time_ms = opts.time_ms.unwrap_or_else(now_ms);
        let version = Version {
            format: FORMAT_VERSION,
            parents: parent_id.into_iter().collect(),
            time_ms,
            author: self.author.clone(),
            message: opts.message.clone(),
            tables,
            changes: BTreeMap::from([(table.to_string(), change.clone())]),
            replaces: None,
        };
        let Some((vid, version_bytes)) = self
            .land_version(&version, &opts.branch, head.as_ref())
            .await?
        else {
            return Ok(None);
        };
        // Belt and braces against a gc that read the blobs' ages just
        // before this commit freshened them: put back any blob of this
        // commit that is gone. A blob this commit created can be gone only
        // if the commit took longer than the gc's grace between writing it
        // and landing (a gc deletes unreferenced blobs older than that): a
        // commit that took long (a stalled process, a slow store) freshens
        // all it wrote, its version record too, so a gc still sweeping
        // spares them (it looks at each blob's age just before deleting).
        let slow = started.elapsed() >= SLOW_LANDING;
        futures::future::try_join_all(
            blobs
                .iter()
                .chain([&snap_bytes])
                .zip(written.iter().chain([&out]))
                .filter(|(_, w)| slow || !w.new)
                .map(|(b, w)| async move {
                    if slow {
                        self.store.freshen_blob(b.clone()).await?;
                    } else if !self.store.has_blob(&w.id).await? {
                        self.store.put_blob(b.clone()).await?;
                    }
                    Ok::<_, StoreError>(())
                }),
        )
        .await?;
        if slow {
            let bytes = encode_manifest("version", &version)?;
            self.store.freshen_blob(Bytes::from(bytes)).await?;
        }
        Ok(Some(CommitResult {
            version: vid,
            parent: parent_id,
            branch: opts.branch.clone(),
            table: table.to_string(),
            rows: plan.snapshot.rows,
            content_hash: plan.snapshot.content_hash,
            change,
            version_bytes,
            empty: false,
        }))
    }

    /// Writes a version (whose blobs are stored already), then the
    /// branch's next ref entry after `head` (the first when `None`): the
    /// version's id and bytes, or `None` when another writer moved the
    /// branch first.
    pub(crate) async fn land_version(
        &self,
        version: &Version,
        branch: &str,
        head: Option<&RefEntry>,
    ) -> Result<Option<(VersionId, u64)>> {
        let bytes = encode_manifest("version", version)?;
        let out = self.store.put_blob(Bytes::from(bytes)).await?;
        let id = VersionId(out.id);
        let entry = RefEntry {
            format: FORMAT_VERSION,
            seq: head.map_or(1, |h| h.seq + 1),
            target: Some(id),
            time_ms: version.time_ms,
            author: self.author.clone(),
            message: format!("commit: {}", version.message),
            tables: Some(version.tables.clone()),
            hold: None,
        };
        match self.store.append_ref(RefKind::Branch, branch, &entry).await {
            Ok(()) => Ok(Some((id, out.bytes))),
            Err(StoreError::RefConflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The refusal of a commit to a deleted branch, naming its last head.
    async fn deleted_branch(&self, name: &str) -> Error {
        let target = match self.store.ref_log(RefKind::Branch, name).await {
            Ok(log) => log
                .iter()
                .rev()
                .find_map(|e| e.target)
                .map_or_else(|| "nothing".to_string(), |t| t.short(12)),
            Err(e) => return e.into(),
        };
        Error::DeletedBranch {
            name: name.to_string(),
            target,
        }
    }

    /// Where a commit to a branch without a head starts: at the default
    /// branch's head with `create`, nowhere in a repository without
    /// branches; otherwise the branch name is refused as unknown.
    async fn new_branch_start(&self, branch: &str, create: bool) -> Result<Option<VersionId>> {
        if create {
            if branch == DEFAULT_BRANCH {
                return Ok(None);
            }
            return Ok(self
                .store
                .ref_head(RefKind::Branch, DEFAULT_BRANCH)
                .await?
                .and_then(|h| h.target));
        }
        let live = self.refs(RefKind::Branch).await?;
        if live.is_empty() {
            return Ok(None);
        }
        if let Some(now) = live.iter().find(|r| r.name == branch) {
            // Created or restored since its head was read: build on it (the
            // ref write then loses the race, and the commit plans again).
            return Ok(Some(now.target));
        }
        let hint = closest(branch, live.iter().map(|r| r.name.as_str()))
            .map(|n| format!("; did you mean '{n}'?"))
            .unwrap_or_default();
        Err(Error::UnknownBranch {
            name: branch.to_string(),
            branches: live
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            hint,
        })
    }
}
