//! Key look-up: the old rows of the input's keys, found through the files'
//! key ranges and the key column's page index, read by position.

use super::*;

/// The input's keys as bounds (single integer or text key), in key order,
/// beside the input rows they belong to: which input rows a file's key
/// range can hold is then two binary searches, not a comparison per row
/// and file.
pub(crate) struct SortedBounds {
    /// `None` when the key has no bounds (composite or other types).
    pub(crate) bounds: Option<Vec<KeyBound>>,
    /// Input rows in key order.
    pub(crate) order: Vec<u32>,
}

impl SortedBounds {
    pub(crate) fn new(input: &RecordBatch, key_idx: &[usize], order: &[u32]) -> Self {
        let bounds = match key_idx {
            [k] => keys::all_bounds(input.column(*k))
                .map(|b| order.iter().map(|i| b[*i as usize].clone()).collect()),
            _ => None,
        };
        Self {
            bounds,
            order: order.to_vec(),
        }
    }

    /// The input rows (in key order) whose keys lie in `file`'s key range;
    /// `None` when that cannot be told from bounds.
    pub(crate) fn within(&self, file: &FileEntry) -> Option<&[u32]> {
        let (Some(b), Some(lo), Some(hi)) = (&self.bounds, &file.key_min, &file.key_max) else {
            return None;
        };
        let start = b.partition_point(|k| k < lo);
        let end = b.partition_point(|k| k <= hi);
        Some(&self.order[start..end.max(start)])
    }
}

/// The pages of a file's (single, integer or text) key column that can hold
/// one of `keys`, as row ranges; `None` when the file has no usable page
/// index, and then every row is a candidate.
pub(crate) fn key_pages(
    file: &DataFile,
    key_schema: &SchemaRef,
    codec: &KeyCodec,
    keys: &SortKeys,
    cand: &[usize],
) -> Result<Option<Vec<Range<usize>>>> {
    let field = key_schema.field(0);
    if key_schema.fields().len() != 1
        || !matches!(
            field.data_type(),
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Utf8
                | DataType::LargeUtf8
        )
    {
        return Ok(None);
    }
    let Some(pages) = file.pages(field.name()) else {
        return Ok(None);
    };
    if pages.mins.null_count() > 0 || pages.maxes.null_count() > 0 {
        return Ok(None);
    }
    let as_keys = |col: &arrow::array::ArrayRef| -> Result<SortKeys> {
        let b = RecordBatch::try_new(key_schema.clone(), vec![col.clone()])
            .map_err(Error::arrow("reading key statistics"))?;
        codec.sort_keys(&[b])
    };
    let (mins, maxes) = (as_keys(&pages.mins)?, as_keys(&pages.maxes)?);
    let mut picked: Vec<usize> = Vec::new();
    for &i in cand {
        let k = keys.get(i);
        // The file is sorted by key, so its pages are too: the first page
        // whose largest key reaches `k` is the only one that can hold it.
        let p = maxes.first_not_below(k);
        if p < mins.len() && mins.get(p) <= k {
            picked.push(p);
        }
    }
    picked.sort_unstable();
    picked.dedup();
    let mut ranges: Vec<Range<usize>> = Vec::with_capacity(picked.len());
    for p in picked {
        let r = pages.rows[p].clone();
        match ranges.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => ranges.push(r),
        }
    }
    Ok(Some(ranges))
}

/// The live positions of the keys `cand` (indices into `keys`) in a file
/// whose integer keys are dense: as many distinct keys as rows between its
/// smallest and largest, so (the file being sorted by key) the row of key
/// `k` is `k - smallest`, and nothing needs reading. A table keyed by a
/// counter has such files (its first commit's, compaction's); a weekly
/// file of new and changed rows does not. `None` for any other file.
pub(crate) fn dense_positions(
    file: &FileEntry,
    dv: Option<&RoaringBitmap>,
    keys: &SortKeys,
    cand: &[usize],
) -> Option<Vec<(usize, u32)>> {
    let (SortKeys::Int(keys), Some(KeyBound::Int(lo)), Some(KeyBound::Int(hi))) =
        (keys, &file.key_min, &file.key_max)
    else {
        return None;
    };
    let span = hi.checked_sub(*lo)?.checked_add(1)?;
    if u64::try_from(span).ok()? != file.rows || file.rows > u64::from(u32::MAX) {
        return None;
    }
    Some(
        cand.iter()
            .filter_map(|&i| {
                let k = *keys.get(i)?;
                let pos = u32::try_from(k.checked_sub(*lo)?).ok()?;
                (k <= *hi && !dv.is_some_and(|d| d.contains(pos))).then_some((i, pos))
            })
            .collect(),
    )
}

