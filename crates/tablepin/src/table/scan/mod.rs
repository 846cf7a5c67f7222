//! The read planner: every read of a version's rows (`read`, `cat`,
//! `export`, `sql`, `diff`, the Delta view, Python's `read` and `scan`, a
//! distributed reader's part, a merge's reads) is a plan decided before any
//! data file is read, and an executor of it: a [`ScanPlan`] for rows chosen
//! by what they hold, [`Picked`] reads for rows chosen by where they are
//! stored.
//!
//! A plan is data ([`ScanPlan::decide`], no I/O): the columns to decode
//! (those asked for, the filter's, and the key when rows come merged in
//! key order), the filter compiled over them, the files whose key range
//! can hold a matching row (the others are never fetched), the filter's
//! one-column conditions that rule out pages by the page index, the limit
//! and the order. Executing it loads the kept files' deletion vectors,
//! then fetches each file, verifies it against its name and decodes it as
//! one job (`Store::map_blobs`), skipping the pages the page index rules
//! out and the rows the deletion vector hides, and keeps the rows the
//! filter matches ([`file`]).
//!
//! - **Collect** ([`collect`]): every kept file on all cores, then merged in
//!   key order for a keyed table (`merge::merge_sorted`); the first `n`
//!   rows of a keyed table with no filter read only the files that can
//!   hold them, by their smallest key, each only its first `n` rows, and
//!   load only those files' deletion vectors.
//! - **Stream** ([`stream`]): memory holds the files being read, not the
//!   table. Unordered (an unkeyed table, chosen files, a query engine that
//!   sorts for itself), file by file, a few at a time; a keyed table in key
//!   order, merged as its files decode a batch at a time
//!   (`merge::MergeIter`), a stage of files at a time, the next stage read
//!   meanwhile: a group of files whose key ranges overlap (after `compact`,
//!   a file), and a large group cut by smallest key
//!   (`window::Spans::stages`), each stage giving the rows below the next
//!   one's smallest key, so that a file of changes spanning the whole key
//!   range does not make the read hold every file.
//! - **Picked** ([`picked`]): rows chosen by where they are stored, not by
//!   what they hold: `diff`'s read of the positions two versions do not
//!   share (a merge's too), and the Delta view's rewrite of a file without
//!   its deletion vector.
//!
//! Physical work on files, not reads of a version's rows, decodes through
//! `datafile::DataFile` directly: the commit planner's look-ups of the
//! parent's rows by key, erasure's match over every stored row (hidden ones
//! too), compaction, and verify.

mod collect;
mod file;
mod picked;
mod prune;
mod stream;

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use tablepin_format::{FileEntry, TableSnapshot};

pub(crate) use collect::collect;
pub(crate) use picked::{read_picked, Pick, Picked};
pub(crate) use stream::{open, Scan};

use super::{keys, predicate::Predicate, schema_of, ReadStats, ScanOptions};
use crate::error::{Error, Result};
use file::FileRead;

/// A row filter: SQL text, or an expression a query engine pushed down.
pub(crate) enum RowFilter<'a> {
    Sql(&'a str),
    Expr(&'a datafusion::logical_expr::Expr),
}

impl RowFilter<'_> {
    fn compile(&self, table: &str, schema: &SchemaRef) -> Result<Predicate> {
        match self {
            RowFilter::Sql(text) => Predicate::compile(table, text, schema),
            RowFilter::Expr(e) => Predicate::compile_expr(table, (*e).clone(), schema),
        }
    }
}

/// What a read asks for: [`ScanOptions`] as borrowed, and whether rows
/// of a keyed table must come in key order (a query engine that sorts for
/// itself need not pay for the merge, nor decode the key).
pub(crate) struct ScanRequest<'a> {
    pub(crate) columns: Option<&'a [String]>,
    pub(crate) filter: Option<RowFilter<'a>>,
    pub(crate) limit: Option<usize>,
    pub(crate) ordered: bool,
    /// Only these data files, each read alone and unmerged (see
    /// [`ScanOptions::files`]).
    pub(crate) files: Option<&'a [usize]>,
}

