//! Data files written by other processes for one commit: many workers
//! each write their rows as data blobs and describe them
//! ([`StagedFiles`]); one driver commits all of them as one version
//! (`repo::transaction`).
//!
//! A staged file enters the new snapshot as it is: the driver never reads
//! or writes its rows again. It reads the staged files' key columns (to
//! check that no key repeats and to look the keys up in the parent) and,
//! where a staged row meets a parent row with its key, that row's values
//! (to tell a change from the same row again). The content hash moves by
//! the workers' sums of their rows' hashes; `verify` checks every file's
//! sum against its rows.
//!
//! - append: the staged files join the parent's; a keyed table refuses a
//!   key it has;
//! - upsert (keyed): the parent's rows with a staged key are hidden by
//!   deletion vectors, the staged files join;
//! - overwrite: the staged files are the table; counted against the parent
//!   by key (keyed) or by the rows' multiset (unkeyed), as any overwrite;
//! - delete takes keys, not files: commit the keys as rows.
//!
//! A commit of staged files that the table holds already (a driver that
//! commits twice) lands nothing the second time.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::{Schema, SchemaRef};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tablepin_format::{ContentHash, FileEntry, RowHash, TableSnapshot, FORMAT_VERSION};
use tablepin_rowhash::hash_rows;
use tablepin_store::Store;

use super::datafile::{DataFile, Select, WriteSettings};
use super::decide;
use super::dv;
use super::keys::{self, KeyCodec};
use super::plan::{self, Mode, SchemaRules, SortedBounds, Staged};
use crate::error::{Error, Result};

/// Data files of one table, written and described by a worker for a
/// commit by another process ([`crate::Transaction::stage`],
/// [`crate::Input::Staged`]). It travels as JSON ([`StagedFiles::to_json`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedFiles {
    /// Format number.
    pub format: u32,
    /// The table the files were written for.
    pub table: String,
    /// The rows' schema: the table's at the branch head when it was staged.
    pub schema: Schema,
    /// The key columns the rows are sorted and unique by (empty: unkeyed).
    pub key: Vec<String>,
    /// The data files: blob, rows, bytes, the sum of the rows' hashes and
    /// the key range.
    pub files: Vec<FileEntry>,
}

impl StagedFiles {
    /// The description as JSON, for the driver.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self)
            .map_err(|e| Error::Internal(format!("writing staged files as JSON: {e}")))
    }

    /// A description from [`StagedFiles::to_json`].
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| {
            Error::InvalidArgument(format!(
                "not a description of staged files ({e}); pass what stage returned"
            ))
        })
    }

    /// The sum of every staged row's hash.
    fn hash_sum(&self) -> ContentHash {
        self.files.iter().fold(ContentHash::EMPTY, |mut sum, f| {
            sum.merge(&f.hash_sum);
            sum
        })
    }

    /// Rows in the files.
    pub fn rows(&self) -> u64 {
        self.files.iter().map(|f| f.rows).sum()
    }

    /// Many workers' descriptions as one: the same table, schema and key.
    pub(crate) fn combine(table: &str, sets: Vec<StagedFiles>) -> Result<StagedFiles> {
        let mismatch = |detail: String| Error::Staged {
            table: table.to_string(),
            detail,
        };
        let mut it = sets.into_iter();
        let Some(mut all) = it.next() else {
            return Err(mismatch(
                "are none: pass what each worker's stage returned".into(),
            ));
        };
        for s in std::iter::once(&all).chain(it.as_slice()) {
            if s.table != table {
                return Err(mismatch(format!(
                    "include files staged for table '{}'; commit each table on its own",
                    s.table
                )));
            }
            if s.format > FORMAT_VERSION || s.files.iter().any(|f| f.deletes.is_some()) {
                return Err(mismatch(
                    "include a description this version of tablepin did not write".into(),
                ));
            }
        }
        for s in it {
            if s.schema.fields() != all.schema.fields() || s.key != all.key {
                return Err(mismatch(
                    "were staged with different columns or keys (the table changed between two workers' stage); stage them again".into(),
                ));
            }
            all.files.extend(s.files);
        }
        let mut seen = HashSet::new();
        if let Some(twice) = all.files.iter().find(|f| !seen.insert(f.data)) {
            return Err(mismatch(format!(
                "name file {} twice; pass each worker's description once",
                twice.data.short(12)
            )));
        }
        Ok(all)
    }
}

