//! The plan's types: the modes, what a plan takes and gives, and the
//! checks a new snapshot passes against its parent.

use super::*;

/// How a commit's input relates to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The input is the whole table now; only the difference is stored.
    #[default]
    Overwrite,
    /// The input's rows are added.
    Append,
    /// Rows replace the rows with the same key; new keys are added.
    Upsert,
    /// The rows with the input's keys are removed.
    Delete,
    /// No input: the table's live rows are written again as full files,
    /// in key order, without deletion vectors (`tablepin compact`).
    Compact,
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Overwrite => "overwrite",
            Mode::Append => "append",
            Mode::Upsert => "upsert",
            Mode::Delete => "delete",
            Mode::Compact => "compact",
        }
    }
}

/// What to commit to one table.
pub(crate) struct PlanInput<'a> {
    pub(crate) table: &'a str,
    pub(crate) parent: Option<&'a TableSnapshot>,
    pub(crate) schema: SchemaRef,
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) mode: Mode,
    pub(crate) key: Option<Vec<String>>,
    pub(crate) rules: SchemaRules,
    pub(crate) settings: &'a WriteSettings,
}

/// The planned change to one table: the snapshot it makes and the blobs it
/// writes, named by their ids. It holds ids and counts, not bytes: the bytes
/// are made again from the same input when a saved plan is applied
/// ([`crate::Transaction::apply`]), and every id says they are the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TablePlan {
    /// The table's snapshot after the commit (every file it will list).
    pub snapshot: TableSnapshot,
    /// The data files and deletion vectors the commit writes, in write
    /// order (those the repository holds already are not stored again).
    pub writes: Vec<PlannedBlob>,
    /// Rows whose key (or, unkeyed, whose value) is new.
    pub rows_added: u64,
    /// Rows whose key existed with other values.
    pub rows_changed: u64,
    /// Rows removed.
    pub rows_deleted: u64,
    /// Which checks see the change against the parent.
    pub checks: Checks,
}

/// One blob a plan writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedBlob {
    /// Its id (the BLAKE3 of its bytes).
    pub id: ObjectId,
    /// Its size.
    pub bytes: u64,
}

/// A plan with the bytes it writes, ready to be written.
pub(crate) struct Staged {
    pub(crate) plan: TablePlan,
    /// The bytes of `plan.writes`, in the same order.
    pub(crate) blobs: Vec<Bytes>,
}

impl Staged {
    /// The plan of a new snapshot, its checks taken against the parent's;
    /// `rows` are the rows added, changed and deleted.
    pub(crate) fn new(
        parent: Option<&TableSnapshot>,
        snapshot: TableSnapshot,
        blobs: Vec<Bytes>,
        rows: (u64, u64, u64),
    ) -> Self {
        let checks = checks(parent, &snapshot);
        let writes = blobs
            .iter()
            .map(|b| PlannedBlob {
                id: ObjectId::of(b),
                bytes: b.len() as u64,
            })
            .collect();
        Self {
            plan: TablePlan {
                snapshot,
                writes,
                rows_added: rows.0,
                rows_changed: rows.1,
                rows_deleted: rows.2,
                checks,
            },
            blobs,
        }
    }
}

/// The verified bytes of the parent's data files a plan read, by blob:
/// compaction, which rewrites the files hiding the most rows (often the
/// ones just read), takes them from here instead of asking the store again.
pub(crate) type Held = HashMap<ObjectId, Bytes>;

/// Deletion vectors read already, by parent file index (`None`: the file
/// has none).
pub(crate) type Dvs = HashMap<usize, Option<RoaringBitmap>>;

/// Input rows that change their parent row, with that row.
pub(crate) type Changed = Vec<(usize, OldRow)>;

/// New data files' entries and bytes, in the same order.
pub(crate) type NewFiles = (Vec<FileEntry>, Vec<Bytes>);

/// The four checks of a new snapshot against its parent.
pub(crate) fn checks(parent: Option<&TableSnapshot>, new: &TableSnapshot) -> Checks {
    let file_ids = |s: &TableSnapshot| -> Vec<(ObjectId, Option<DeletionVector>)> {
        s.files
            .iter()
            .map(|f| (f.data, f.deletes.clone()))
            .collect()
    };
    match parent {
        None => Checks {
            rows: new.rows > 0,
            schema: true,
            files: !new.files.is_empty(),
            content: new.rows > 0,
        },
        Some(p) => Checks {
            rows: p.rows != new.rows,
            schema: p.schema != new.schema || p.key != new.key,
            files: file_ids(p) != file_ids(new),
            content: p.content_hash != new.content_hash,
        },
    }
}