impl<'a> ScanRequest<'a> {
    /// The request of a user's read: in key order, unless files are chosen.
    pub(crate) fn of(opts: &'a ScanOptions) -> Self {
        Self {
            columns: opts.columns.as_deref(),
            filter: opts.filter.as_deref().map(RowFilter::Sql),
            limit: opts.limit,
            ordered: true,
            files: opts.files.as_deref(),
        }
    }
}

/// A read decided: which files, which columns, which rows, in which order.
pub(crate) struct ScanPlan {
    /// The files read (those the key ranges leave, or those asked for), in
    /// the order they are read.
    pub(crate) files: Vec<FileEntry>,
    /// What each file's bytes become.
    read: FileRead,
    pub(crate) limit: Option<usize>,
    /// The key's columns in the decoded schema when rows come merged in
    /// key order; `None`: file by file.
    order: Option<Vec<usize>>,
    /// Files of the snapshot (or of those asked for) not read because
    /// their key range rules out every row the filter matches.
    pub(crate) files_skipped: usize,
}

impl ScanPlan {
    /// Decides a read of `snap` (no I/O).
    pub(crate) fn decide(snap: &TableSnapshot, table: &str, req: &ScanRequest<'_>) -> Result<Self> {
        let schema = schema_of(snap);
        let out: Vec<usize> = match req.columns {
            Some(cols) => keys::key_indices(table, &schema, cols)?,
            None => (0..schema.fields().len()).collect(),
        };
        let ordered = req.ordered && !snap.key.is_empty() && req.files.is_none();
        let mut decode = out.clone();
        if ordered {
            decode.extend(keys::key_indices(table, &schema, &snap.key)?);
        }
        let filter = match &req.filter {
            Some(f) => Some((f, f.compile(table, &schema)?)),
            None => None,
        };
        if let Some((_, p)) = &filter {
            let cols: Vec<String> = p.columns().into_iter().collect();
            decode.extend(keys::key_indices(table, &schema, &cols)?);
        }
        decode.sort_unstable();
        decode.dedup();
        let read_schema = Arc::new(
            schema
                .project(&decode)
                .map_err(Error::arrow("projecting columns"))?,
        );
        // Compiled again over the decoded columns, so that no batch is
        // widened with the columns the filter does not read.
        let filter = match &filter {
            Some((f, _)) => Some(f.compile(table, &read_schema)?),
            None => None,
        };
        let keep = match &filter {
            Some(f) => prune::files_that_may_match(snap, f, &read_schema),
            None => vec![true; snap.files.len()],
        };
        let asked = files_asked(table, snap.files.len(), req.files)?;
        let files: Vec<FileEntry> = asked
            .iter()
            .filter(|&&i| keep[i])
            .map(|&i| snap.files[i].clone())
            .collect();
        let order = match ordered {
            true => Some(keys::key_indices(table, &read_schema, &snap.key)?),
            false => None,
        };
        Ok(Self {
            files_skipped: asked.len() - files.len(),
            files,
            read: FileRead::new(read_schema, &decode, &out, filter)?,
            limit: req.limit,
            order,
        })
    }

    /// The schema of the rows the plan gives.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.read.out_schema.clone()
    }

    /// What the plan counts before it reads: the columns it decodes, the
    /// files it skips.
    fn stats(&self) -> ReadStats {
        ReadStats {
            columns_decoded: self.read.schema.fields().len(),
            files_skipped: self.files_skipped,
            ..ReadStats::default()
        }
    }
}

/// The positions of the files a scan reads: `asked` (each a file of the
/// snapshot's `files`, at most once, kept in the order given), or all.
fn files_asked(table: &str, files: usize, asked: Option<&[usize]>) -> Result<Vec<usize>> {
    let Some(asked) = asked else {
        return Ok((0..files).collect());
    };
    let mut seen = vec![false; files];
    for &i in asked {
        match seen.get_mut(i) {
            None => {
                let have = match files {
                    0 => "no data file".to_string(),
                    n => format!("{n} data files (0 to {})", n - 1),
                };
                return Err(Error::InvalidArgument(format!(
                    "table '{table}' has {have} in this version; there is no data file {i}"
                )));
            }
            Some(true) => {
                return Err(Error::InvalidArgument(format!(
                    "data file {i} of table '{table}' is asked for twice; name each file once"
                )))
            }
            Some(s) => *s = true,
        }
    }
    Ok(asked.to_vec())
}
