//! Compaction: the table's live rows written again as full files in key
//! order, and the automatic compaction of a commit.
//!
//! A commit compacts when the rows deletion vectors hide pass
//! `compact_hidden_permille` (default 10, i.e. 1%) of the rows in the
//! table's files: the files hiding the most are rewritten with their live
//! rows only, until under half of that, so reads stay within 1% of a fully
//! compacted table. `tablepin compact` (`Transaction::compact`, the commit
//! mode `Mode::Compact`, `plan_compact`) goes further on request: every live
//! row is written again as full files in key order, so files' key ranges no
//! longer overlap; the new files' row hashes must add up to the snapshot's
//! content hash, or nothing is written. It goes through the commit path
//! (retries, crash safety, checks), and a table already in that layout gets
//! no version (`Error::AlreadyCompact`, which `Transaction::compact` reports
//! as `None`).

use super::*;

/// Compaction on request: the table's live rows written again as files of
/// `file_rows` rows, in the order a read returns them (key order for a
/// keyed table), with no deletion vectors. Afterwards a key
/// look-up finds each key in one file whose range holds no other file's
/// keys, and a read opens the fewest files. The rows, and so the content
/// hash, stay the same: the new files' row hashes must add up to the
/// snapshot's content hash, or nothing is written.
/// [`Error::AlreadyCompact`] when the files would be the ones there are.
pub(crate) async fn plan_compact(
    store: &Store,
    table: &str,
    par: &TableSnapshot,
    settings: &WriteSettings,
) -> Result<Staged> {
    let (schema, batches, _) =
        super::super::read(store, par, table, &super::super::ScanOptions::default()).await?;
    let rows = concat_batches(&schema, &batches).map_err(Error::arrow("compacting the table"))?;
    drop(batches);
    let key_idx = keys::key_indices(table, &schema, &par.key)?;
    // `read` returns a keyed table's rows in key order already.
    let order: Vec<u32> = (0..rows.num_rows() as u32).collect();
    let hashes = hash_rows(&rows)?;
    let (mut files, blobs) = write_files(&rows, &order, &key_idx, settings)?;
    for (f, chunk) in files.iter_mut().zip(file_chunks(&order, settings)) {
        f.hash_sum = chunk.iter().map(|i| hashes[*i as usize]).collect();
    }
    let content: ContentHash = hashes.iter().copied().collect();
    if content != par.content_hash {
        return Err(Error::ContentMismatch {
            table: table.to_string(),
        });
    }
    let unchanged = files.len() == par.files.len()
        && files
            .iter()
            .zip(&par.files)
            .all(|(a, b)| a.data == b.data && b.deletes.is_none());
    if unchanged {
        return Err(Error::AlreadyCompact {
            table: table.to_string(),
        });
    }
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: (*schema).clone(),
        key: par.key.clone(),
        files,
        rows: par.rows,
        content_hash: par.content_hash,
    };
    Ok(Staged::new(Some(par), snapshot, blobs, (0, 0, 0)))
}

/// What compaction rewrites with: the commit's schema, key and settings,
/// and the parent files the plan read already.
#[derive(Clone, Copy)]
pub(crate) struct Compaction<'a> {
    pub(crate) schema: &'a SchemaRef,
    pub(crate) key_idx: &'a [usize],
    pub(crate) settings: &'a WriteSettings,
    pub(crate) held: &'a Held,
}

/// Automatic compaction (see `WriteSettings::compact_hidden_permille`):
/// rewrites the files whose deletion vectors hide the most rows, keeping
/// their live rows in their order, until the hidden rows are under half the
/// threshold. The rows the snapshot sees, and so its content hash, do not
/// change; each rewrite checks that its rows hash to the old file's sum
/// minus the hidden rows, and refuses otherwise. Returns the files
/// rewritten.
pub(crate) async fn compact(
    store: &Store,
    files: &mut [FileEntry],
    dvs: &mut Vec<Bytes>,
    blobs: &mut Vec<Bytes>,
    how: &Compaction<'_>,
) -> Result<usize> {
    let Compaction {
        schema,
        key_idx,
        settings,
        held,
    } = *how;
    let threshold = f64::from(settings.compact_hidden_permille) / 1000.0;
    let total: u64 = files.iter().map(|f| f.rows).sum();
    let mut hidden: u64 = files.iter().map(|f| f.rows - f.live_rows()).sum();
    if threshold <= 0.0 || total == 0 || hidden as f64 <= threshold * total as f64 {
        return Ok(0);
    }
    let target = threshold / 2.0 * total as f64;
    let mut order: Vec<usize> = (0..files.len())
        .filter(|i| files[*i].deletes.is_some())
        .collect();
    order.sort_by_key(|i| std::cmp::Reverse(files[*i].rows - files[*i].live_rows()));
    let mut rewritten = 0;
    // This commit's bitmaps, named once (compaction may drop some from
    // `dvs` below; a dropped one's file is the one just rewritten).
    let mut known = dv::known(dvs);
    for i in order {
        if hidden as f64 <= target {
            break;
        }
        let f = files[i].clone();
        let Some(dv) = &f.deletes else { continue };
        let Some(bm) = dv::load(store, &f, &mut known).await? else {
            continue;
        };
        let data = match held.get(&f.data) {
            Some(bytes) => bytes.clone(),
            None => store.get_blob(&f.data).await?,
        };
        let data = DataFile::open(f.data, data)?;
        let live = data.read(schema, Select::Live(Some(&bm)))?;
        let live = concat_batches(schema, &live).map_err(Error::arrow("compacting a data file"))?;
        let gone: Vec<u32> = bm.iter().collect();
        let gone = data.read(schema, Select::Positions(&gone))?;
        let mut expect = f.hash_sum;
        for b in &gone {
            for h in hash_rows(b)? {
                expect.sub(&h);
            }
        }
        let hash_sum: ContentHash = hash_rows(&live)?.into_iter().collect();
        if hash_sum != expect {
            return Err(Error::BadBlob {
                blob: f.data,
                what: "Parquet data file",
                message:
                    "its rows do not hash to the sum its snapshot records; run `tablepin verify`"
                        .into(),
            });
        }
        let (entry, bytes) = new_data_file(&live, hash_sum, key_idx, settings)?;
        files[i] = entry;
        // The deletion vector this commit wrote for the file, if no other
        // file uses the same bitmap, is no longer needed.
        if !files
            .iter()
            .any(|g| g.deletes.as_ref().map(|d| d.blob) == Some(dv.blob))
        {
            dvs.retain(|b| ObjectId::of(b) != dv.blob);
        }
        blobs.push(bytes);
        hidden -= f.rows - f.live_rows();
        rewritten += 1;
    }
    Ok(rewritten)
}