/// Writes a worker's rows as data files of `table` (sorted by its key,
/// checked unique) in the table's schema on `parent`: the description and
/// the bytes to store.
pub(crate) fn stage(
    table: &str,
    parent: Option<&TableSnapshot>,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    key: &Option<Vec<String>>,
    settings: &WriteSettings,
) -> Result<(StagedFiles, Vec<Bytes>)> {
    let input = concat_batches(schema, &batches).map_err(Error::arrow("reading the input"))?;
    let key = plan::table_key(table, parent, key, Mode::Append)?;
    let with_rows = parent.filter(|p| !p.files.is_empty());
    let (schema, moved, _) = plan::resolve_schema(
        table,
        with_rows.map(|p| &p.schema),
        &input.schema(),
        SchemaRules::default(),
        Mode::Append,
        &key,
    )?;
    if moved && with_rows.is_some() {
        return Err(Error::Staged {
            table: table.to_string(),
            detail: "would change the table's columns, which a staged commit does not do; commit these rows as rows, or stage rows with the table's columns".into(),
        });
    }
    let input = plan::conform_input(table, &input, &schema)?;
    written(table, &input, key, settings)
}

/// A worker's keys of rows to delete ([`Mode::Delete`]) as data files of
/// their own: the key columns only, in the table's types, sorted and
/// unique. Only a delete commits them (the parent's rows with those keys
/// go; the files join no version).
pub(crate) fn stage_keys(
    table: &str,
    parent: Option<&TableSnapshot>,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    settings: &WriteSettings,
) -> Result<(StagedFiles, Vec<Bytes>)> {
    let Some(par) = parent else {
        return Err(Error::InvalidArgument(format!(
            "table '{table}' does not exist yet, so there is nothing to delete"
        )));
    };
    let key = plan::table_key(table, parent, &None, Mode::Delete)?;
    let input = concat_batches(schema, &batches).map_err(Error::arrow("reading the input"))?;
    let (keys, _) = plan::conform_keys(table, &super::schema_of(par), &input, &key)?;
    written(table, &keys, key, settings)
}

/// `rows` (in the columns they will be committed with) sorted by `key`,
/// checked unique, written as data files and described.
fn written(
    table: &str,
    rows: &RecordBatch,
    key: Vec<String>,
    settings: &WriteSettings,
) -> Result<(StagedFiles, Vec<Bytes>)> {
    let schema = rows.schema();
    let key_idx = keys::key_indices(table, &schema, &key)?;
    let order: Vec<u32> = match key_idx.is_empty() {
        true => (0..rows.num_rows() as u32).collect(),
        false => keys::validate_and_order(table, rows, &KeyCodec::new(&schema, key_idx.clone())?)?,
    };
    let hashes = hash_rows(rows)?;
    let (mut files, blobs) = plan::write_files(rows, &order, &key_idx, settings)?;
    for (f, chunk) in files.iter_mut().zip(plan::file_chunks(&order, settings)) {
        f.hash_sum = chunk.iter().map(|i| hashes[*i as usize]).collect();
    }
    let staged = StagedFiles {
        format: FORMAT_VERSION,
        table: table.to_string(),
        schema: (*schema).clone(),
        key,
        files,
    };
    Ok((staged, blobs))
}

