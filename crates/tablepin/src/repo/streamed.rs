//! Commits of inputs too large to hold: read a window of rows at a time,
//! each window planned against its part of the parent and its blobs
//! written before the next is read, then one version for all of them
//! (`table::window` says why the windows add up to one commit of the
//! whole input).
//!
//! Memory is bounded by [`CommitOptions::window_rows`] when the input of a
//! keyed table comes in key order (an export, a generated or sorted
//! table) and the parent's files do not overlap across more than a window
//! (`tablepin compact` makes them so). Any other input is committed whole,
//! as [`Repo::commit`] commits it: an unkeyed overwrite of an existing
//! table, a key of several columns, a schema change, a delete, or a keyed
//! input out of key order (found as it is read; what was written until
//! then is left for gc).
//!
//! A streamed commit holds the commit lease (`repo::lease`) while it runs:
//! it does not keep its blobs' bytes to write them again when it lands,
//! as a commit of one window does, so no gc or erasure may delete
//! unreferenced blobs meanwhile. Streamed commits do not wait for each
//! other.
//!
//! `tablepin commit` streams a file of more than `--window-rows` rows
//! (2,097,152 by default). Where a window's cut falls after its last key it
//! is moved back to a multiple of the file size, so new files are whole as
//! one commit writes them. The rows, content hash, counts and checks equal
//! those of one commit of the whole input (`tests/streamed.rs`); the files
//! may not, since each window compacts its own part.

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use tablepin_format::{ContentHash, KeyBound, TableSnapshot};
use tablepin_store::PutOutcome;

use super::{named, CommitOptions, CommitResult, Planned, Repo};
use crate::error::{Error, Result};
use crate::files::BatchIter;
use crate::table::keys;
use crate::table::plan::{self, Mode, Staged, TablePlan};
use crate::table::window::{self, Spans, Upper};

/// A commit's input that can be read more than once, a batch at a time (a
/// file: [`crate::files::open_table_file`]); a streamed commit that loses
/// the race for its branch reads it again.
pub trait CommitInput: Sync {
    /// Starts reading the input from its first row: its schema and its
    /// batches.
    fn open(&self) -> Result<(SchemaRef, BatchIter)>;
}

impl CommitInput for crate::files::TableFile {
    fn open(&self) -> Result<(SchemaRef, BatchIter)> {
        crate::files::open_table_file(&self.path, &self.opts)
    }
}

/// How one streamed attempt ended.
pub(crate) enum Streamed {
    Landed(Box<CommitResult>),
    /// Another writer moved the branch first.
    Lost,
    /// The input cannot be streamed: commit it whole.
    Whole,
}

/// How windows are cut.
enum Cutting {
    /// At keys of column `col`, between the parent's groups of files.
    ByKey { col: usize, spans: Spans },
    /// Anywhere (an unkeyed append, or a new unkeyed table).
    Anywhere,
}

/// Decides whether and how an input with `schema` streams onto `parent`
/// (`None`: commit it whole, which also gives any error the input has).
fn cutting(
    parent: Option<&TableSnapshot>,
    schema: &SchemaRef,
    opts: &CommitOptions,
) -> Option<Cutting> {
    if !matches!(opts.mode, Mode::Overwrite | Mode::Append | Mode::Upsert) {
        return None;
    }
    let has_rows = parent.is_some_and(|p| !p.files.is_empty());
    if has_rows && parent.is_some_and(|p| p.schema.fields() != schema.fields()) {
        return None;
    }
    let key = match (&opts.key, parent) {
        (Some(k), Some(p)) if has_rows && p.key != *k => return None,
        (Some(k), _) => k.clone(),
        (None, Some(p)) => p.key.clone(),
        (None, None) => Vec::new(),
    };
    match key.as_slice() {
        [] if opts.mode == Mode::Append || (!has_rows && opts.mode == Mode::Overwrite) => {
            Some(Cutting::Anywhere)
        }
        [k] => {
            let col = schema.index_of(k).ok()?;
            let files = parent.map_or(&[][..], |p| &p.files[..]);
            Some(Cutting::ByKey {
                col,
                spans: Spans::of(files)?,
            })
        }
        _ => None,
    }
}

/// The rows read and not yet planned, with their keys when cut by key.
#[derive(Default)]
struct Buffer {
    batches: Vec<RecordBatch>,
    keys: Vec<KeyBound>,
    rows: usize,
}

