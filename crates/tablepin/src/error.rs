//! The engine's one error type. Every variant names what failed (file,
//! column, row, ref, blob, version) and, where there is one, the fix; the
//! command line prints it as one sentence and maps [`Error::kind`] to an exit
//! code.

use tablepin_format::{FormatError, ObjectId, VersionId};
use tablepin_rowhash::RowHashError;
use tablepin_store::StoreError;

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
    /// No repository where one was looked for.
    #[error("no tablepin repository in {start} or any parent folder; run `tablepin init` there, or pass --repo")]
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
    #[error("key column '{column}' of table '{table}' is null in row {row} of the input; key columns cannot be null")]
    NullKey {
        /// The table.
        table: String,
        /// The key column.
        column: String,
        /// The 0-based input row.
        row: usize,
    },
    /// Two input rows have the same key.
    #[error("rows {first} and {second} of the input have the same key {key} in table '{table}'; keys must be unique")]
    DuplicateKey {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
        /// The first row.
        first: usize,
        /// The second row.
        second: usize,
    },
    /// An appended key exists already.
    #[error("key {key} exists already in table '{table}'; use --mode upsert to replace rows")]
    KeyExists {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
    },
    /// The key columns given differ from the ones the table remembers.
    #[error("table '{table}' is keyed by [{old}], not [{new}]; omit --key or pass --key {old}")]
    KeyChange {
        /// The table.
        table: String,
        /// The remembered key.
        old: String,
        /// The key given.
        new: String,
    },
    /// A mode that needs a key on a table without one.
    #[error("--mode {mode} needs a keyed table, and '{table}' has no key; declare one with --key on its first commit")]
    NoKey {
        /// The table.
        table: String,
        /// The mode.
        mode: String,
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
    #[error("the live rows of table '{table}' do not hash to the content hash its snapshot records, so nothing was written; run `tablepin verify` to find the damaged blob")]
    ContentMismatch {
        /// The table.
        table: String,
    },
    /// The input's schema differs from the table's.
    #[error(
        "schema of table '{table}' would change: {detail}; pass --allow-schema-change to accept it"
    )]
    SchemaChange {
        /// The table.
        table: String,
        /// Which column changed and how.
        detail: String,
    },
    /// A revision that names nothing.
    #[error("unknown revision '{rev}': no tag, branch or version id matches; see `tablepin log` and `tablepin tag --list`")]
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
    /// A ref that does not exist.
    #[error("{kind} '{name}' does not exist")]
    UnknownRef {
        /// "tag" or "branch".
        kind: &'static str,
        /// The name.
        name: String,
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
    #[error("branch '{branch}' kept moving while committing; run the command again")]
    Conflict {
        /// The branch.
        branch: String,
    },
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
            | E::KeyExists { .. }
            | E::KeyChange { .. }
            | E::NoKey { .. }
            | E::AlreadyCompact { .. }
            | E::SchemaChange { .. }
            | E::InvalidName { .. }
            | E::InvalidArgument(_)
            | E::AmbiguousRev { .. }
            | E::RowHash(_)
            | E::Query(_) => ErrorKind::InvalidInput,
            E::NoRepository { .. }
            | E::UnknownRev { .. }
            | E::UnknownRef { .. }
            | E::UnknownTable { .. } => ErrorKind::NotFound,
            E::RepositoryExists { .. } | E::RefExists { .. } | E::Conflict { .. } => {
                ErrorKind::Conflict
            }
            E::Damaged { .. } | E::BadBlob { .. } | E::ContentMismatch { .. } | E::Format(_) => {
                ErrorKind::Damaged
            }
            E::Store(StoreError::Corrupt { .. }) => ErrorKind::Damaged,
            E::Store(StoreError::RefConflict { .. }) => ErrorKind::Conflict,
            E::Output { .. } | E::Store(_) | E::Arrow { .. } => ErrorKind::Io,
        }
    }

    pub(crate) fn arrow(
        context: impl Into<String>,
    ) -> impl FnOnce(arrow::error::ArrowError) -> Error {
        let context = context.into();
        move |source| Error::Arrow { context, source }
    }
}