/// Finds the live positions of the keys `cand` (indices into `keys`) in one
/// file, reading only the key pages that can hold them.
pub(crate) fn locate_in_file(
    file: &DataFile,
    dv: Option<&RoaringBitmap>,
    key_schema: &SchemaRef,
    codec: &KeyCodec,
    keys: &SortKeys,
    cand: &[usize],
) -> Result<Vec<(usize, u32)>> {
    let ranges = match key_pages(file, key_schema, codec, keys, cand)? {
        Some(r) => r,
        None => std::iter::once(0..file.rows()).collect(),
    };
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let batches = file.read(key_schema, Select::Ranges(&ranges))?;
    let found = codec.sort_keys(&batches)?;
    // Where each range starts among the rows read.
    let mut starts = Vec::with_capacity(ranges.len());
    let mut acc = 0usize;
    for r in &ranges {
        starts.push(acc);
        acc += r.len();
    }
    let mut out = Vec::new();
    for &i in cand {
        let Some(j) = found.find(keys.get(i)) else {
            continue;
        };
        let r = starts.partition_point(|s| *s <= j) - 1;
        let pos = (ranges[r].start + (j - starts[r])) as u32;
        if !dv.is_some_and(|d| d.contains(pos)) {
            out.push((i, pos));
        }
    }
    Ok(out)
}

/// What a look-up found in the parent: each input key's live position, the
/// hash of each row found (under the commit's schema), and the deletion
/// vectors it read (by parent file), which the commit then extends.
pub(crate) struct Found {
    pub(crate) locs: Vec<Option<Loc>>,
    pub(crate) hashes: HashMap<(usize, u32), RowHash>,
    pub(crate) dvs: Dvs,
    pub(crate) held: Held,
}

impl Found {
    /// What a look-up would find, known without one: each input row's
    /// live parent row, if any, and the hash of each row named.
    pub(crate) fn known(locs: Vec<Option<Loc>>, hashes: HashMap<(usize, u32), RowHash>) -> Self {
        Self {
            locs,
            hashes,
            dvs: Dvs::new(),
            held: Held::new(),
        }
    }
}

/// A look-up of input keys in the parent: each input key's live position
/// among the parent's files, and the hashes of the rows found. In two
/// steps: [`LookUp::prepare`] picks the files whose key range can hold an
/// input key and reads their deletion vectors (small reads, done before a
/// commit starts its CPU-bound work: queued behind it they waited ~4 ms
/// for a core); [`LookUp::run`] reads in those files only the key pages
/// that can hold an input key, and then the pages of the rows found. Each
/// file is fetched, verified, opened, looked up and hashed as one job on
/// the machine's cores: one wait for all of it.
pub(crate) struct LookUp {
    /// Parent file index and the input rows its key range can hold.
    pub(crate) work: Vec<(usize, Vec<usize>)>,
    pub(crate) dvs: Vec<Option<RoaringBitmap>>,
}

impl LookUp {
    pub(crate) async fn prepare(
        store: &Store,
        parent: &TableSnapshot,
        sorted: &SortedBounds,
        n: usize,
    ) -> Result<Self> {
        let mut work = Vec::new();
        if n > 0 {
            for (fi, f) in parent.files.iter().enumerate() {
                let cand: Vec<usize> = match sorted.within(f) {
                    Some(rows) => rows.iter().map(|i| *i as usize).collect(),
                    None => (0..n).collect(),
                };
                if !cand.is_empty() {
                    work.push((fi, cand));
                }
            }
        }
        let dvs = dv::load_many(store, work.iter().map(|(fi, _)| &parent.files[*fi])).await?;
        Ok(Self { work, dvs })
    }

