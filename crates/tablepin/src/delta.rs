//! A Delta Lake view of a table at a version, for engines that read Delta
//! (delta-rs and what is built on it, polars, Spark): `_delta_log/` commits
//! whose `add` actions name tablepin's own Parquet files and carry their
//! deletion vectors in Delta's format (inline, Z85), under the protocol's
//! `deletionVectors` reader feature.
//!
//! The files are hard-linked into the view's `data/` folder when the
//! repository is a local folder on the same file system (no byte copied),
//! and copied otherwise, as they are into a view in a bucket (`s3://`,
//! `gs://`, `az://`), whose log entries are created put-if-absent. Absolute URIs in `add.path`, which would spare the
//! links, are read by delta-rs as paths inside the table (it looked for
//! `/view/file:/repo/…`), so the view links instead. A view is a copy of
//! the rows as far as erasure goes: erasing rows from the repository does
//! not reach a view made before; delete the view.
//!
//! Deciding is pure ([`plan_commits`], [`delta_schema`], [`dv_descriptor`]);
//! [`Repo::export_delta`] reads the snapshots and writes the folder.
//!
//! What each commit says: the first adds every file; each next removes the
//! file and deletion-vector pairs that went and adds the ones that came. A
//! deletion vector is Delta's `RoaringBitmapArray` (magic 1681511377, one
//! 32-bit bitmap under key 0), Z85-encoded inline. A view in a bucket is
//! opened as a repository's URL is (`Store::bucket`); its files and log
//! entries are created put-if-absent, and the prefix must be empty. Each
//! `add` carries `numRecords`, which polars needs for a file with a deletion
//! vector.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions};

use arrow::datatypes::{DataType, Field, Schema};
use roaring::RoaringBitmap;
use serde::Serialize;
use serde_json::{json, Value};
use tablepin_format::{ObjectId, TableSnapshot, Version, VersionId};

use crate::error::{Error, Result};
use crate::repo::Repo;

/// The magic number that opens a serialized Delta deletion vector (a
/// `RoaringBitmapArray`, little-endian), from the Delta protocol.
const DV_MAGIC: u32 = 1_681_511_377;

/// What [`Repo::export_delta`] wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeltaExport {
    /// The view's folder.
    pub dir: String,
    /// Delta versions written (0 to N-1), one per tablepin version.
    pub delta_versions: Vec<DeltaVersion>,
    /// Data files the view names.
    pub files: u64,
    /// Of them, hard-linked to the repository's blobs (no bytes copied).
    pub linked: u64,
    /// Of them, copied (the repository is elsewhere).
    pub copied: u64,
    /// Bytes copied.
    pub bytes_copied: u64,
    /// Of them, written again without the rows a deletion vector hides
    /// (a view without deletion vectors).
    pub rewritten: u64,
    /// Bytes of the files written again.
    pub bytes_rewritten: u64,
}

/// How a Delta view is written ([`Repo::export_delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaOptions {
    /// One Delta version per version along the revision's first parents.
    pub history: bool,
    /// Hidden rows as Delta deletion vectors (the files are the
    /// repository's own); without, each file a deletion vector touches is
    /// written again without the rows it hides, for readers without
    /// deletion vectors (deltalake's `to_pyarrow_table`, older Spark).
    pub deletion_vectors: bool,
}

impl Default for DeltaOptions {
    fn default() -> Self {
        Self {
            history: false,
            deletion_vectors: true,
        }
    }
}

/// One Delta version of the view and the tablepin version it shows.
#[derive(Debug, Clone, Serialize)]
pub struct DeltaVersion {
    /// The Delta version number.
    pub delta_version: u64,
    /// The tablepin version.
    pub version: VersionId,
    /// Its rows.
    pub rows: u64,
    /// Its content hash.
    pub content_hash: String,
}

/// A data file as a Delta `add` names it: its blob and its deletion
/// vector's descriptor.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ViewFile {
    /// The Parquet blob.
    pub blob: ObjectId,
    /// Its size.
    pub bytes: u64,
    /// Rows in it, hidden ones included (Delta's `numRecords`).
    pub rows: u64,
    /// The deletion vector, Z85 and its decoded size and cardinality.
    pub dv: Option<(String, u64, u64)>,
}

