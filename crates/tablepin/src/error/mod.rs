//! The engine's one error type. Every variant names what failed (file,
//! column, row, ref, blob, version) and, where there is one, the fix; the
//! command line prints it as one sentence and maps [`Error::kind`] to an exit
//! code.

use tablepin_format::{FormatError, ObjectId, VersionId};
use tablepin_rowhash::RowHashError;
use tablepin_store::StoreError;

mod way_out;
pub use way_out::{Fix, Library, Words};

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Broad kinds of failure, for exit codes and for callers that branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad input: a file, a column, a key, a schema, an argument.
    InvalidInput,
    /// A repository, ref, revision or table that does not exist.
    NotFound,
    /// Something exists already, or a ref moved under us.
    Conflict,
    /// Stored bytes are damaged.
    Damaged,
    /// Storage or another system failed.
    Io,
    /// A failure inside tablepin itself (a bug): not the input's fault.
    Internal,
}

/// Errors of the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A user file cannot be read or is not what its name says.
    #[error("cannot read '{path}': {message}")]
    Input {
        /// The file.
        path: String,
        /// What is wrong, in one sentence.
        message: String,
    },
    /// A user file cannot be written.
    #[error("cannot write '{path}': {message}")]
    Output {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// No repository where one was looked for: a folder and its parents,
    /// or a URL.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    NoRepository {
        /// Where the search started.
        start: String,
    },
    /// `init` where a repository exists.
    #[error("a tablepin repository exists already at {path}")]
    RepositoryExists {
        /// The repository.
        path: String,
    },
    /// A column named by the user is not in the table.
    #[error("table '{table}' has no column '{column}' (columns: {available})")]
    UnknownColumn {
        /// The table.
        table: String,
        /// The missing column.
        column: String,
        /// The columns it has, comma-separated.
        available: String,
    },
    /// A key column holds a null.
    #[error("key column '{column}' of table '{table}' is null in row {} of the input; key columns cannot be null", .row + 1)]
    NullKey {
        /// The table.
        table: String,
        /// The key column.
        column: String,
        /// The 0-based input row (said counting from 1).
        row: usize,
    },
    /// Two input rows have the same key.
    #[error("rows {} and {} of the input have the same key {key} in table '{table}'; keys must be unique", .first + 1, .second + 1)]
    DuplicateKey {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
        /// The first row (0-based, said counting from 1).
        first: usize,
        /// The second row (0-based).
        second: usize,
    },
    /// An input value that reading it as the table's type would change.
    #[error("the input of table '{table}': column '{column}' cannot become {to} without changing a value: row {} {change}", .row + 1)]
    LossyValue {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// The table's type.
        to: String,
        /// The 0-based input row (said counting from 1).
        row: usize,
        /// What the row holds and what it would become ("holds 5.5 and
        /// would become 5").
        change: String,
    },
    /// An appended key exists already.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    KeyExists {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
    },
    /// Staged files ([`crate::Transaction::stage`]) that do not fit the
    /// commit: another table, schema or key, files staged twice, or a mode
    /// that takes keys rather than files.
    #[error("the staged files of table '{table}' {detail}")]
    Staged {
        /// The table.
        table: String,
        /// What does not fit, and the fix.
        detail: String,
    },
    /// A staged file is not in the repository.
    #[error("staged file {} of table '{table}' is not in the repository (gc removes staged files that no commit took within its grace period); stage its rows again", .blob.short(12))]
    StagedGone {
        /// The table.
        table: String,
        /// The staged data file.
        blob: ObjectId,
    },
    /// The key columns given differ from the ones the table remembers.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    KeyChange {
        /// The table.
        table: String,
        /// The remembered key.
        old: Vec<String>,
        /// The key given.
        new: Vec<String>,
    },
    /// A mode that needs a key on a table without one.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    NoKey {
        /// The table.
        table: String,
        /// The mode.
        mode: crate::Mode,
    },
    /// `compact` found the table's files laid out as compaction would
    /// write them: nothing to do.
    #[error(
        "table '{table}' is already compact: its live rows are in the files compaction would write"
    )]
    AlreadyCompact {
        /// The table.
        table: String,
    },
    /// A table's live rows, read whole, do not hash to its snapshot's
    /// content hash.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    ContentMismatch {
        /// The table.
        table: String,
    },
    /// The input's schema differs from the table's.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    SchemaChange {
        /// The table.
        table: String,
        /// Which column changed and how.
        detail: String,
        /// Another way out: reading this input column as this type (when
        /// no value changes).
        cast_to: Option<(String, String)>,
    },
    /// An incompatible schema change in a mode that does not rewrite the
    /// table.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    RewriteNeedsOverwrite {
        /// The table.
        table: String,
        /// Which column changed and how.
        detail: String,
    },
    /// An erasure without a reason for its audit record.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    NoReason,
    /// A retention policy keeping no version of a branch.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    KeepNone,
    /// A name that is both a tag and a branch, naming different versions.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    TagAndBranch {
        /// The name.
        rev: String,
        /// The tag's version (short id).
        tag: String,
        /// The branch's version (short id).
        branch: String,
    },
    /// A revision that names nothing.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    UnknownRev {
        /// The revision.
        rev: String,
    },
    /// A version id prefix that names several versions.
    #[error("version id prefix '{rev}' is ambiguous: it matches {candidates}; give more digits")]
    AmbiguousRev {
        /// The prefix.
        rev: String,
        /// The matches, comma-separated.
        candidates: String,
    },
    /// A ref that exists where one was to be created.
    #[error(
        "{kind} '{name}' exists already (at {target}); delete it first or choose another name"
    )]
    RefExists {
        /// "tag" or "branch".
        kind: &'static str,
        /// The name.
        name: String,
        /// Where it points.
        target: String,
    },
    /// A tag named as a branch is, or a branch as a tag: a revision naming
    /// both would be ambiguous.
    #[error("'{name}' is the name of a {other} (at {target}), and a {kind} cannot take it; choose another name")]
    NameTaken {
        /// "tag" or "branch": what was to be created.
        kind: &'static str,
        /// The name.
        name: String,
        /// What has the name.
        other: &'static str,
        /// Where that points.
        target: String,
    },
    /// A commit to a branch that does not exist, in a repository that has
    /// branches: most likely a typo, which would otherwise start a new,
    /// parentless branch.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    UnknownBranch {
        /// The branch named.
        name: String,
        /// The branches there are, comma-separated.
        branches: String,
        /// "; did you mean 'main'?" or empty.
        hint: String,
    },
    /// A commit to a branch that was deleted: it would start a new,
    /// parentless history under the old name while the old one waits,
    /// unprotected, to be restored or expired by gc.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    DeletedBranch {
        /// The branch named.
        name: String,
        /// Its head before the deletion, shortened.
        target: String,
    },
    /// A branch that named no version at a time: its first commit is
    /// later.
    #[error("branch '{branch}' named no version at {time}; its first commit is later, at {first}")]
    NoVersionAt {
        /// The branch.
        branch: String,
        /// The time asked for, as given.
        time: String,
        /// The time of its first entry (RFC 3339).
        first: String,
    },
    /// A gc grace shorter than a commit can take, while other processes
    /// may be committing: it could delete a commit's new files before the
    /// commit names them.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    ShortGrace {
        /// The grace asked for (ms).
        grace_ms: i64,
        /// The shortest allowed (ms).
        min_ms: i64,
    },
    /// A version that gc expired: its rows are gone, its tombstone says
    /// what it held.
    #[error("version {version} was expired by gc at {expired} ({reason}); its rows are no longer stored, only what it held: {tables}")]
    Expired {
        /// The version, shortened.
        version: String,
        /// When gc expired it (RFC 3339).
        expired: String,
        /// The policy that expired it.
        reason: String,
        /// Each table's rows and content hash.
        tables: String,
    },
    /// Deleting the last branch, or the default branch, without force.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    ProtectedBranch {
        /// The branch.
        name: String,
        /// Why it is protected.
        reason: String,
        /// What would be left unprotected.
        what: String,
    },
    /// A table a merge cannot settle row by row: one side dropped it, the
    /// sides' keys or columns do not fit together, or a resolution lacks
    /// rows.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    Unmergeable {
        /// The table.
        table: String,
        /// Why, as a clause ("ours dropped it and theirs changed it").
        why: String,
    },
    /// A person's resolution of a merge's conflicts that lacks the row of
    /// a conflicting key.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    ResolutionShort {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
    },
    /// A ref that does not exist.
    #[error("{kind} '{name}' does not exist{hint}")]
    UnknownRef {
        /// "tag" or "branch".
        kind: &'static str,
        /// The name.
        name: String,
        /// "; did you mean 'dev'?" or empty.
        hint: String,
    },
    /// A name that cannot be a ref or table name.
    #[error("'{name}' is not a valid {what} name: {reason}")]
    InvalidName {
        /// "tag", "branch" or "table".
        what: &'static str,
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A version without the table asked for.
    #[error("version {version} has no table '{table}' (tables: {available})")]
    UnknownTable {
        /// The table.
        table: String,
        /// The version.
        version: String,
        /// Its tables.
        available: String,
    },
    /// No branch head has the table asked for.
    #[error("the branch heads have no table '{table}' (tables: {available})")]
    NoTableAtHeads {
        /// The table.
        table: String,
        /// The tables the heads have.
        available: String,
    },
    /// A blob a version needs is damaged or missing.
    #[error("{what} of version {version}{table} is unreadable: {source}")]
    Damaged {
        /// What the blob is ("data file 1f2e…", "version record").
        what: String,
        /// The version.
        version: VersionId,
        /// ", table 'x'" or empty.
        table: String,
        /// The store's error, which names the blob.
        #[source]
        source: Box<StoreError>,
    },
    /// gc found a blob a kept version needs missing or damaged, and so
    /// changed nothing.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    KeptBlobsDamaged {
        /// The first problem.
        first: String,
        /// How many more there are.
        more: usize,
    },
    /// A stored document (audit record, tombstone, config) is damaged;
    /// the sentence names it.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    DamagedDocument(String),
    /// A stored Parquet or deletion-vector blob does not decode.
    #[error("blob {blob} ({what}) does not decode: {message}")]
    BadBlob {
        /// The blob.
        blob: ObjectId,
        /// What it should be.
        what: &'static str,
        /// Why it fails.
        message: String,
    },
    /// A branch moved while a command ran, more times than it retries.
    #[error("{}", self.say_fixed(&Library).unwrap_or_default())]
    Conflict {
        /// The branch.
        branch: String,
        /// How long the commit retried.
        waited_s: u64,
    },
    /// A ref an erasure was moving was moved by another writer.
    #[error("ref {name} moved while the erasure ran; run the same erase again to finish it")]
    RefMoved {
        /// The ref, as `branches/main`.
        name: String,
    },
    /// A saved plan no longer says what applying it would do: the
    /// repository moved since it was made.
    #[error("the saved {what} plan no longer fits the repository ({detail}); nothing was changed: make the plan again")]
    PlanOutdated {
        /// Which plan: "erasure" or "commit".
        what: &'static str,
        /// What differs.
        detail: String,
    },
    /// A saved plan was given with another predicate than it was made with.
    #[error("the predicate is not the one the saved erasure plan was made with (its BLAKE3 is {planned}); nothing was changed")]
    PlanPredicate {
        /// BLAKE3 of the plan's predicate.
        planned: String,
    },
    /// A saved commit plan was given another input than it was made with.
    #[error("the input is not the one the saved commit plan for table '{table}' was made with (its {detail}); nothing was committed: make the plan again from this input")]
    PlanInput {
        /// The plan's table.
        table: String,
        /// What differs.
        detail: String,
    },
    /// Another gc or erasure holds the repository's lease.
    #[error("{what} is running, and did not finish within {waited_s} s; run the command again when it is done (if it crashed, its lease is ignored after an hour)")]
    Busy {
        /// Who holds the lease, and its file.
        what: String,
        /// How long this run waited.
        waited_s: u64,
    },
    /// A failure inside tablepin (a bug), never the input's fault.
    #[error("internal error: {0}; please report it")]
    Internal(String),
    /// A command-line argument is wrong.
    #[error("{0}")]
    InvalidArgument(String),
    /// A row hash cannot be computed.
    #[error(transparent)]
    RowHash(#[from] RowHashError),
    /// A manifest does not decode.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Arrow failed while processing rows.
    #[error("{context}: {source}")]
    Arrow {
        /// What was being done.
        context: String,
        /// Arrow's error.
        #[source]
        source: arrow::error::ArrowError,
    },
    /// A predicate or query failed.
    #[error("{0}")]
    Query(String),
}

