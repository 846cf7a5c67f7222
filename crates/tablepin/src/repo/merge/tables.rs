//! One table merged three ways: each side's change against the base, the
//! rows picked by key (or by value), the schemas widened.

use super::*;

impl Repo {
    /// One table's merge and its report.
    pub(crate) async fn merge_table(
        &self,
        name: &str,
        three: &ThreeWay<'_>,
        (base, ours, theirs): (Option<VersionId>, VersionId, VersionId),
        opts: &MergeOptions,
    ) -> Result<(Merged, TableMerge)> {
        let snap = |v: Option<&Version>| v.and_then(|v| v.tables.get(name)).copied();
        let (b, o, t) = (
            snap(three.base),
            snap(Some(three.ours)),
            snap(Some(three.theirs)),
        );
        let strategy = opts.table_strategy.get(name).copied().or(opts.strategy);
        let mut report = TableMerge {
            table: name.to_string(),
            how: "theirs",
            rows: None,
            content_hash: None,
            change: TableChange::default(),
            conflicts: 0,
            same: 0,
            conflict_rows: None,
        };
        // One side dropped it, the other changed it: the side asked for.
        if (o.is_none() || t.is_none()) && strategy == Some(Strategy::Ours) {
            report.how = "ours";
            return Ok((Merged::Take(o), report));
        }
        // Ours did not touch it: theirs as it is.
        if o == b || (o.is_none() || t.is_none()) && strategy == Some(Strategy::Theirs) {
            report.how = if t.is_some() { "theirs" } else { "dropped" };
            if let Some(t) = &t {
                let s = self.load_snapshot(&theirs, name, t).await?;
                (report.rows, report.content_hash) = (Some(s.rows), Some(s.content_hash));
            }
            return Ok((Merged::Take(t), report));
        }
        let (Some(o_id), Some(t_id)) = (o, t) else {
            let which = if o.is_none() {
                "ours dropped it and theirs changed it"
            } else {
                "theirs dropped it and ours changed it"
            };
            return Err(Error::Unmergeable {
                table: name.to_string(),
                why: which.to_string(),
            });
        };
        let os = self.load_snapshot(&ours, name, &o_id).await?;
        let ts = self.load_snapshot(&theirs, name, &t_id).await?;
        let bs = match (base, b) {
            (Some(bv), Some(b)) => self.load_snapshot(&bv, name, &b).await?,
            _ => empty_like(&os),
        };
        let schema = match (merged_schema(name, &bs, &os, &ts), strategy) {
            (Ok(schema), _) => schema,
            // Tables that do not merge by rows: the side asked for, whole.
            (Err(Error::Unmergeable { .. }), Some(Strategy::Ours)) => {
                report.how = "ours";
                return Ok((Merged::Take(Some(o_id)), report));
            }
            (Err(Error::Unmergeable { .. }), Some(Strategy::Theirs)) => {
                report.how = "theirs";
                (report.rows, report.content_hash) = (Some(ts.rows), Some(ts.content_hash));
                return Ok((Merged::Take(Some(t_id)), report));
            }
            (Err(e), _) => return Err(e),
        };
        let (staged, counts) = self
            .merge_snapshots(
                name,
                &schema,
                [&bs, &os, &ts],
                strategy,
                opts.resolved.get(name),
            )
            .await
            .map_err(|e| super::super::named(e, Some(theirs), name))?;
        report.conflicts = counts.conflicts;
        report.same = counts.same;
        match staged {
            Some(s) => {
                report.how = "merged";
                report.rows = Some(s.plan.snapshot.rows);
                report.content_hash = Some(s.plan.snapshot.content_hash);
                report.change = TableChange {
                    rows_added: s.plan.rows_added,
                    rows_changed: s.plan.rows_changed,
                    rows_deleted: s.plan.rows_deleted,
                    bytes_new: 0,
                    blobs_new: 0,
                    checks: s.plan.checks,
                };
                Ok((Merged::Planned(Box::new(s)), report))
            }
            None => {
                report.how = "conflicts";
                report.conflict_rows = counts.rows;
                Ok((Merged::Conflicts, report))
            }
        }
    }
}