impl Buffer {
    /// Adds a batch; `false` when its keys break the key order (or have
    /// no bounds), so that the input cannot be streamed.
    fn push(&mut self, b: RecordBatch, key_col: Option<usize>) -> bool {
        if let Some(col) = key_col {
            let Some(ks) = keys::all_bounds(b.column(col)) else {
                return false;
            };
            let after_last = match (self.keys.last(), ks.first()) {
                (Some(last), Some(first)) => first > last,
                _ => true,
            };
            if !after_last || ks.windows(2).any(|w| w[0] > w[1]) {
                return false;
            }
            self.keys.extend(ks);
        }
        self.rows += b.num_rows();
        self.batches.push(b);
        true
    }

    /// The first `rows` rows, taken out.
    fn split(&mut self, schema: &SchemaRef, rows: usize) -> Result<Vec<RecordBatch>> {
        if rows >= self.rows {
            self.keys.clear();
            self.rows = 0;
            return Ok(std::mem::take(&mut self.batches));
        }
        let all =
            concat_batches(schema, &self.batches).map_err(Error::arrow("reading the input"))?;
        self.batches = vec![all.slice(rows, all.num_rows() - rows)];
        self.keys.drain(..rows.min(self.keys.len()));
        self.rows -= rows;
        Ok(vec![all.slice(0, rows)])
    }
}

/// The windows planned so far and what they wrote.
#[derive(Default)]
struct Progress {
    windows: Vec<window::Planned>,
    written: Vec<PutOutcome>,
    writes: Vec<plan::PlannedBlob>,
    rows: (u64, u64, u64),
    /// Input rows before the next window (for errors that name a row).
    offset: usize,
}

impl Repo {
    /// One attempt: every window planned and written, then the version.
    pub(crate) async fn attempt_streamed(
        &self,
        table: &str,
        input: &dyn CommitInput,
        opts: &CommitOptions,
        earlier: &mut std::collections::HashSet<tablepin_format::ObjectId>,
    ) -> Result<Streamed> {
        let head = self.head_to_write(&opts.branch).await?;
        let (parent_id, parent_tables, parent) = self.parent_of(&head, table, opts).await?;
        let (schema, batches) = input.open()?;
        let Some(cut) = cutting(parent.as_ref(), &schema, opts) else {
            return Ok(Streamed::Whole);
        };
        let Some(done) = self
            .plan_windows(table, &schema, batches, parent.as_ref(), cut, opts)
            .await
            .map_err(|e| named(e, parent_id, table))?
        else {
            return Ok(Streamed::Whole);
        };
        let snapshot = window::combine(parent.as_ref(), done.windows);
        let checks = plan::checks(parent.as_ref(), &snapshot);
        let plan = TablePlan {
            snapshot,
            writes: done.writes,
            rows_added: done.rows.0,
            rows_changed: done.rows.1,
            rows_deleted: done.rows.2,
            checks,
        };
        let planned = Planned {
            head,
            parent_id,
            parent_tables,
            plan: Staged {
                plan,
                blobs: Vec::new(),
            },
        };
        Ok(
            match self
                .write_commit_after(table, planned, &done.written, opts, earlier)
                .await?
            {
                Some(r) => Streamed::Landed(Box::new(r)),
                None => Streamed::Lost,
            },
        )
    }

    /// Reads the input a window at a time, planning each window and
    /// writing its blobs; `None` when the input breaks the key order and
    /// must be committed whole.
    async fn plan_windows(
        &self,
        table: &str,
        schema: &SchemaRef,
        batches: BatchIter,
        parent: Option<&TableSnapshot>,
        mut cut: Cutting,
        opts: &CommitOptions,
    ) -> Result<Option<Progress>> {
        let key_col = match &cut {
            Cutting::ByKey { col, .. } => Some(*col),
            Cutting::Anywhere => None,
        };
        let mut buf = Buffer::default();
        let mut done = Progress::default();
        let unit = self.config.write.file_rows.max(1);
        for b in batches {
            let b = normalized(b?)?;
            if b.num_rows() == 0 {
                continue;
            }
            if !buf.push(b, key_col) {
                return Ok(None);
            }
            while buf.rows >= opts.window_rows.max(1) {
                let (rows, upper) = match &cut {
                    Cutting::ByKey { spans, .. } => match spans.cut(&buf.keys, unit) {
                        Some(c) => c,
                        None => break,
                    },
                    Cutting::Anywhere => match buf.rows - buf.rows % unit {
                        0 => (buf.rows, Upper::Open),
                        whole => (whole, Upper::Open),
                    },
                };
                let rows = buf.split(schema, rows)?;
                let sub = self.sub_parent(parent, &mut cut, &upper, &done);
                self.plan_window(table, schema, rows, sub, opts, &mut done)
                    .await?;
            }
        }
        // The last window takes the rows and parent files left (an
        // overwrite deletes the files no input row reached).
        let rows = buf.split(schema, usize::MAX)?;
        let sub = self.sub_parent(parent, &mut cut, &Upper::Open, &done);
        let untouched = sub.as_ref().is_none_or(|s| s.files.is_empty());
        if !(rows.is_empty() && untouched && !done.windows.is_empty()) {
            let rows = if rows.is_empty() {
                vec![RecordBatch::new_empty(schema.clone())]
            } else {
                rows
            };
            self.plan_window(table, schema, rows, sub, opts, &mut done)
                .await?;
        }
        Ok(Some(done))
    }

