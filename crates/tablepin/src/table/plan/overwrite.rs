//! Overwrite: the input is the whole table; the rows that differ from the
//! parent's are found by comparing the two, file by file.

use super::*;

/// A schema change that writes every row again: every input row is
/// written and every parent file dropped, but the change is counted as
/// `diff` counts it (`diff::align`, `diff::compare`: by key, in types that
/// hold both sides' values), so that `log`, `restore` and `diff` give one
/// count for one change.
pub(crate) async fn rewritten(store: &Store, par: &TableSnapshot, r: &Ready) -> Result<Decision> {
    let old = diff::unshared(store, par, &super::super::window::empty_like(par)).await?;
    let aligned = diff::align(
        &schema_of(par),
        &old.old,
        &r.schema,
        std::slice::from_ref(&r.input),
    )?;
    let key_at: Option<Vec<usize>> = (r.key.iter())
        .map(|k| aligned.schema.index_of(k).ok())
        .collect();
    let key_at = key_at.filter(|_| par.key == r.key).unwrap_or_default();
    let c = diff::compare(&key_at, &aligned.old, &aligned.new)?;
    Ok(Decision {
        added: c.added.len() as u64,
        changed: c.changed.len() as u64,
        deleted: c.removed.len() as u64,
        ..Decision::keep_all(r.input.num_rows())
    }
    .writing_all())
}

/// An overwrite: the input is the whole table. Input rows whose hashes add
/// up to those of the whole parent, or (keyed) of a group of its files,
/// are those rows, and those files are not read (`decide::overwrite_scope`).
pub(crate) async fn decide_overwrite(
    store: &Store,
    par: &TableSnapshot,
    r: &Ready,
    sorted: &SortedBounds,
    hashes: &[RowHash],
) -> Result<Decided> {
    let n = r.input.num_rows();
    if !r.schema_moved && decide::same_rows(hashes, par) {
        return Ok(Decided {
            decision: Decision::keep_all(n),
            dvs: Dvs::new(),
            held: Held::new(),
        });
    }
    let Some(codec) = &r.codec else {
        let all: Vec<usize> = (0..par.files.len()).collect();
        let old = read_all(store, par, &all, &r.schema).await?;
        return Ok(Decided {
            decision: decide::by_multiset(hashes, &old.rows),
            dvs: old.dvs,
            held: old.held,
        });
    };
    let mut scope = match r.schema_moved {
        false => decide::overwrite_scope(&par.files, sorted.bounds.as_deref(), &r.order, hashes),
        true => decide::Scope {
            read: (0..par.files.len()).collect(),
            rows: r.order.clone(),
            aligned: Vec::new(),
        },
    };
    let mut decision = Decision::keep_all(n);
    let (mut aligned_dvs, mut aligned_held) = (Dvs::new(), Held::new());
    let compared = compare_aligned(store, par, &scope.aligned, r).await?;
    for (a, found) in scope.aligned.iter().zip(compared) {
        let rows = &r.order[a.rows.clone()];
        match found {
            Some((differs, bytes)) => {
                decide::by_position(&mut decision, a.file, rows, differs);
                aligned_dvs.insert(a.file, None);
                aligned_held.insert(par.files[a.file].data, bytes);
            }
            // Its keys are not the input's: decided by key with the rest.
            None => {
                scope.read.push(a.file);
                scope.rows.extend_from_slice(rows);
            }
        }
    }
    scope.read.sort_unstable();
    let (files, mut dvs, mut held) = read_keyed(store, par, &scope.read, &r.schema, codec).await?;
    dvs.extend(aligned_dvs);
    held.extend(aligned_held);
    let in_keys = codec.sort_keys(std::slice::from_ref(&r.input))?;
    let input = scope
        .rows
        .iter()
        .map(|i| (*i as usize, in_keys.get(*i as usize)));
    let old = files.iter().enumerate().flat_map(|(fi, f)| {
        f.live
            .iter()
            .map(move |p| (f.keys.get(*p as usize), (fi, *p)))
    });
    let join = decide::join_by_key(input, old);
    let (changed, gone) = compare_joined(&files, &join, r, hashes)?;
    decide::by_join(&mut decision, &join.added, changed, gone);
    Ok(Decided {
        decision,
        dvs,
        held,
    })
}

/// A parent file read whole for a keyed overwrite: every row (hidden ones
/// too, so positions index them), their keys, and its live positions.
pub(crate) struct ReadFile {
    pub(crate) file: usize,
    pub(crate) rows: RecordBatch,
    pub(crate) keys: SortKeys,
    pub(crate) live: Vec<u32>,
}