/// Plans a commit of staged files onto `parent` (see the module's
/// documentation).
pub(crate) async fn plan(
    store: &Store,
    table: &str,
    parent: Option<&TableSnapshot>,
    s: &StagedFiles,
    mode: Mode,
    given: &Option<Vec<String>>,
    settings: &WriteSettings,
) -> Result<Staged> {
    let refuse = |detail: String| Error::Staged {
        table: table.to_string(),
        detail,
    };
    match mode {
        Mode::Compact => {
            return Err(refuse(
                "cannot be committed in compact mode, which takes no input".into(),
            ))
        }
        Mode::Delete => return plan_delete(store, table, parent, s, settings).await,
        _ => {}
    }
    if given.as_ref().is_some_and(|k| *k != s.key) {
        return Err(refuse(format!(
            "are keyed by [{}], not the [{}] given; commit them without a key",
            s.key.join(","),
            given.as_deref().unwrap_or_default().join(",")
        )));
    }
    let key = plan::table_key(table, parent, &Some(s.key.clone()), mode)?;
    let with_rows = parent.filter(|p| !p.files.is_empty());
    if with_rows.is_some_and(|p| p.schema.fields() != s.schema.fields()) {
        return Err(refuse(
            "have other columns than the table has now (it changed since they were staged); stage them again".into(),
        ));
    }
    if let Some(done) = landed_already(table, parent, s)? {
        return Ok(done);
    }
    check_stored(store, table, s).await?;
    let schema = Arc::new(s.schema.clone());
    let n = s.rows();
    let staged_sum = s.hash_sum();
    let fresh = |base: Vec<FileEntry>, content: ContentHash| TableSnapshot {
        format: FORMAT_VERSION,
        schema: s.schema.clone(),
        key: key.clone(),
        rows: base.iter().map(FileEntry::live_rows).sum::<u64>() + n,
        files: base.into_iter().chain(s.files.iter().cloned()).collect(),
        content_hash: content,
    };
    if key.is_empty() {
        return match (with_rows, mode) {
            (Some(par), Mode::Overwrite) => {
                let old = plan::read_all(store, par, &all_files(par), &schema).await?;
                let hashes = staged_hashes(store, s, &schema, None).await?;
                let d = decide::by_multiset(&hashes, &old.rows);
                let snap = fresh(Vec::new(), staged_sum);
                Ok(Staged::new(
                    parent,
                    snap,
                    Vec::new(),
                    (d.added, 0, d.deleted),
                ))
            }
            (Some(par), _) => {
                let mut content = par.content_hash;
                content.merge(&staged_sum);
                let snap = fresh(par.files.clone(), content);
                Ok(Staged::new(parent, snap, Vec::new(), (n, 0, 0)))
            }
            (None, _) => Ok(Staged::new(
                parent,
                fresh(Vec::new(), staged_sum),
                Vec::new(),
                (n, 0, 0),
            )),
        };
    }
    plan_keyed(store, table, parent, s, mode, &key).await
}

/// [`plan`] of staged keys ([`stage_keys`]) in delete mode: the parent's
/// rows with those keys go, as a delete of the same keys given as rows.
/// Committed again, they find nothing to delete, and nothing lands.
async fn plan_delete(
    store: &Store,
    table: &str,
    parent: Option<&TableSnapshot>,
    s: &StagedFiles,
    settings: &WriteSettings,
) -> Result<Staged> {
    let Some(par) = parent else {
        return Err(Error::InvalidArgument(format!(
            "table '{table}' does not exist yet, so there is nothing to delete"
        )));
    };
    let key = plan::table_key(table, parent, &None, Mode::Delete)?;
    let schema = super::schema_of(par);
    let kschema = keys::key_schema(&schema, &keys::key_indices(table, &schema, &key)?);
    if s.key != key || s.schema.fields() != kschema.fields() {
        return Err(Error::Staged {
            table: table.to_string(),
            detail: "hold rows, and a delete takes the keys of the rows to delete; stage the keys in delete mode".into(),
        });
    }
    check_stored(store, table, s).await?;
    let doomed = staged_keys(store, s, &kschema).await?;
    plan::plan_delete(store, table, par, &doomed, &key, settings).await
}

