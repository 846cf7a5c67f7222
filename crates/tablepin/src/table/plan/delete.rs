//! Delete: the rows with the input's keys removed by deletion vectors.

use super::*;

/// `--mode delete`: remove the rows whose keys the input lists.
pub(crate) async fn plan_delete(
    store: &Store,
    table: &str,
    par: &TableSnapshot,
    input: &RecordBatch,
    key: &[String],
    settings: &WriteSettings,
) -> Result<Staged> {
    let schema = schema_of(par);
    let key_idx = keys::key_indices(table, &schema, key)?;
    let (in_keys, kschema) = conform_keys(table, &schema, input, key)?;
    let kcodec = KeyCodec::new(&kschema, (0..key_idx.len()).collect())?;
    let order = keys::validate_and_order(table, &in_keys, &kcodec)?;
    let sorted = SortedBounds::new(&in_keys, &(0..key_idx.len()).collect::<Vec<_>>(), &order);
    let Found {
        locs: found,
        hashes: old,
        dvs,
        held,
    } = LookUp::prepare(store, par, &sorted, in_keys.num_rows())
        .await?
        .run(store, par, &schema, &kschema, &kcodec, &in_keys)
        .await?;
    let mut removals: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for l in found.iter().flatten() {
        removals.entry(l.file).or_default().push(l.pos);
    }
    removals.values_mut().for_each(|v| v.sort_unstable());
    let mut content = par.content_hash;
    for h in old.values() {
        content.sub(h);
    }
    let deleted = old.len() as u64;
    let (mut files, mut dvs) = apply_removals(store, par, &removals, dvs).await?;
    let mut blobs = Vec::new();
    if !removals.is_empty() {
        let how = Compaction {
            schema: &schema,
            key_idx: &key_idx,
            settings,
            held: &held,
        };
        compact(store, &mut files, &mut dvs, &mut blobs, &how).await?;
    }
    blobs.extend(dv::pack(&mut files, dvs));
    let rows = files.iter().map(FileEntry::live_rows).sum();
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: par.schema.clone(),
        key: par.key.clone(),
        files,
        rows,
        content_hash: content,
    };
    Ok(Staged::new(Some(par), snapshot, blobs, (0, 0, deleted)))
}