/// What a table's merge found besides its plan.
pub(crate) struct Found {
    pub(crate) conflicts: u64,
    pub(crate) same: u64,
    pub(crate) rows: Option<RecordBatch>,
}

/// One side's diff against the base, aligned and compared.
pub(crate) struct SideDiff {
    pub(crate) aligned: Aligned,
    pub(crate) compared: Compared,
    /// Where each row of `aligned.old` and `aligned.new` is stored.
    pub(crate) old_at: Vec<(ObjectId, u32)>,
    pub(crate) new_at: Vec<(ObjectId, u32)>,
}

impl SideDiff {
    pub(crate) fn side(&self) -> Side<'_> {
        Side {
            old: &self.aligned.old,
            new: &self.aligned.new,
            compared: &self.compared,
        }
    }
}

impl Repo {
    /// What `snap` changed since `base` (`u`, as read), its rows in the
    /// merged columns (`merged`).
    pub(crate) fn side_diff(
        base: &TableSnapshot,
        snap: &TableSnapshot,
        u: diff::Unshared,
        merged: &SchemaRef,
    ) -> Result<SideDiff> {
        let schema = schema_of(snap);
        let mut aligned = diff::align(&schema_of(base), &u.old, &schema, &u.new)?;
        let key = key_at(&aligned.schema, &snap.key)?;
        let compared = diff::compare(&key, &aligned.old, &aligned.new)?;
        aligned.old = widen(&aligned.old, merged)?;
        aligned.new = widen(&aligned.new, merged)?;
        aligned.schema = aligned.new.schema();
        Ok(SideDiff {
            aligned,
            compared,
            old_at: u.old_at,
            new_at: u.new_at,
        })
    }

    /// The merged snapshot of one table both sides changed (`None`:
    /// unsettled conflicts, in the second value).
    pub(crate) async fn merge_snapshots(
        &self,
        table: &str,
        schema: &SchemaRef,
        [base, ours, theirs]: [&TableSnapshot; 3],
        strategy: Option<Strategy>,
        resolved: Option<&(SchemaRef, Vec<RecordBatch>)>,
    ) -> Result<(Option<Staged>, Found)> {
        let mut read = diff::unshared_many(&self.store, base, &[ours, theirs], true).await?;
        let (Some(tu), Some(ou)) = (read.pop(), read.pop()) else {
            return Err(Error::Internal("a merge's diff read no side".into()));
        };
        let od = Self::side_diff(base, ours, ou, schema)?;
        let td = Self::side_diff(base, theirs, tu, schema)?;
        let (o, t) = (od.side(), td.side());
        if ours.key.is_empty() {
            let (append, remove) = threeway::decide_unkeyed(&o, &t)?;
            let found = Found {
                conflicts: 0,
                same: 0,
                rows: None,
            };
            let staged = self
                .apply_unkeyed(table, ours, schema, &td, &append, &remove)
                .await?;
            return Ok((Some(staged), found));
        }
        let key = key_at(&td.aligned.schema, &ours.key)?;
        let settle = match (resolved, strategy) {
            (Some(_), _) | (None, Some(Strategy::Ours)) => Settle::Ours,
            (None, Some(Strategy::Theirs)) => Settle::Theirs,
            (None, None) => Settle::No,
        };
        let d = threeway::decide(&key, &o, &t, settle)?;
        let mut found = Found {
            conflicts: d.conflicts.len() as u64,
            same: d.same,
            rows: None,
        };
        if settle == Settle::No && !d.conflicts.is_empty() {
            found.rows = Some(threeway::conflict_rows(&key, &o, &t, &d.conflicts)?);
            return Ok((None, found));
        }
        let mut upsert = vec![pick(&td.aligned.new, &d.upsert)?];
        if let Some((rschema, rows)) = resolved {
            let rows = concat_batches(rschema, rows).map_err(Error::arrow(format!(
                "reading the resolution of table '{table}'"
            )))?;
            let rows = plan::conform_input(table, &rows, schema)?;
            let aligned = as_aligned(&td.aligned.schema, &rows)?;
            threeway::check_resolution(table, &key, &t, &d.conflicts, &aligned)?;
            upsert.push(rows);
        }
        let known = match (resolved, d.delete.is_empty(), upsert.as_slice()) {
            (None, true, [rows]) => known_rows([base, ours, theirs], &key, &od, &td, rows)?,
            _ => None,
        };
        let (schema, upsert) = in_table(schema, upsert)?;
        let deletes = pick(&td.aligned.old, &d.delete)?;
        let staged = self
            .apply_keyed(table, ours, &schema, &key, deletes, (upsert, known))
            .await?;
        Ok((Some(staged), found))
    }