impl ViewFile {
    fn path(&self) -> String {
        format!("data/{}.parquet", self.blob)
    }
}

/// The Delta type of an Arrow column, or why it has none.
fn delta_type(field: &Field) -> std::result::Result<Value, String> {
    Ok(Value::String(
        match field.data_type() {
            DataType::Boolean => "boolean",
            DataType::Int8 => "byte",
            DataType::Int16 => "short",
            DataType::Int32 => "integer",
            DataType::Int64 => "long",
            DataType::Float32 => "float",
            DataType::Float64 => "double",
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary",
            DataType::Date32 => "date",
            DataType::Timestamp(_, Some(_)) => "timestamp",
            DataType::Timestamp(_, None) => "timestamp_ntz",
            DataType::Decimal128(p, s) if *p <= 38 && *s >= 0 => {
                return Ok(Value::String(format!("decimal({p},{s})")))
            }
            other => return Err(format!("{other} has no Delta type")),
        }
        .to_string(),
    ))
}

/// The Delta schema string of an Arrow schema, and whether it needs the
/// `timestampNtz` feature; an unsupported column is named.
pub fn delta_schema(schema: &Schema) -> Result<(String, bool)> {
    let mut ntz = false;
    let mut fields = Vec::new();
    for f in schema.fields() {
        let t = delta_type(f).map_err(|why| {
            Error::InvalidArgument(format!(
                "column '{}' cannot be shown as Delta: {why}; export it to Parquet instead",
                f.name()
            ))
        })?;
        ntz |= t == "timestamp_ntz";
        // Timestamps of other units than microseconds are read and cast
        // by the Delta readers tested (delta-rs, polars).
        fields.push(
            json!({"name": f.name(), "type": t, "nullable": f.is_nullable(), "metadata": {}}),
        );
    }
    Ok((json!({"type": "struct", "fields": fields}).to_string(), ntz))
}

/// A deletion vector in Delta's inline form: the Z85 text of the
/// serialized `RoaringBitmapArray` (magic, one 32-bit bitmap under key 0),
/// zero-padded to a multiple of 4 bytes as Z85 needs, its size before the
/// padding, and its cardinality.
pub fn dv_descriptor(bm: &RoaringBitmap) -> Result<(String, u64, u64)> {
    let mut out = Vec::with_capacity(16 + bm.serialized_size());
    out.extend_from_slice(&DV_MAGIC.to_le_bytes());
    out.extend_from_slice(&1u64.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    bm.serialize_into(&mut out)
        .map_err(|e| Error::Internal(format!("encoding a deletion vector: {e}")))?;
    let size = out.len() as u64;
    out.resize(out.len().div_ceil(4) * 4, 0);
    Ok((z85::encode(&out), size, bm.len()))
}

/// The actions of each Delta commit: the first adds every file of the
/// first snapshot; each next one removes the files (or file and deletion
/// vector pairs) the snapshot before had and this one lacks, and adds the
/// ones it has new. `schemas[i]` is snapshot i's schema string, written
/// again where it changes. `time_ms` stamps the actions.
pub fn plan_commits(
    snapshots: &[(Vec<ViewFile>, String)],
    protocol: &Value,
    table_id: &str,
    time_ms: i64,
) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    let mut before: BTreeSet<ViewFile> = BTreeSet::new();
    let mut schema_before: Option<&String> = None;
    for (files, schema) in snapshots {
        let now: BTreeSet<ViewFile> = files.iter().cloned().collect();
        let mut actions = Vec::new();
        if schema_before.is_none() {
            actions.push(protocol.clone());
        }
        if schema_before != Some(schema) {
            actions.push(json!({"metaData": {
                "id": table_id,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": schema,
                "partitionColumns": [],
                "configuration": configuration(protocol),
                "createdTime": time_ms,
            }}));
        }
        for f in before.difference(&now) {
            let mut remove = json!({
                "path": f.path(), "deletionTimestamp": time_ms, "dataChange": true,
                "extendedFileMetadata": true, "partitionValues": {}, "size": f.bytes,
            });
            if let Some(dv) = &f.dv {
                remove["deletionVector"] = dv_json(dv);
            }
            actions.push(json!({ "remove": remove }));
        }
        for f in now.difference(&before) {
            let mut add = json!({
                "path": f.path(), "partitionValues": {}, "size": f.bytes,
                "modificationTime": time_ms, "dataChange": true,
                "stats": json!({"numRecords": f.rows}).to_string(),
            });
            if let Some(dv) = &f.dv {
                add["deletionVector"] = dv_json(dv);
            }
            actions.push(json!({ "add": add }));
        }
        out.push(actions);
        before = now;
        schema_before = Some(schema);
    }
    out
}