/// [`plan`] for a keyed table.
async fn plan_keyed(
    store: &Store,
    table: &str,
    parent: Option<&TableSnapshot>,
    s: &StagedFiles,
    mode: Mode,
    key: &[String],
) -> Result<Staged> {
    let schema: SchemaRef = Arc::new(s.schema.clone());
    let key_idx = keys::key_indices(table, &schema, key)?;
    let kschema = keys::key_schema(&schema, &key_idx);
    let kidx: Vec<usize> = (0..key_idx.len()).collect();
    let kcodec = KeyCodec::new(&kschema, kidx.clone())?;
    let in_keys = staged_keys(store, s, &kschema).await?;
    let order = keys::validate_and_order(table, &in_keys, &kcodec)?;
    let n = s.rows();
    let staged_sum = s.hash_sum();
    let snapshot = |files: Vec<FileEntry>, content: ContentHash| TableSnapshot {
        format: FORMAT_VERSION,
        schema: s.schema.clone(),
        key: key.to_vec(),
        rows: files.iter().map(FileEntry::live_rows).sum(),
        files,
        content_hash: content,
    };
    let Some(par) = parent.filter(|p| !p.files.is_empty()) else {
        let snap = snapshot(s.files.clone(), staged_sum);
        return Ok(Staged::new(parent, snap, Vec::new(), (n, 0, 0)));
    };
    let sorted = SortedBounds::new(&in_keys, &kidx, &order);
    let lookup = plan::LookUp::prepare(store, par, &sorted, in_keys.num_rows()).await?;
    let found = lookup
        .run(store, par, &schema, &kschema, &kcodec, &in_keys)
        .await?;
    if mode == Mode::Append {
        if let Some(i) = found.locs.iter().position(Option::is_some) {
            return Err(Error::KeyExists {
                table: table.to_string(),
                key: keys::key_text(&in_keys, &kidx, i),
            });
        }
        let mut content = par.content_hash;
        content.merge(&staged_sum);
        let files = par.files.iter().chain(&s.files).cloned().collect();
        return Ok(Staged::new(
            parent,
            snapshot(files, content),
            Vec::new(),
            (n, 0, 0),
        ));
    }
    // The staged rows whose key the parent has: changed, or the same again.
    let met: Vec<usize> = (found.locs.iter().enumerate())
        .filter_map(|(i, l)| l.map(|_| i))
        .collect();
    let new_hashes = staged_hashes(store, s, &schema, Some(&met)).await?;
    let mut removals: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    let (mut removed, mut changed) = (ContentHash::EMPTY, 0u64);
    for (i, h) in met.iter().zip(&new_hashes) {
        let Some(loc) = found.locs[*i] else { continue };
        let Some(old) = found.hashes.get(&(loc.file, loc.pos)) else {
            return Err(Error::Internal(format!(
                "the look-up found row {} of file {} of the parent without hashing it",
                loc.pos, loc.file
            )));
        };
        changed += u64::from(old != h);
        removed.add(old);
        removals.entry(loc.file).or_default().push(loc.pos);
    }
    let added = n - met.len() as u64;
    if mode == Mode::Overwrite {
        let deleted = par.rows - met.len() as u64;
        let snap = snapshot(s.files.clone(), staged_sum);
        return Ok(Staged::new(
            parent,
            snap,
            Vec::new(),
            (added, changed, deleted),
        ));
    }
    let (mut files, dvs) = plan::apply_removals(store, par, &removals, found.dvs).await?;
    files.extend(s.files.iter().cloned());
    let mut content = par.content_hash;
    content.unmerge(&removed);
    content.merge(&staged_sum);
    let blobs = dv::pack(&mut files, dvs);
    Ok(Staged::new(
        parent,
        snapshot(files, content),
        blobs,
        (added, changed, 0),
    ))
}