    pub(crate) async fn run(
        self,
        store: &Store,
        parent: &TableSnapshot,
        schema: &SchemaRef,
        key_schema: &SchemaRef,
        codec: &KeyCodec,
        input_keys: &RecordBatch,
    ) -> Result<Found> {
        let n = input_keys.num_rows();
        let mut found = Found {
            locs: vec![None; n],
            hashes: HashMap::new(),
            dvs: HashMap::new(),
            held: HashMap::new(),
        };
        if self.work.is_empty() {
            return Ok(found);
        }
        let Self { work, dvs } = self;
        let keys = codec.sort_keys(std::slice::from_ref(input_keys))?;
        let look = Look {
            parent,
            schema,
            key_schema,
            codec,
            keys: &keys,
            work: &work,
            dvs: &dvs,
        };
        // A large file with few keys is read by range: its pages that can
        // hold the keys, then the pages of the rows found. Any other is
        // read whole, in one request.
        let group = store.outboard_group_bytes();
        let ranged =
            |w: &(usize, Vec<usize>)| by_range_pays(&parent.files[w.0], w.1.len(), schema, group);
        let (large, small): (Vec<usize>, Vec<usize>) =
            (0..work.len()).partition(|&i| ranged(&work[i]));
        let (by_range, whole) =
            futures::future::try_join(look.by_range(store, &large), look.whole(store, &small))
                .await?;
        let mut per_file: Vec<Option<FileHits>> = (0..work.len()).map(|_| None).collect();
        for (i, hits) in large.iter().zip(by_range).chain(small.iter().zip(whole)) {
            per_file[*i] = Some(hits);
        }
        for ((fi, _), hits) in work.iter().zip(per_file) {
            let Some(FileHits {
                hits,
                positions,
                hashes,
                held,
            }) = hits
            else {
                return Err(Error::Internal("a look-up skipped a file".into()));
            };
            if let Some(held) = held {
                found.held.insert(parent.files[*fi].data, held);
            }
            for (i, pos) in hits {
                found.locs[i] = Some(Loc { file: *fi, pos });
            }
            for (p, h) in positions.into_iter().zip(hashes) {
                found.hashes.insert((*fi, p), h);
            }
        }
        found.dvs = work.iter().map(|(fi, _)| *fi).zip(dvs).collect();
        Ok(found)
    }
}

/// Whether a look-up of `keys` candidate keys in `file` reads it by range
/// (its tail, then its key pages and its rows' pages, each with the hash
/// pairs that check them: two requests more than a whole read)
/// rather than whole: when the file has an outboard and, at worst two
/// chunk groups (of `group` bytes) a column a key, the pages would come
/// to under half of it. A weekly commit's 150 keys over a 1,000,000-row
/// table's four files touch nearly every chunk group of each, and read
/// them whole; a few keys in a large file read a few pages. No I/O.
pub(crate) fn by_range_pays(file: &FileEntry, keys: usize, schema: &SchemaRef, group: u64) -> bool {
    use tablepin_store::ranged::OUTBOARD_FROM;
    let worst = (keys as u64)
        .saturating_mul(schema.fields().len() as u64)
        .saturating_mul(2 * group);
    file.bytes >= OUTBOARD_FROM as u64 && worst.saturating_mul(2) < file.bytes
}

/// What a look-up found in one file: the input rows found and their
/// positions, the positions in order with their rows' hashes, and the
/// file's bytes when it was read whole.
struct FileHits {
    hits: Vec<(usize, u32)>,
    positions: Vec<u32>,
    hashes: Vec<RowHash>,
    held: Option<Bytes>,
}

/// A look-up's inputs shared by its files.
struct Look<'a> {
    parent: &'a TableSnapshot,
    schema: &'a SchemaRef,
    key_schema: &'a SchemaRef,
    codec: &'a KeyCodec,
    keys: &'a SortKeys,
    /// The files to look in (indices into the parent's files), each with
    /// its candidate input rows.
    work: &'a [(usize, Vec<usize>)],
    /// Their deletion vectors, in `work` order.
    dvs: &'a [Option<RoaringBitmap>],
}