/// The table's configuration: deletion vectors on when the protocol has
/// them.
fn configuration(protocol: &Value) -> Value {
    let dvs = protocol["protocol"]["readerFeatures"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "deletionVectors"));
    if dvs {
        json!({"delta.enableDeletionVectors": "true"})
    } else {
        json!({})
    }
}

fn dv_json((z85, size, count): &(String, u64, u64)) -> Value {
    json!({"storageType": "i", "pathOrInlineDv": z85, "sizeInBytes": size, "cardinality": count})
}

/// The protocol action: reader 3 and writer 7 with the features the view
/// uses (deletion vectors, timestamps without a time zone); reader 1 and
/// writer 2, which every Delta reader takes, when it uses none.
fn protocol(ntz: bool, dvs: bool) -> Value {
    let mut features = Vec::new();
    if dvs {
        features.push("deletionVectors");
    }
    if ntz {
        features.push("timestampNtz");
    }
    if features.is_empty() {
        return json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}});
    }
    json!({"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": features, "writerFeatures": features,
    }})
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Output {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl Repo {
    /// Writes a Delta Lake view of `table` at `rev` at `location`: a folder
    /// (which must not exist, or be empty) or a bucket URL (`s3://…`,
    /// `gs://…`, `az://…`, under which nothing may be yet): one Delta
    /// version, or with `history` one per version along `rev`'s first
    /// parents, oldest first, so that Delta's `VERSION AS OF n` reaches the
    /// n-th of them.
    /// A view without deletion vectors (`opts`) writes each file one
    /// touches again without its hidden rows.
    pub async fn export_delta(
        &self,
        rev: &str,
        table: &str,
        location: &str,
        opts: &DeltaOptions,
    ) -> Result<DeltaExport> {
        let history = opts.history;
        let dest = Dest::open(location)?;
        if !dest.is_empty().await? {
            return Err(Error::InvalidArgument(format!(
                "{} is not empty; a Delta view needs a new folder",
                dest.name()
            )));
        }
        let head = self.resolve(rev).await?;
        let versions = if history {
            self.first_parents(head).await?
        } else {
            vec![(head, self.version(&head).await?)]
        };
        let mut snapshots: Vec<(VersionId, TableSnapshot)> = Vec::new();
        for (id, v) in versions {
            if v.tables.contains_key(table) {
                snapshots.push((id, self.snapshot_of(&id, &v, table).await?));
            } else if id == head {
                // The table's absence at REV itself is the user's error.
                self.snapshot_of(&id, &v, table).await?;
            }
        }
        let mut views = Vec::new();
        let mut ntz = false;
        // Deletion-vector packs read once, whichever snapshots share them.
        let mut packs = crate::table::dv::Known::new();
        // Files written again without their hidden rows, by path.
        let mut rewritten: BTreeMap<String, bytes::Bytes> = BTreeMap::new();
        for (id, s) in &snapshots {
            let (schema, n) = delta_schema(&s.schema)?;
            ntz |= n;
            let files = if opts.deletion_vectors {
                self.view_files(s, &mut packs).await
            } else {
                self.view_files_rewritten(s, &mut packs, &mut rewritten)
                    .await
            };
            let files = files.map_err(|e| crate::repo::named(e, Some(*id), table))?;
            views.push((files, schema));
        }
        let now = crate::repo::now_ms();
        let table_id = ObjectId::of(format!("{table}@{head}").as_bytes()).to_string();
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            &table_id[..8],
            &table_id[8..12],
            &table_id[12..16],
            &table_id[16..20],
            &table_id[20..32]
        );
        let commits = plan_commits(&views, &protocol(ntz, opts.deletion_vectors), &uuid, now);
        let mut out = DeltaExport {
            dir: dest.name(),
            ..Default::default()
        };
        // Every file is checked before the view names it (a damaged one is
        // damage of the version, as any other read of it says).
        self.place_files(&views, &rewritten, &dest, &mut out)
            .await
            .map_err(|e| crate::repo::named(e, Some(head), table))?;
        for (n, (actions, (id, s))) in commits.iter().zip(&snapshots).enumerate() {
            let info = json!({"commitInfo": {
                "timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Overwrite"},
                "engineInfo": concat!("tablepin ", env!("CARGO_PKG_VERSION")),
                "tablepin": {"version": id, "content_hash": s.content_hash.to_string()},
            }});
            let mut text = String::new();
            for a in std::iter::once(&info).chain(actions) {
                text.push_str(&a.to_string());
                text.push('\n');
            }
            dest.put(&format!("_delta_log/{n:020}.json"), text.into())
                .await?;
            out.delta_versions.push(DeltaVersion {
                delta_version: n as u64,
                version: *id,
                rows: s.rows,
                content_hash: s.content_hash.to_string(),
            });
        }
        Ok(out)
    }

    /// `head` and its first parents that are still stored, with their
    /// records, oldest first.
    async fn first_parents(&self, head: VersionId) -> Result<Vec<(VersionId, Version)>> {
        let mut chain = Vec::new();
        let mut next = Some(head);
        while let Some(id) = next {
            match self.version(&id).await {
                Ok(v) => {
                    next = v.parents.first().copied();
                    chain.push((id, v));
                }
                // An expired version ends what the view can show.
                Err(e) if e.is_missing() => break,
                Err(e) => return Err(e),
            }
        }
        chain.reverse();
        Ok(chain)
    }

    /// A snapshot's files with their deletion vectors in Delta's form.
    async fn view_files(
        &self,
        s: &TableSnapshot,
        packs: &mut crate::table::dv::Known,
    ) -> Result<Vec<ViewFile>> {
        let dvs = crate::table::dv::load_with(self.store(), &s.files, packs).await?;
        s.files
            .iter()
            .zip(dvs)
            .map(|(f, bm)| {
                Ok(ViewFile {
                    blob: f.data,
                    bytes: f.bytes,
                    rows: f.rows,
                    dv: bm.as_ref().map(dv_descriptor).transpose()?,
                })
            })
            .collect()
    }

    /// A snapshot's files for a view without deletion vectors: a file a
    /// deletion vector touches is read (verified) through the read
    /// planner's picked reads, its live rows written again as a Parquet
    /// file in its own schema, named by its bytes' hash (kept in
    /// `rewritten` by path), and named instead of it.
    async fn view_files_rewritten(
        &self,
        s: &TableSnapshot,
        packs: &mut crate::table::dv::Known,
        rewritten: &mut BTreeMap<String, bytes::Bytes>,
    ) -> Result<Vec<ViewFile>> {
        use crate::table::scan::{read_picked, Pick, Picked};
        let dvs = crate::table::dv::load_with(self.store(), &s.files, packs).await?;
        let picked: Vec<Picked> = (s.files.iter().zip(&dvs))
            .filter_map(|(f, bm)| {
                bm.as_ref().map(|bm| Picked {
                    blob: f.data,
                    schema: None,
                    rows: Pick::Live(Some(bm.clone())),
                })
            })
            .collect();
        let mut live = read_picked(self.store(), &picked).await?.into_iter();
        let mut out = Vec::with_capacity(s.files.len());
        for (f, bm) in s.files.iter().zip(dvs) {
            let Some(read) = bm.and_then(|_| live.next()) else {
                out.push(ViewFile {
                    blob: f.data,
                    bytes: f.bytes,
                    rows: f.rows,
                    dv: None,
                });
                continue;
            };
            let bytes = parquet_bytes(&read.schema, &read.batches)?;
            let rows: usize = read.batches.iter().map(|b| b.num_rows()).sum();
            let v = ViewFile {
                blob: ObjectId::of(&bytes),
                bytes: bytes.len() as u64,
                rows: rows as u64,
                dv: None,
            };
            rewritten.insert(v.path(), bytes);
            out.push(v);
        }
        Ok(out)
    }

    /// Puts every data file the view names into the view's `data/`: a
    /// hard link to the blob when the repository and the view are folders
    /// on one file system, else a copy of its verified bytes; a file
    /// written again (`rewritten`, by path) is put as it is.
    async fn place_files(
        &self,
        views: &[(Vec<ViewFile>, String)],
        rewritten: &BTreeMap<String, bytes::Bytes>,
        dest: &Dest,
        out: &mut DeltaExport,
    ) -> Result<()> {
        for (path, bytes) in rewritten {
            out.files += 1;
            out.rewritten += 1;
            out.bytes_rewritten += bytes.len() as u64;
            dest.put(path, bytes.clone()).await?;
        }
        let blobs: BTreeMap<ObjectId, String> = views
            .iter()
            .flat_map(|(files, _)| files)
            .filter(|f| !rewritten.contains_key(&f.path()))
            .map(|f| (f.blob, f.path()))
            .collect();
        // A link bypasses the store's reads, which check every blob: each
        // is checked here first, so a view never serves damage and a
        // damaged file leaves no view behind.
        for blob in blobs.keys() {
            self.store().check_local_blob(blob)?;
        }
        for (blob, target) in blobs {
            out.files += 1;
            if let Some(source) = self.store().local_blob_path(&blob) {
                if dest.link(&source, &target)? {
                    out.linked += 1;
                    continue;
                }
            }
            let bytes = self.store().get_blob(&blob).await?;
            out.bytes_copied += bytes.len() as u64;
            dest.put(&target, bytes).await?;
            out.copied += 1;
        }
        Ok(())
    }
}