    /// Ours with `deletes`' keys removed, then `upsert`'s rows set: the
    /// planner's delete and upsert, one after the other (the blobs of the
    /// first are stored before the second plans on them, as it reads
    /// their deletion vectors). Where ours holds the upserted keys may be
    /// known already (with no deletes: [`known_rows`]).
    pub(crate) async fn apply_keyed(
        &self,
        table: &str,
        ours: &TableSnapshot,
        schema: &SchemaRef,
        key: &[usize],
        deletes: RecordBatch,
        (upsert, known): (Vec<RecordBatch>, Option<plan::Found>),
    ) -> Result<Staged> {
        let settings = &self.config.write;
        let mut now = ours.clone();
        let mut blobs = Vec::new();
        let mut deleted = 0;
        if deletes.num_rows() > 0 {
            let keys = deletes
                .project(key)
                .map_err(Error::arrow("taking the keys a merge deletes"))?;
            let s = plan::plan_delete(&self.store, table, &now, &keys, &now.key, settings).await?;
            futures::future::try_join_all(s.blobs.iter().map(|b| self.store.put_blob(b.clone())))
                .await?;
            deleted = s.plan.rows_deleted;
            blobs.extend(s.blobs);
            now = s.plan.snapshot;
        }
        let (mut added, mut changed) = (0, 0);
        let grows = schema.fields().len() > now.schema.fields().len();
        if grows || upsert.iter().any(|b| b.num_rows() > 0) {
            let input = PlanInput {
                table,
                parent: Some(&now),
                schema: schema.clone(),
                batches: upsert,
                mode: Mode::Upsert,
                key: None,
                rules: SchemaRules::default(),
                settings,
            };
            let known = known.filter(|_| deleted == 0 && blobs.is_empty());
            let s = plan::plan_known(&self.store, input, known).await?;
            (added, changed) = (s.plan.rows_added, s.plan.rows_changed);
            deleted += s.plan.rows_deleted;
            blobs.extend(s.blobs);
            now = s.plan.snapshot;
        }
        Ok(Staged::new(
            Some(ours),
            now,
            blobs,
            (added, changed, deleted),
        ))
    }