impl Look<'_> {
    /// The files `which` (indices into `work`), each fetched whole,
    /// verified, opened, looked up and hashed as one job on the machine's
    /// cores: one wait for all of it.
    async fn whole(&self, store: &Store, which: &[usize]) -> Result<Vec<FileHits>> {
        let (work, dvs) = (self.work, self.dvs);
        let ids: Vec<ObjectId> = which
            .iter()
            .map(|&w| self.parent.files[work[w].0].data)
            .collect();
        store
            .map_blobs(&ids, |i, bytes| {
                let w = which[i];
                let held = bytes.clone();
                let (entry, dv, cand) =
                    (&self.parent.files[work[w].0], dvs[w].as_ref(), &work[w].1);
                // A dense file's hits are known without its key pages, so
                // it is opened without the pages' statistics.
                let dense = dense_positions(entry, dv, self.keys, cand);
                let index = match dense {
                    Some(_) => PageIndex::Locations,
                    None => PageIndex::WithStats,
                };
                let file = DataFile::open_with(ids[i], bytes, index)?;
                let hits = match dense {
                    Some(hits) => hits,
                    None => {
                        locate_in_file(&file, dv, self.key_schema, self.codec, self.keys, cand)?
                    }
                };
                let (positions, hashes) = self.hashed(&file, &hits)?;
                Ok::<_, Error>(FileHits {
                    hits,
                    positions,
                    hashes,
                    held: Some(held),
                })
            })
            .await
    }

    /// The files `which` (indices into `work`), read by verified ranges
    /// (`table::ranged`): each file's footer and page index, then the key
    /// pages that can hold its candidate keys (none for a dense file), then
    /// the pages of the rows found; the files of each step fetched at once.
    async fn by_range(&self, store: &Store, which: &[usize]) -> Result<Vec<FileHits>> {
        let (work, dvs) = (self.work, self.dvs);
        let dense: Vec<Option<Vec<(usize, u32)>>> = (which.iter())
            .map(|&w| {
                let entry = &self.parent.files[work[w].0];
                dense_positions(entry, dvs[w].as_ref(), self.keys, &work[w].1)
            })
            .collect();
        let mut files = futures::future::try_join_all(which.iter().zip(&dense).map(|(&w, d)| {
            let index = match d {
                Some(_) => PageIndex::Locations,
                None => PageIndex::WithStats,
            };
            let entry = &self.parent.files[work[w].0];
            RangedFile::open(store, entry.data, entry.bytes, index)
        }))
        .await?;
        let key_rows: Vec<Vec<Range<usize>>> = (files.iter().zip(which).zip(&dense))
            .map(|((f, &w), d)| match d {
                Some(_) => Ok(Vec::new()),
                None => {
                    let file = f.file();
                    let pages =
                        key_pages(&file, self.key_schema, self.codec, self.keys, &work[w].1)?;
                    Ok(pages.unwrap_or_else(|| std::iter::once(0..file.rows()).collect()))
                }
            })
            .collect::<Result<_>>()?;
        fetch_all(store, &mut files, self.key_schema, &key_rows).await?;
        let hits: Vec<Vec<(usize, u32)>> = (files.iter().zip(which).zip(dense))
            .map(|((f, &w), d)| match d {
                Some(hits) => Ok(hits),
                None => locate_in_file(
                    &f.file(),
                    dvs[w].as_ref(),
                    self.key_schema,
                    self.codec,
                    self.keys,
                    &work[w].1,
                ),
            })
            .collect::<Result<_>>()?;
        let row_ranges: Vec<Vec<Range<usize>>> = hits.iter().map(|h| rows_of(h)).collect();
        fetch_all(store, &mut files, self.schema, &row_ranges).await?;
        (files.iter().zip(hits))
            .map(|(f, hits)| {
                let (positions, hashes) = self.hashed(&f.file(), &hits)?;
                Ok(FileHits {
                    hits,
                    positions,
                    hashes,
                    held: f.whole_bytes().cloned(),
                })
            })
            .collect()
    }

    /// The positions of `hits` in order, and the hashes of their rows.
    fn hashed(&self, file: &DataFile, hits: &[(usize, u32)]) -> Result<(Vec<u32>, Vec<RowHash>)> {
        let mut positions: Vec<u32> = hits.iter().map(|(_, p)| *p).collect();
        positions.sort_unstable();
        let mut hashes = Vec::with_capacity(positions.len());
        if !positions.is_empty() {
            for b in file.read(self.schema, Select::Positions(&positions))? {
                hashes.extend(hash_rows(&b)?);
            }
        }
        Ok((positions, hashes))
    }
}

/// The rows of `hits` as ascending ranges.
fn rows_of(hits: &[(usize, u32)]) -> Vec<Range<usize>> {
    let mut at: Vec<usize> = hits.iter().map(|(_, p)| *p as usize).collect();
    at.sort_unstable();
    let mut out: Vec<Range<usize>> = Vec::new();
    for p in at {
        match out.last_mut() {
            Some(last) if last.end >= p => last.end = last.end.max(p + 1),
            _ => out.push(p..p + 1),
        }
    }
    out
}

/// Fetches, in each file at once, the pages a read of `schema` at its
/// `rows` needs.
async fn fetch_all(
    store: &Store,
    files: &mut [RangedFile],
    schema: &SchemaRef,
    rows: &[Vec<Range<usize>>],
) -> Result<()> {
    futures::future::try_join_all(
        files
            .iter_mut()
            .zip(rows)
            .map(|(f, r)| f.fetch(store, schema, r)),
    )
    .await?;
    Ok(())
}