/// Rows as one Parquet file's bytes, as a view's reader takes them.
fn parquet_bytes(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[arrow::array::RecordBatch],
) -> Result<bytes::Bytes> {
    let fail = |e: parquet::errors::ParquetError| {
        Error::Internal(format!("writing a view's data file: {e}"))
    };
    let mut buf = Vec::new();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut buf, schema.clone(), None).map_err(fail)?;
    for b in batches {
        w.write(b).map_err(fail)?;
    }
    w.close().map_err(fail)?;
    Ok(bytes::Bytes::from(buf))
}

/// Where a view is written: a local folder or a bucket.
enum Dest {
    Folder(PathBuf),
    Bucket {
        store: Arc<dyn ObjectStore>,
        url: String,
    },
}

impl Dest {
    fn open(location: &str) -> Result<Self> {
        Ok(match tablepin_store::Store::bucket(location)? {
            Some(store) => Dest::Bucket {
                store,
                url: tablepin_store::remote::redacted(location),
            },
            None => Dest::Folder(PathBuf::from(location)),
        })
    }

    /// The location as it may be printed.
    fn name(&self) -> String {
        match self {
            Dest::Folder(dir) => dir.display().to_string(),
            Dest::Bucket { url, .. } => url.clone(),
        }
    }

    async fn is_empty(&self) -> Result<bool> {
        match self {
            Dest::Folder(dir) => match std::fs::read_dir(dir) {
                Ok(mut d) => Ok(d.next().is_none()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
                Err(e) => Err(io_error(dir, e)),
            },
            Dest::Bucket { store, url } => match store.list(None).next().await {
                None => Ok(true),
                Some(Ok(_)) => Ok(false),
                Some(Err(e)) => Err(bucket_error(url, "", e)),
            },
        }
    }

    /// Hard-links a local file to `rel`: true when it is linked, false
    /// when it cannot be (a bucket, another file system), and then the
    /// caller copies it.
    fn link(&self, source: &Path, rel: &str) -> Result<bool> {
        match self {
            Dest::Folder(dir) => {
                let target = folder_path(dir, rel)?;
                Ok(std::fs::hard_link(source, &target).is_ok())
            }
            Dest::Bucket { .. } => Ok(false),
        }
    }

    /// Writes a new file (a bucket's put-if-absent: a log entry is never
    /// replaced, as Delta's writers require).
    async fn put(&self, rel: &str, bytes: bytes::Bytes) -> Result<()> {
        match self {
            Dest::Folder(dir) => {
                let path = folder_path(dir, rel)?;
                std::fs::write(&path, &bytes).map_err(|e| io_error(&path, e))
            }
            Dest::Bucket { store, url } => {
                let opts = PutOptions {
                    mode: PutMode::Create,
                    ..Default::default()
                };
                store
                    .put_opts(&ObjectPath::from(rel), bytes.into(), opts)
                    .await
                    .map(drop)
                    .map_err(|e| bucket_error(url, rel, e))
            }
        }
    }
}

/// `rel` under a view's folder, with the folders it needs created.
fn folder_path(dir: &Path, rel: &str) -> Result<PathBuf> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    }
    Ok(path)
}