/// The parent's own plan when every staged file is in it already (a
/// commit of them landed before); a refusal when only some are.
fn landed_already(
    table: &str,
    parent: Option<&TableSnapshot>,
    s: &StagedFiles,
) -> Result<Option<Staged>> {
    let Some(par) = parent else { return Ok(None) };
    let held: HashSet<_> = par.files.iter().map(|f| f.data).collect();
    let n = s.files.iter().filter(|f| held.contains(&f.data)).count();
    match n {
        0 => Ok(None),
        n if n == s.files.len() => Ok(Some(Staged::new(parent, par.clone(), Vec::new(), (0, 0, 0)))),
        n => Err(Error::Staged {
            table: table.to_string(),
            detail: format!(
                "include {n} of {} files the table holds already (committed before with other files); commit the others on their own",
                s.files.len()
            ),
        }),
    }
}

/// Every staged file is stored, with its size.
async fn check_stored(store: &Store, table: &str, s: &StagedFiles) -> Result<()> {
    let metas =
        futures::future::try_join_all(s.files.iter().map(|f| store.blob_meta(&f.data))).await?;
    for (f, m) in s.files.iter().zip(metas) {
        match m {
            None => {
                return Err(Error::StagedGone {
                    table: table.to_string(),
                    blob: f.data,
                })
            }
            Some(m) if m.size != f.bytes => {
                return Err(Error::Staged {
                    table: table.to_string(),
                    detail: format!(
                    "say file {} has {} bytes, and the repository holds {}; stage its rows again",
                    f.data.short(12),
                    f.bytes,
                    m.size
                ),
                })
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn all_files(par: &TableSnapshot) -> Vec<usize> {
    (0..par.files.len()).collect()
}

/// The key columns of every staged row, file after file.
async fn staged_keys(store: &Store, s: &StagedFiles, kschema: &SchemaRef) -> Result<RecordBatch> {
    let ids: Vec<_> = s.files.iter().map(|f| f.data).collect();
    let per_file = store
        .map_blobs(&ids, |i, bytes| {
            DataFile::open(ids[i], bytes)?.read(kschema, Select::All)
        })
        .await?;
    let all: Vec<RecordBatch> = per_file.into_iter().flatten().collect();
    concat_batches(kschema, &all).map_err(Error::arrow("reading the staged keys"))
}

/// The hashes of the staged rows `which` (indices over all staged rows,
/// ascending; `None`: every row), in that order.
async fn staged_hashes(
    store: &Store,
    s: &StagedFiles,
    schema: &SchemaRef,
    which: Option<&[usize]>,
) -> Result<Vec<RowHash>> {
    // Per file: the positions wanted (`None`: all of it).
    let mut start = 0usize;
    let mut wanted: Vec<(usize, Option<Vec<u32>>)> = Vec::new();
    for (fi, f) in s.files.iter().enumerate() {
        let end = start + f.rows as usize;
        match which {
            None => wanted.push((fi, None)),
            Some(w) => {
                let lo = w.partition_point(|i| *i < start);
                let hi = w.partition_point(|i| *i < end);
                if hi > lo {
                    wanted.push((
                        fi,
                        Some(w[lo..hi].iter().map(|i| (i - start) as u32).collect()),
                    ));
                }
            }
        }
        start = end;
    }
    let ids: Vec<_> = wanted.iter().map(|(fi, _)| s.files[*fi].data).collect();
    let per_file = store
        .map_blobs(&ids, |i, bytes| {
            let select = match &wanted[i].1 {
                Some(p) => Select::Positions(p),
                None => Select::All,
            };
            let mut out = Vec::new();
            for b in DataFile::open(ids[i], bytes)?.read(schema, select)? {
                out.extend(hash_rows(&b)?);
            }
            Ok::<_, Error>(out)
        })
        .await?;
    Ok(per_file.into_iter().flatten().collect())
}
