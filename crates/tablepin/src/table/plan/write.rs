//! Writing: the new rows' data files, the deletion vectors of the rows they
//! replace, and the content hash moved by both.

use super::*;

/// What [`finish`] builds the snapshot from.
pub(crate) struct Finish<'a> {
    pub(crate) parent: Option<&'a TableSnapshot>,
    /// The parent whose files the new snapshot keeps (none when every row
    /// is written again).
    pub(crate) parent_live: Option<&'a TableSnapshot>,
    pub(crate) ready: &'a Ready,
    pub(crate) settings: &'a WriteSettings,
    pub(crate) in_hashes: &'a [RowHash],
}

/// The new snapshot from a decision and the files written for it: the old
/// files with their new deletion vectors (compacted where they hide too
/// many rows), the new files, and the content hash moved by the rows
/// added and removed.
pub(crate) async fn finish(
    store: &Store,
    how: &Finish<'_>,
    decided: Decided,
    rows_out: &[u32],
    written: NewFiles,
) -> Result<Staged> {
    let Finish {
        parent,
        parent_live,
        ready: r,
        settings,
        in_hashes,
    } = *how;
    let Decided {
        decision: d,
        dvs: known_dvs,
        held,
    } = decided;
    let (mut new_files, mut blobs) = written;
    for (f, rows) in new_files.iter_mut().zip(file_chunks(rows_out, settings)) {
        f.hash_sum = rows.iter().map(|i| in_hashes[*i as usize]).collect();
    }
    let added_hash: ContentHash = rows_out.iter().map(|i| in_hashes[*i as usize]).collect();
    // Old files: new deletion vectors where rows were removed.
    let (mut files, mut dvs) = (Vec::new(), Vec::new());
    if let Some(par) = parent_live {
        (files, dvs) = apply_removals(store, par, &d.removals, known_dvs).await?;
    }
    let old_count = files.len();
    files.extend(new_files);
    if !r.schema_moved && !d.removals.is_empty() {
        let how = Compaction {
            schema: &r.schema,
            key_idx: &r.key_idx,
            settings,
            held: &held,
        };
        compact(store, &mut files, &mut dvs, &mut blobs, &how).await?;
    }
    let mut content = parent_live.map_or(ContentHash::EMPTY, |par| par.content_hash);
    content.unmerge(&d.removed_hash);
    content.merge(&added_hash);
    if r.schema_moved && parent_live.is_some() {
        // Every row's hash includes every column: a new column changes them
        // all, so the old files are hashed again under the new schema.
        content = rehash(store, &mut files[..old_count], &dvs, &r.schema).await?;
        content.merge(&added_hash);
    }
    blobs.extend(dv::pack(&mut files, dvs));
    let rows: u64 = files.iter().map(FileEntry::live_rows).sum();
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: (*r.schema).clone(),
        key: r.key.clone(),
        files,
        rows,
        content_hash: content,
    };
    Ok(Staged::new(
        parent,
        snapshot,
        blobs,
        (d.added, d.changed, d.deleted),
    ))
}

/// The rows of each new data file, `file_rows` at most.
pub(crate) fn file_chunks<'r>(
    rows: &'r [u32],
    settings: &WriteSettings,
) -> std::slice::Chunks<'r, u32> {
    rows.chunks(settings.file_rows.max(1))
}

/// Writes the rows `rows` of `input` (in that order) as new data files;
/// their entries' `hash_sum` is left empty for the caller to fill.
pub(crate) fn write_files(
    input: &RecordBatch,
    rows: &[u32],
    key_idx: &[usize],
    settings: &WriteSettings,
) -> Result<NewFiles> {
    let mut files = Vec::new();
    let mut blobs = Vec::new();
    for chunk in file_chunks(rows, settings) {
        let b = keys::take(input, chunk)?;
        let (entry, bytes) = new_data_file(&b, ContentHash::EMPTY, key_idx, settings)?;
        files.push(entry);
        blobs.push(bytes);
    }
    Ok((files, blobs))
}

/// New data files written on a worker thread while the commit goes on,
/// for rows the commit expects to write.
pub(crate) struct WriteTask {
    pub(crate) rows: Vec<u32>,
    pub(crate) task: Option<tokio::task::JoinHandle<Result<NewFiles>>>,
}