/// Reads the parent files `which` under `schema`, without hashing their
/// rows: each file read, verified and decoded as one job.
pub(crate) async fn read_keyed(
    store: &Store,
    parent: &TableSnapshot,
    which: &[usize],
    schema: &SchemaRef,
    codec: &KeyCodec,
) -> Result<(Vec<ReadFile>, Dvs, Held)> {
    let dvs = dv::load_many(store, which.iter().map(|fi| &parent.files[*fi])).await?;
    let ids: Vec<ObjectId> = which.iter().map(|fi| parent.files[*fi].data).collect();
    let read = store
        .map_blobs(&ids, |i, bytes| {
            let batches = DataFile::open(ids[i], bytes.clone())?.read(schema, Select::All)?;
            let keys = codec.sort_keys(&batches)?;
            let rows =
                concat_batches(schema, &batches).map_err(Error::arrow("reading a parent file"))?;
            let dv = dvs[i].as_ref();
            let live = (0..rows.num_rows() as u32)
                .filter(|p| !dv.is_some_and(|d| d.contains(*p)))
                .collect();
            let file = which[i];
            Ok::<_, Error>((
                ReadFile {
                    file,
                    rows,
                    keys,
                    live,
                },
                bytes,
            ))
        })
        .await?;
    // `map_blobs` answers in `ids` order.
    let (files, bytes): (Vec<ReadFile>, Vec<Bytes>) = read.into_iter().unzip();
    let held: Held = ids.into_iter().zip(bytes).collect();
    Ok((files, which.iter().copied().zip(dvs).collect(), held))
}

/// The joined rows compared: the input rows that change their parent row
/// (with its hash) and the parent rows gone (with their hashes). Matched
/// rows are compared column by column (`align::row_differences`), so only
/// rows that differ, and rows gone, are hashed; a file with a column no
/// kernel compares has its matched rows hashed instead.
pub(crate) fn compare_joined(
    files: &[ReadFile],
    join: &decide::Join<(usize, u32)>,
    r: &Ready,
    hashes: &[RowHash],
) -> Result<(Changed, Vec<OldRow>)> {
    let mut matched: Vec<(Vec<u32>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); files.len()];
    for (i, (fi, pos)) in &join.matched {
        matched[*fi].0.push(*i as u32);
        matched[*fi].1.push(*pos);
    }
    let mut gone: Vec<Vec<u32>> = vec![Vec::new(); files.len()];
    for (fi, pos) in &join.gone {
        gone[*fi].push(*pos);
    }
    let jobs: Vec<usize> = (0..files.len()).collect();
    let per_file = par::map(&jobs, |fi| {
        let f = &files[*fi];
        let (ins, poss) = &matched[*fi];
        let take = |b: &RecordBatch, at: &[u32]| {
            take_record_batch(b, &UInt32Array::from(at.to_vec()))
                .map_err(Error::arrow("taking rows of a parent file"))
        };
        let loc = |pos: u32| Loc { file: f.file, pos };
        let mut changed = Vec::new();
        if !ins.is_empty() {
            let (old, new) = (take(&f.rows, poss)?, take(&r.input, ins)?);
            let differs = match align::row_differences(&old, &new, &r.key_idx)? {
                Some(d) => d,
                None => hash_rows(&old)?
                    .into_iter()
                    .enumerate()
                    .filter(|(k, h)| *h != hashes[ins[*k] as usize])
                    .map(|(k, h)| (k as u32, h))
                    .collect(),
            };
            for (k, hash) in differs {
                let k = k as usize;
                let row = OldRow {
                    loc: loc(poss[k]),
                    hash,
                };
                changed.push((ins[k] as usize, row));
            }
        }
        let gone_rows = match gone[*fi].as_slice() {
            [] => Vec::new(),
            at => hash_rows(&take(&f.rows, at)?)?
                .into_iter()
                .zip(at)
                .map(|(hash, pos)| OldRow {
                    loc: loc(*pos),
                    hash,
                })
                .collect(),
        };
        Ok((changed, gone_rows))
    })?;
    let (mut changed, mut gone) = (Vec::new(), Vec::new());
    for (c, g) in per_file {
        changed.extend(c);
        gone.extend(g);
    }
    Ok((changed, gone))
}

/// Each aligned file compared with the input rows at its positions
/// ([`align::row_differences`]): its positions that differ, with their old
/// hashes, and its bytes (which compaction reuses); `None` for a file to
/// decide by key after all.
pub(crate) async fn compare_aligned(
    store: &Store,
    par: &TableSnapshot,
    aligned: &[decide::Aligned],
    r: &Ready,
) -> Result<Vec<Option<(Vec<(u32, RowHash)>, Bytes)>>> {
    let ids: Vec<ObjectId> = aligned.iter().map(|a| par.files[a.file].data).collect();
    store
        .map_blobs(&ids, |i, bytes| {
            let file = DataFile::open(ids[i], bytes.clone())?;
            let old = concat_batches(&r.schema, &file.read(&r.schema, Select::All)?)
                .map_err(Error::arrow("reading a parent file"))?;
            let at = UInt32Array::from(r.order[aligned[i].rows.clone()].to_vec());
            let new = take_record_batch(&r.input, &at)
                .map_err(Error::arrow("taking the input rows of a parent file"))?;
            let found = align::row_differences(&old, &new, &r.key_idx)?;
            Ok::<_, Error>(found.map(|d| (d, bytes)))
        })
        .await
}