    /// The part of the parent the next window plans against (see
    /// `table::window`): the groups of files up to `upper` when cut by
    /// key, all of it for the first window otherwise; a table with the
    /// first window's columns and no rows for a window with no part.
    fn sub_parent(
        &self,
        parent: Option<&TableSnapshot>,
        cut: &mut Cutting,
        upper: &Upper,
        done: &Progress,
    ) -> Option<TableSnapshot> {
        let first = done.windows.is_empty();
        match (parent, cut) {
            (Some(p), Cutting::ByKey { spans, .. }) => {
                Some(window::sub_parent(p, &spans.take(upper)))
            }
            (Some(p), Cutting::Anywhere) if first => Some(p.clone()),
            (Some(p), Cutting::Anywhere) => Some(window::empty_like(p)),
            (None, _) => done
                .windows
                .first()
                .map(|w| window::empty_like(&w.snapshot)),
        }
    }

    /// Plans one window against `sub` and writes its blobs.
    async fn plan_window(
        &self,
        table: &str,
        schema: &SchemaRef,
        rows: Vec<RecordBatch>,
        sub: Option<TableSnapshot>,
        opts: &CommitOptions,
        done: &mut Progress,
    ) -> Result<()> {
        let n: usize = rows.iter().map(RecordBatch::num_rows).sum();
        let input = self.plan_input(table, sub.as_ref(), schema, rows, opts);
        let staged = plan::plan(&self.store, input)
            .await
            .map_err(|e| shifted(e, done.offset))?;
        let written = futures::future::try_join_all(
            staged.blobs.into_iter().map(|b| self.store.freshen_blob(b)),
        )
        .await?;
        let p = staged.plan;
        done.written.extend(written);
        done.writes.extend(p.writes);
        done.rows.0 += p.rows_added;
        done.rows.1 += p.rows_changed;
        done.rows.2 += p.rows_deleted;
        done.offset += n;
        done.windows.push(window::Planned {
            sub_content: sub.map_or(ContentHash::EMPTY, |s| s.content_hash),
            snapshot: p.snapshot,
        });
        Ok(())
    }
}

/// The batches of an input of at most `limit` rows, or `None` when it has
/// more (0: no limit, always the batches).
pub(crate) fn whole_if_within(
    batches: BatchIter,
    limit: usize,
) -> Result<Option<Vec<RecordBatch>>> {
    let mut out = Vec::new();
    let mut rows = 0usize;
    for b in batches {
        let b = b?;
        rows += b.num_rows();
        out.push(b);
        if limit > 0 && rows > limit {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

/// A batch with canonical types (`files::normalize`).
fn normalized(b: RecordBatch) -> Result<RecordBatch> {
    let (_, mut v) =
        crate::files::normalize(&b.schema(), vec![b]).map_err(Error::arrow("reading the input"))?;
    v.pop()
        .ok_or_else(|| Error::Internal("normalizing a batch gave none".into()))
}

/// An error of a window that names input rows, naming them in the whole
/// input (`offset` rows came before the window).
fn shifted(e: Error, offset: usize) -> Error {
    match e {
        Error::NullKey { table, column, row } => Error::NullKey {
            table,
            column,
            row: row + offset,
        },
        Error::DuplicateKey {
            table,
            key,
            first,
            second,
        } => Error::DuplicateKey {
            table,
            key,
            first: first + offset,
            second: second + offset,
        },
        Error::LossyValue {
            table,
            column,
            to,
            row,
            change,
        } => Error::LossyValue {
            table,
            column,
            to,
            row: row + offset,
            change,
        },
        e => e,
    }
}
