//! A transaction's input prepared and planned against its parent version:
//! rows, a saved plan, or files staged elsewhere.

use super::*;

/// Checks a commit's input and brings it to the stored types: views and
/// dictionaries become plain arrays (see `files::normalize`), so the same
/// rows from any writer store alike.
pub(crate) fn prepare_input(
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
pub(crate) fn unchanged(
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
pub(crate) fn saved_plan(table: &str, opts: &CommitOptions, planned: &Planned) -> CommitPlan {
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
pub(crate) enum Prepared<'a> {
    Rows(SchemaRef, Vec<RecordBatch>),
    Stream(&'a dyn CommitInput),
    Staged(StagedFiles),
}

impl Prepared<'_> {
    /// Streamed and staged commits cannot write their data blobs again
    /// when they land (they hold only their ids), so they hold the commit
    /// lease, which gc and erasure wait for (`repo::lease`).
    pub(crate) fn needs_lease(&self) -> bool {
        !matches!(self, Prepared::Rows(..))
    }
}

impl Repo {
    /// Plans staged files ([`Input::Staged`]) on the branch head as read.
    pub(crate) async fn plan_staged(
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
}