fn bucket_error(url: &str, rel: &str, e: object_store::Error) -> Error {
    Error::Output {
        path: format!("{}/{rel}", url.trim_end_matches('/')),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::TimeUnit;

    #[test]
    fn a_deletion_vector_is_delta_s_roaring_array_in_z85() {
        let bm: RoaringBitmap = [1u32, 3].into_iter().collect();
        let (text, size, count) = dv_descriptor(&bm).unwrap();
        assert_eq!(count, 2);
        let bytes = z85::decode(&text).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        assert_eq!(&bytes[..4], &DV_MAGIC.to_le_bytes());
        assert_eq!(&bytes[4..12], &1u64.to_le_bytes());
        assert_eq!(&bytes[12..16], &0u32.to_le_bytes());
        let back = RoaringBitmap::deserialize_from(&bytes[16..size as usize]).unwrap();
        assert_eq!(back, bm);
    }

    fn file(n: u8, dv: Option<&[u32]>) -> ViewFile {
        ViewFile {
            blob: ObjectId::of(&[n]),
            bytes: 100,
            rows: 10,
            dv: dv.map(|d| dv_descriptor(&d.iter().copied().collect()).unwrap()),
        }
    }

    #[test]
    fn each_commit_removes_what_went_and_adds_what_came() {
        let schema = "s".to_string();
        let snapshots = vec![
            (vec![file(1, None), file(2, None)], schema.clone()),
            // File 2 gained a deletion vector, file 3 came.
            (
                vec![file(1, None), file(2, Some(&[4])), file(3, None)],
                schema.clone(),
            ),
            // File 1 went; a new schema.
            (vec![file(2, Some(&[4])), file(3, None)], "t".to_string()),
        ];
        let commits = plan_commits(&snapshots, &protocol(false, true), "id", 0);
        let kinds = |c: &Vec<Value>| -> Vec<String> {
            c.iter()
                .map(|a| a.as_object().unwrap().keys().next().unwrap().clone())
                .collect()
        };
        assert_eq!(kinds(&commits[0]), ["protocol", "metaData", "add", "add"]);
        assert_eq!(kinds(&commits[1]), ["remove", "add", "add"]);
        assert_eq!(kinds(&commits[2]), ["metaData", "remove"]);
        let removed = &commits[1][0]["remove"];
        assert_eq!(removed["path"], file(2, None).path());
        assert!(removed.get("deletionVector").is_none());
        let added: Vec<&Value> = commits[1][1..].iter().map(|a| &a["add"]).collect();
        assert!(added
            .iter()
            .any(|a| a["deletionVector"]["cardinality"] == 1));
        assert_eq!(added[0]["stats"], "{\"numRecords\":10}");
    }

    #[test]
    fn a_column_without_a_delta_type_is_named() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]);
        let (s, ntz) = delta_schema(&schema).unwrap();
        assert!(ntz);
        assert!(s.contains("\"long\"") && s.contains("timestamp_ntz"), "{s}");
        let bad = Schema::new(vec![Field::new("u", DataType::UInt64, true)]);
        let err = delta_schema(&bad).unwrap_err().to_string();
        assert!(err.contains("column 'u'"), "{err}");
    }
}