impl WriteTask {
    pub(crate) fn start(
        rows: Vec<u32>,
        input: &RecordBatch,
        key_idx: &[usize],
        settings: &WriteSettings,
    ) -> Self {
        if rows.is_empty() {
            return Self { rows, task: None };
        }
        let (input, key_idx, settings) = (input.clone(), key_idx.to_vec(), settings.clone());
        let todo = rows.clone();
        Self {
            rows,
            task: Some(tokio::task::spawn_blocking(move || {
                write_files(&input, &todo, &key_idx, &settings)
            })),
        }
    }

    /// The files, when the rows to write are the rows expected; `None`
    /// otherwise (the work is dropped).
    pub(crate) async fn finish(self, rows: &[u32]) -> Result<Option<NewFiles>> {
        match self.task {
            Some(t) if self.rows == rows => Ok(Some(t.await.map_err(|_| {
                Error::Internal("the thread writing the new data files failed".into())
            })??)),
            _ => Ok(None),
        }
    }
}

/// Hashes every row of `files` again under `schema`; sets each file's
/// `hash_sum` and returns the sum over their live rows. `fresh` are the
/// deletion vectors this commit wrote, not stored yet.
pub(crate) async fn rehash(
    store: &Store,
    files: &mut [FileEntry],
    fresh: &[Bytes],
    schema: &SchemaRef,
) -> Result<ContentHash> {
    let mut live = ContentHash::EMPTY;
    let dvs = dv::load_with(store, files.iter(), &mut dv::known(fresh)).await?;
    for (f, dv) in files.iter_mut().zip(dvs) {
        let bytes = store.get_blob(&f.data).await?;
        let batches = read_data_file(f.data, bytes, schema, Select::All)?;
        let mut all = ContentHash::EMPTY;
        let mut pos = 0u32;
        for b in &batches {
            for h in hash_rows(b)? {
                all.add(&h);
                if !dv.as_ref().is_some_and(|d| d.contains(pos)) {
                    live.add(&h);
                }
                pos += 1;
            }
        }
        f.hash_sum = all;
    }
    Ok(live)
}

/// The parent's files with the removals folded into their deletion vectors;
/// a file with no live row left is dropped. Returns the new deletion-vector
/// blobs, each on its own ([`dv::pack`] packs them once the files are final).
pub(crate) async fn apply_removals(
    store: &Store,
    parent: &TableSnapshot,
    removals: &BTreeMap<usize, Vec<u32>>,
    mut old_dvs: Dvs,
) -> Result<(Vec<FileEntry>, Vec<Bytes>)> {
    let mut files = Vec::with_capacity(parent.files.len());
    let mut blobs = Vec::new();
    // The deletion vectors that grow and were not read yet, fetched at once.
    let growing: Vec<usize> = removals
        .keys()
        .copied()
        .filter(|fi| *fi < parent.files.len() && !old_dvs.contains_key(fi))
        .collect();
    let loaded = dv::load_many(store, growing.iter().map(|fi| &parent.files[*fi])).await?;
    old_dvs.extend(growing.into_iter().zip(loaded));
    for (fi, f) in parent.files.iter().enumerate() {
        let Some(pos) = removals.get(&fi) else {
            files.push(f.clone());
            continue;
        };
        let mut bm = old_dvs.remove(&fi).flatten().unwrap_or_default();
        bm.extend(pos.iter().copied());
        if bm.len() >= f.rows {
            continue;
        }
        let (d, bytes) = dv::new(&bm)?;
        let mut nf = f.clone();
        nf.deletes = Some(d);
        files.push(nf);
        blobs.push(bytes);
    }
    Ok((files, blobs))
}

/// Writes rows (in their final order) as a new data file and its entry:
/// commits, compaction and erasure write every data file through here.
pub(crate) fn new_data_file(
    rows: &RecordBatch,
    hash_sum: ContentHash,
    key_idx: &[usize],
    settings: &WriteSettings,
) -> Result<(FileEntry, Bytes)> {
    let schema = rows.schema();
    let key: Vec<String> = key_idx
        .iter()
        .map(|i| schema.field(*i).name().clone())
        .collect();
    let bytes = write_data_file(rows, &settings.properties_for(&key, rows)?)?;
    let (key_min, key_max) = keys::bounds(rows, key_idx);
    let entry = FileEntry {
        data: ObjectId::of(&bytes),
        rows: rows.num_rows() as u64,
        bytes: bytes.len() as u64,
        hash_sum,
        deletes: None,
        key_min,
        key_max,
    };
    Ok((entry, bytes))
}