    /// Ours with theirs' rows `append` added and `remove` removed, one
    /// instance each: an append when nothing is removed, otherwise
    /// ours' rows read whole and committed again (a multiset has no key to
    /// find a row by).
    pub(crate) async fn apply_unkeyed(
        &self,
        table: &str,
        ours: &TableSnapshot,
        schema: &SchemaRef,
        theirs: &SideDiff,
        append: &[u32],
        remove: &[u32],
    ) -> Result<Staged> {
        let grows = schema.fields().len() > ours.schema.fields().len();
        if append.is_empty() && remove.is_empty() && !grows {
            return Ok(Staged::new(Some(ours), ours.clone(), Vec::new(), (0, 0, 0)));
        }
        let added = pick(&theirs.aligned.new, append)?;
        let (mode, batches) = if remove.is_empty() {
            (Mode::Append, vec![added])
        } else {
            let own = schema_of(ours);
            let every = crate::table::ScanOptions::default();
            let (_, all, _) = crate::table::read(&self.store, ours, table, &every).await?;
            let all = concat_batches(&own, &all)
                .map_err(Error::arrow(format!("reading table '{table}' to merge")))?;
            let all = widen(&all, schema)?;
            let gone = pick(&theirs.aligned.old, remove)?;
            let keep = pick(&all, &threeway::remaining(&all, &gone)?)?;
            (Mode::Overwrite, vec![keep, added])
        };
        let (schema, batches) = in_table(schema, batches)?;
        let input = PlanInput {
            table,
            parent: Some(ours),
            schema,
            batches,
            mode,
            key: None,
            rules: SchemaRules::default(),
            settings: &self.config.write,
        };
        plan::plan(&self.store, input).await
    }
}

/// Every table either side changed since the base (or that either has
/// and the base lacks). No I/O.
/// Where ours holds each of theirs' rows to upsert (`rows`), as the
/// planner's look-up would find it, and the hash of each row found, from
/// the two diffs alone (`threeway::ours_rows`). `None` where that cannot
/// be trusted: the three sides' schemas or keys differ (rows in the
/// merged schema might hash otherwise than in ours'), or a row is in a
/// file ours does not name. No I/O.
pub(crate) fn known_rows(
    [base, ours, theirs]: [&TableSnapshot; 3],
    key: &[usize],
    od: &SideDiff,
    td: &SideDiff,
    rows: &RecordBatch,
) -> Result<Option<plan::Found>> {
    let same = |s: &TableSnapshot| s.schema == ours.schema && s.key == ours.key;
    if !same(base) || !same(theirs) {
        return Ok(None);
    }
    let held = threeway::ours_rows(key, &od.side(), &td.side(), rows)?;
    let file_of: HashMap<ObjectId, usize> = (ours.files.iter().enumerate())
        .map(|(i, f)| (f.data, i))
        .collect();
    let (mut ours_hashes, mut base_hashes) = (None, None);
    let mut locs = Vec::with_capacity(held.len());
    let mut hashes = HashMap::new();
    for h in held {
        let (batch, at, cache, i) = match h {
            None => {
                locs.push(None);
                continue;
            }
            Some(HeldBy::OursNew(i)) => (&od.aligned.new, &od.new_at, &mut ours_hashes, i),
            Some(HeldBy::Base(i)) => (&td.aligned.old, &td.old_at, &mut base_hashes, i),
        };
        let Some(&(blob, pos)) = at.get(i as usize) else {
            return Ok(None);
        };
        let Some(&file) = file_of.get(&blob) else {
            return Ok(None);
        };
        let all = match cache {
            Some(all) => all,
            None => cache.insert(hash_rows(batch)?),
        };
        let Some(hash) = all.get(i as usize) else {
            return Ok(None);
        };
        hashes.insert((file, pos), *hash);
        locs.push(Some(Loc { file, pos }));
    }
    Ok(Some(plan::Found::known(locs, hashes)))
}

pub(crate) fn changed_tables(three: &ThreeWay<'_>) -> Vec<String> {
    let names: BTreeSet<&String> = three
        .ours
        .tables
        .keys()
        .chain(three.theirs.tables.keys())
        .collect();
    names
        .into_iter()
        .filter(|n| {
            let b = three.base.and_then(|v| v.tables.get(*n));
            let (o, t) = (three.ours.tables.get(*n), three.theirs.tables.get(*n));
            o != t && t != b
        })
        .cloned()
        .collect()
}