/// The input's row hashes, computed on a worker thread while the commit
/// reads the parent's files.
pub(crate) struct InputHashes {
    pub(crate) task:
        Option<tokio::task::JoinHandle<std::result::Result<Vec<RowHash>, RowHashError>>>,
    pub(crate) done: Vec<RowHash>,
}

impl InputHashes {
    pub(crate) fn start(input: &RecordBatch) -> Self {
        let input = input.clone();
        Self {
            task: Some(tokio::task::spawn_blocking(move || hash_rows(&input))),
            done: Vec::new(),
        }
    }

    pub(crate) async fn get(&mut self) -> Result<&[RowHash]> {
        if let Some(task) = self.task.take() {
            self.done = task.await.map_err(|_| RowHashError::ThreadFailed)??;
        }
        Ok(&self.done)
    }
}

/// What [`read_all`] read of the parent's files: their live rows, their
/// deletion vectors and bytes.
pub(crate) struct ParentRows {
    pub(crate) rows: Vec<OldRow>,
    pub(crate) dvs: Dvs,
    pub(crate) held: Held,
}

/// Reads every live row of the parent files `which` with its hash, under
/// `schema` (an unkeyed overwrite's multiset); each file read, verified,
/// decoded and hashed as one job (`Store::map_blobs`).
pub(crate) async fn read_all(
    store: &Store,
    parent: &TableSnapshot,
    which: &[usize],
    schema: &SchemaRef,
) -> Result<ParentRows> {
    let dvs = dv::load_many(store, which.iter().map(|fi| &parent.files[*fi])).await?;
    let ids: Vec<ObjectId> = which.iter().map(|fi| parent.files[*fi].data).collect();
    let per_file = store
        .map_blobs(&ids, |i, bytes| {
            let held = bytes.clone();
            let file = DataFile::open(ids[i], bytes)?;
            let dv = dvs[i].as_ref();
            let batches = file.read(schema, Select::All)?;
            let mut rows = Vec::with_capacity(file.rows());
            let mut pos = 0u32;
            for b in &batches {
                for hash in hash_rows(b)? {
                    if !dv.is_some_and(|d| d.contains(pos)) {
                        let loc = Loc {
                            file: which[i],
                            pos,
                        };
                        rows.push(OldRow { loc, hash });
                    }
                    pos += 1;
                }
            }
            Ok::<_, Error>((rows, held))
        })
        .await?;
    let mut out = ParentRows {
        rows: Vec::new(),
        dvs: which.iter().copied().zip(dvs).collect(),
        held: Held::new(),
    };
    for (i, (r, bytes)) in per_file.into_iter().enumerate() {
        out.rows.extend(r);
        out.held.insert(ids[i], bytes);
    }
    Ok(out)
}

impl LookUp {
    /// [`LookUp::run`] for a commit's input keys.
    pub(crate) async fn run_for(
        self,
        store: &Store,
        par: &TableSnapshot,
        r: &Ready,
    ) -> Result<Found> {
        let kschema = keys::key_schema(&r.schema, &r.key_idx);
        let kcodec = KeyCodec::new(&kschema, (0..r.key_idx.len()).collect())?;
        let in_keys = (r.input.project(&r.key_idx)).map_err(Error::arrow("reading keys"))?;
        self.run(store, par, &r.schema, &kschema, &kcodec, &in_keys)
            .await
    }
}

impl Found {
    /// Each input row's live parent row with the same key, if any.
    pub(crate) fn rows(&self) -> Result<Vec<Option<OldRow>>> {
        (self.locs.iter())
            .map(|l| match l {
                None => Ok(None),
                Some(loc) => match self.hashes.get(&(loc.file, loc.pos)) {
                    Some(hash) => Ok(Some(OldRow {
                        loc: *loc,
                        hash: *hash,
                    })),
                    None => Err(Error::Internal(format!(
                        "the look-up found row {} of file {} of the parent without hashing it",
                        loc.pos, loc.file
                    ))),
                },
            })
            .collect()
    }

    /// An append or upsert decided from what the look-up found (an append
    /// may not name a key the table has).
    pub(crate) fn decide(
        self,
        table: &str,
        mode: Mode,
        r: &Ready,
        hashes: &[RowHash],
    ) -> Result<Decided> {
        if mode == Mode::Append {
            if let Some(i) = self.locs.iter().position(Option::is_some) {
                return Err(Error::KeyExists {
                    table: table.to_string(),
                    key: keys::key_text(&r.input, &r.key_idx, i),
                });
            }
        }
        let found = self.rows()?;
        Ok(Decided {
            decision: decide::by_found(&found, hashes),
            dvs: self.dvs,
            held: self.held,
        })
    }
}