impl Error {
    /// The broad kind, for exit codes.
    pub fn kind(&self) -> ErrorKind {
        use Error as E;
        match self {
            E::Input { .. }
            | E::UnknownColumn { .. }
            | E::NullKey { .. }
            | E::DuplicateKey { .. }
            | E::LossyValue { .. }
            | E::KeyExists { .. }
            | E::Staged { .. }
            | E::KeyChange { .. }
            | E::NoKey { .. }
            | E::AlreadyCompact { .. }
            | E::SchemaChange { .. }
            | E::RewriteNeedsOverwrite { .. }
            | E::NoReason
            | E::KeepNone
            | E::ShortGrace { .. }
            | E::TagAndBranch { .. }
            | E::InvalidName { .. }
            | E::InvalidArgument(_)
            | E::Unmergeable { .. }
            | E::ResolutionShort { .. }
            | E::AmbiguousRev { .. }
            | E::PlanPredicate { .. }
            | E::PlanInput { .. }
            | E::Query(_) => ErrorKind::InvalidInput,
            // A hashing thread that stopped is this program's failure, not
            // the input's.
            E::RowHash(RowHashError::ThreadFailed) => ErrorKind::Internal,
            E::RowHash(_) => ErrorKind::InvalidInput,
            E::NoRepository { .. }
            | E::UnknownRev { .. }
            | E::UnknownRef { .. }
            | E::UnknownBranch { .. }
            | E::DeletedBranch { .. }
            | E::Expired { .. }
            | E::NoVersionAt { .. }
            | E::UnknownTable { .. }
            | E::StagedGone { .. }
            | E::NoTableAtHeads { .. } => ErrorKind::NotFound,
            E::RepositoryExists { .. }
            | E::RefExists { .. }
            | E::NameTaken { .. }
            | E::Conflict { .. }
            | E::RefMoved { .. }
            | E::PlanOutdated { .. }
            | E::Busy { .. }
            | E::ProtectedBranch { .. } => ErrorKind::Conflict,
            E::Damaged { .. }
            | E::BadBlob { .. }
            | E::ContentMismatch { .. }
            | E::KeptBlobsDamaged { .. }
            | E::DamagedDocument(_)
            | E::Format(_) => ErrorKind::Damaged,
            // A stored document that does not decode is damage, like a blob
            // that does not match its name.
            E::Store(
                StoreError::Corrupt { .. }
                | StoreError::CorruptRange { .. }
                | StoreError::OutboardDamaged { .. }
                | StoreError::Decode { .. },
            ) => ErrorKind::Damaged,
            E::Store(StoreError::RefConflict { .. }) => ErrorKind::Conflict,
            E::Store(StoreError::NoBucket { .. }) => ErrorKind::NotFound,
            E::Output { .. } | E::Store(_) | E::Arrow { .. } => ErrorKind::Io,
            E::Internal(_) => ErrorKind::Internal,
        }
    }