/// The schema of a table both sides changed, merged: ours' columns, then
/// the columns only theirs added (nullable: ours' rows have no value
/// there). Each side may add columns; dropping or retyping one of the
/// base's, a column both added in different types, or another key is
/// refused, naming the columns. No I/O.
pub(crate) fn merged_schema(
    table: &str,
    base: &TableSnapshot,
    ours: &TableSnapshot,
    theirs: &TableSnapshot,
) -> Result<SchemaRef> {
    let unmergeable = |why: String| Error::Unmergeable {
        table: table.to_string(),
        why,
    };
    if ours.key != theirs.key || base.key != ours.key {
        return Err(unmergeable(format!(
            "its key is ({}) on this branch and ({}) on the merged side",
            ours.key.join(", "),
            theirs.key.join(", ")
        )));
    }
    let cols = |s: &TableSnapshot| crate::table::columns_line(&s.schema);
    let refuse = || {
        unmergeable(format!(
            "both sides changed its rows and their columns do not fit together (base: {}; this branch: {}; merged side: {}): a merge takes columns added on either side, not columns dropped or retyped; give both sides the same columns first",
            cols(base),
            cols(ours),
            cols(theirs)
        ))
    };
    let same_type = |s: &Schema, f: &Field| {
        s.field_with_name(f.name())
            .is_ok_and(|g| g.data_type() == f.data_type())
    };
    for f in base.schema.fields() {
        if !same_type(&ours.schema, f) || !same_type(&theirs.schema, f) {
            return Err(refuse());
        }
    }
    let mut fields: Vec<Field> = ours
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for f in theirs.schema.fields() {
        match ours.schema.field_with_name(f.name()) {
            Ok(_) if same_type(&ours.schema, f) => {}
            Ok(_) => return Err(refuse()),
            Err(_) => fields.push(f.as_ref().clone().with_nullable(true)),
        }
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        ours.schema.metadata().clone(),
    )))
}

/// `b`'s rows with the columns of `to` (by name; a column `b` lacks is
/// null), every column nullable as a diff's are. No I/O.
pub(crate) fn widen(b: &RecordBatch, to: &SchemaRef) -> Result<RecordBatch> {
    let fields: Vec<Field> = (to.fields().iter())
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let columns = fields
        .iter()
        .map(|f| match b.schema().index_of(f.name()) {
            Ok(i) => b.column(i).clone(),
            Err(_) => arrow::array::new_null_array(f.data_type(), b.num_rows()),
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(Error::arrow("bringing a side's rows to the merged columns"))
}

/// The positions of `key`'s columns in `schema`.
pub(crate) fn key_at(schema: &SchemaRef, key: &[String]) -> Result<Vec<usize>> {
    key.iter()
        .map(|k| {
            schema.index_of(k).map_err(|_| {
                Error::Internal(format!("key column '{k}' missing from a merge's rows"))
            })
        })
        .collect()
}

/// The rows of `b` at `at`.
pub(crate) fn pick(b: &RecordBatch, at: &[u32]) -> Result<RecordBatch> {
    take_record_batch(b, &UInt32Array::from(at.to_vec()))
        .map_err(Error::arrow("taking merged rows"))
}

/// Rows of the table (from a diff's schema, where every column is
/// nullable) in the table's schema, a column nullable where the table's is
/// or where the rows hold a null (the merged side made it nullable, as a
/// commit of those rows would). No I/O.
pub(crate) fn in_table(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let fields: Vec<Field> = (schema.fields().iter().enumerate())
        .map(|(i, f)| {
            let nulls = batches.iter().any(|b| b.column(i).null_count() > 0);
            f.as_ref().clone().with_nullable(f.is_nullable() || nulls)
        })
        .collect();
    let to = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let batches = batches
        .into_iter()
        .map(|b| RecordBatch::try_new(to.clone(), b.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow("bringing merged rows to the table's schema"))?;
    Ok((to, batches))
}

/// Rows of the table's schema in the aligned one.
pub(crate) fn as_aligned(schema: &SchemaRef, b: &RecordBatch) -> Result<RecordBatch> {
    RecordBatch::try_new(Arc::clone(schema), b.columns().to_vec())
        .map_err(Error::arrow("comparing a resolution's rows"))
}