    /// The error of reading a version gc expired, from its tombstone.
    pub(crate) fn expired(t: &tablepin_format::Tombstone) -> Error {
        let tables = t
            .tables
            .iter()
            .map(|(name, (rows, hash))| {
                format!("'{name}' {rows} rows, content hash {}", hash.short(16))
            })
            .collect::<Vec<_>>()
            .join(", ");
        Error::Expired {
            version: t.id.short(12),
            expired: chrono::DateTime::from_timestamp_millis(t.expired_ms)
                .map_or_else(|| t.expired_ms.to_string(), |d| d.to_rfc3339()),
            reason: t.reason.clone(),
            tables: if tables.is_empty() {
                "no tables".into()
            } else {
                tables
            },
        }
    }

    /// A version record that cannot be read.
    pub(crate) fn version_record(version: VersionId, source: StoreError) -> Error {
        Error::Damaged {
            what: "the version record".into(),
            version,
            table: String::new(),
            source: Box::new(source),
        }
    }

    /// A blob or document was missing (rather than damaged): after a ref
    /// moved, that can be a lost race with an erasure or a gc.
    pub(crate) fn is_missing(&self) -> bool {
        match self {
            Error::Store(StoreError::NotFound { .. }) => true,
            Error::Damaged { source, .. } => matches!(**source, StoreError::NotFound { .. }),
            _ => false,
        }
    }

    pub(crate) fn arrow(
        context: impl Into<String>,
    ) -> impl FnOnce(arrow::error::ArrowError) -> Error {
        let context = context.into();
        move |source| Error::Arrow { context, source }
    }
}
