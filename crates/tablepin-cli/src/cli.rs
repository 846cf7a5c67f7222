//! The command line's grammar (clap). Only parsing lives here; validation
//! and work live in `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// tablepin keeps every version of your training tables, for the rows that
/// changed, and reads any of them back exactly.
///
/// A repository is a `.tablepin` folder (found in the current folder or a
/// parent, as git does), or the path given by --repo or TABLEPIN_REPO.
/// Revisions (REV) are a tag, a branch, a version id or a unique prefix of
/// one, HEAD (main's head), REV~N (N versions back), or @TIME / BRANCH@TIME
/// (a date such as 2010-11-30, the start of that day in UTC, or RFC 3339:
/// the version the branch named at that time).
///
/// Exit codes: 0 ok, 1 storage failure, 2 bad input, 3 not found,
/// 4 conflict (or busy: run again), 5 damaged data, 6 internal error.
#[derive(Debug, Parser)]
#[command(name = "tablepin", version = crate::version(), max_term_width = 100)]
pub struct Cli {
    /// The repository: a folder, or a URL: file://, s3://BUCKET/PREFIX,
    /// gs://BUCKET/PREFIX or az://CONTAINER/PREFIX (default: .tablepin here
    /// or in a parent folder). Credentials, regions and endpoints come from
    /// the cloud's usual environment (AWS_*, GOOGLE_*, AZURE_*; for an
    /// S3-compatible server, AWS_ENDPOINT_URL and AWS_ALLOW_HTTP=true).
    #[arg(long, global = true, env = "TABLEPIN_REPO", value_name = "PATH-OR-URL")]
    pub repo: Option<String>,

    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// After the command, print on stderr the requests it made of the
    /// repository's store (GET, HEAD, PUT, LIST, DELETE, bytes). Set
    /// TABLEPIN_TRACE_REQUESTS=1 to see each request as it is made.
    #[arg(long, global = true)]
    pub stats: bool,

    /// On an error, print every cause in full: for a bucket, the store's
    /// whole answer (the request, its retries, the server's body and
    /// request ids) after the one-sentence summary.
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a repository (.tablepin in the current folder, or --repo).
    Init(InitArgs),
    /// Commit a table file as a new version.
    Commit(CommitArgs),
    /// List the versions of a branch, newest first.
    Log(LogArgs),
    /// Show a version: its tables, rows, content hashes, files and bytes.
    Show(ShowArgs),
    /// Create, list or delete tags (names for versions that must stay readable).
    Tag(TagArgs),
    /// Create, list or delete branches.
    Branch(BranchArgs),
    /// Write a table of a version to a Parquet, CSV or Arrow file.
    Export(ExportArgs),
    /// Print the first rows of a table of a version.
    Cat(CatArgs),
    /// Show what differs between two revisions: keys added, removed and
    /// modified (with each changed column's old and new value), or, for an
    /// unkeyed table, the rows only one side has.
    ///
    /// Only what the two versions do not share is read: data files both see
    /// alike are skipped, so a diff costs what changed, not the table.
    /// Output rows have a `diff_type` column (added, removed, modified), then
    /// `from_C` and `to_C` for each column C.
    Diff(DiffArgs),
    /// Run a read-only SQL query (DataFusion) over any table at any version.
    ///
    /// A table is named `sales` (main's head) or "sales@REV" (at a tag,
    /// branch, version id, main~3 or main@2010-12-01; quoted, as `@` needs),
    /// so two versions join like two tables:
    ///
    ///   tablepin sql 'SELECT count(*) FROM "sales@train-v1" o JOIN sales n
    ///   ON o.id = n.id WHERE o.qty <> n.qty'
    ///
    /// Only the columns the query reads are decoded, and its row filters are
    /// applied while reading; every byte read is verified.
    Sql(SqlArgs),
    /// Make a new version on a branch whose tables are those of a revision
    /// (no data is copied: the version names the revision's files).
    ///
    /// The versions in between stay in the log, as `git revert` keeps them;
    /// restoring a tag a model trained on gives a head with that tag's
    /// content hash.
    Restore(RestoreArgs),
    /// Bring a branch's (or any revision's) changes into a branch: a
    /// three-way merge by key from their nearest common ancestor.
    ///
    /// A row only one side changed takes that change; the same change on
    /// both sides is taken once; a key the two sides changed differently
    /// (or one deleted and the other changed) is a conflict. Conflicts
    /// leave the branch untouched and are listed with the base, ours and
    /// theirs values: settle them with --ours or --theirs (for every table,
    /// or --theirs=TABLE for one), or write them out with -o, fix them, and
    /// merge again with --resolved FILE. Unkeyed tables merge as multisets
    /// of rows. When the branch is behind SOURCE, it moves to SOURCE (a
    /// fast-forward) and nothing is written. The merge version has two
    /// parents, the branch's head first; a merge reads only the rows that
    /// changed on either side since the base.
    Merge(MergeArgs),
    /// Make a new version that undoes a version's changes on a branch's
    /// head (later changes stay), conflicts handled as merge handles them.
    Revert(RevertArgs),
    /// Check every blob, ref and version, and recompute every content hash.
    Verify(VerifyArgs),
    /// Bring the repository to this tablepin's format (4).
    ///
    /// Formats 3 and 4 keep a small outboard (the BLAKE3 tree's inner
    /// hashes) beside every blob of 1 MiB or more, so that a commit's
    /// look-up and other reads fetch and verify only the parts of a large
    /// file they need; format 4 writes them for 2 KiB chunk groups (about
    /// 3% of the blob), format 3 wrote 16 KiB groups (0.4%), which it
    /// keeps. A repository of format 1, 2 or 3 is read and written as it
    /// is; `upgrade` reads each large blob without an outboard once, checks
    /// it against its name, writes its outboard, then sets the format.
    /// Stopped half way, it leaves the old format with some outboards
    /// more, and running it again finishes. Builds of an older format
    /// refuse the repository afterwards: upgrade them first.
    Upgrade(UpgradeArgs),
    /// Write a table's live rows again as full files in key order, without
    /// deletion vectors; rows and content hash stay the same.
    ///
    /// Compaction is a commit like any other: the version before it keeps
    /// its files until retention (`gc`) expires it, so compacting costs the
    /// bytes of the files written, and later key look-ups and reads open
    /// fewer files. A table already compact gets no new version.
    Compact(CompactArgs),
    /// Delete old versions by a retention policy (tags are kept by default).
    Gc(GcArgs),
    /// Erase rows from the live table and from every kept version.
    #[command(
        override_usage = "tablepin erase <TABLE> --where <PREDICATE> --reason <REASON> [--dry-run | --plan <FILE>]"
    )]
    Erase(EraseArgs),
    /// Show the audit record of every erasure.
    Audit,
    /// Serve a local web page to look at the repository: its branches and
    /// tags over time, each version's tables, a row-level diff between any
    /// two revisions (paged), a retention rule's preview and the erasure
    /// audit.
    ///
    /// The page is read-only and served on 127.0.0.1 only, at a free port
    /// (or --port); the address is printed and nothing is opened. Its
    /// assets are in the binary: it makes no request elsewhere. Stop it
    /// with Ctrl-C.
    Ui(UiArgs),
    /// Run the Online Retail II experiment and write its report.
    #[cfg(feature = "lab")]
    Lab(LabArgs),
    /// Run the benchmarks on a generated 1,000,000-row table.
    #[cfg(feature = "lab")]
    Bench(BenchArgs),
    /// Write a generated sales table to a file (for trying tablepin out).
    Generate(GenerateArgs),
    /// Print a shell's completion script for tablepin.
    ///
    /// bash: `source <(tablepin completions bash)`, or save it to
    /// ~/.local/share/bash-completion/completions/tablepin; zsh: save it as
    /// _tablepin in a folder of your $fpath; fish: save it to
    /// ~/.config/fish/completions/tablepin.fish; PowerShell: add
    /// `tablepin completions powershell | Out-String | Invoke-Expression` to
    /// your profile.
    Completions(CompletionsArgs),
    /// Print the manual page of tablepin or of one of its commands (roff),
    /// or write them all to a folder.
    ///
    /// `tablepin man commit | man -l -` reads one; `tablepin man --out
    /// ~/.local/share/man/man1` installs them all for `man tablepin-commit`.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Write data files with the settings closest to pyarrow's defaults
    /// (snappy, no page index) instead of tablepin's (zstd, page index).
    #[arg(long)]
    pub pyarrow_like: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// FILE is the whole table now; only the difference is stored.
    Overwrite,
    /// Add FILE's rows.
    Append,
    /// Replace rows with FILE's rows by key; add new keys.
    Upsert,
    /// Remove the rows whose keys FILE lists.
    Delete,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    /// The table's name.
    pub table: String,
    /// Parquet, CSV (.csv, .tsv, gzipped or not) or Arrow IPC (.arrow,
    /// .feather) file; `-` reads standard input: CSV (gzipped or not),
    /// Parquet or Arrow IPC, told by its first bytes.
    pub file: String,
    /// How FILE relates to the table.
    #[arg(long, value_enum, default_value = "overwrite")]
    pub mode: ModeArg,
    /// Key columns, comma-separated (declared on the table's first commit).
    #[arg(long, value_delimiter = ',')]
    pub key: Option<Vec<String>>,
    /// The commit message.
    #[arg(short, long, default_value = "")]
    pub message: String,
    /// The branch to commit to. It must exist (a typo is refused, naming
    /// the branches there are), unless --create-branch.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Create --branch if it does not exist, starting at main's head (as
    /// `tablepin branch NAME` would), then commit to it.
    #[arg(long)]
    pub create_branch: bool,
    /// Accept a schema change other than an added nullable column or a
    /// widened type (needs --mode overwrite: the table is rewritten).
    #[arg(long)]
    pub allow_schema_change: bool,
    /// Read input columns as the table's types where they differ, when no
    /// value changes (e.g. 30.0 as 30); a value that would change is named
    /// and nothing is committed.
    #[arg(long)]
    pub cast: bool,
    /// The field separator of a CSV file (default: tab for .tsv, comma
    /// otherwise). One character, or `\t`.
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<String>,
    /// How long to keep retrying while other writers commit to the branch
    /// first (each retry plans again against the new head).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub retry_for: humantime::Duration,
    /// Commit a FILE of more rows than this a window of rows at a time,
    /// so that memory holds a window and not the table (0: always whole).
    /// Streaming needs a keyed table's rows in key order; other inputs are
    /// committed whole. Not with --dry-run or --plan, which hold the input.
    #[arg(long, default_value_t = tablepin::DEFAULT_WINDOW_ROWS, value_name = "ROWS")]
    pub window_rows: usize,
    /// Make a version even when FILE changes nothing (by default such a
    /// commit writes nothing and says so, exit 0, as git does).
    #[arg(long)]
    pub allow_empty: bool,
    /// Plan the commit and write nothing: print the rows it adds, changes
    /// and deletes, the blobs it writes and the checks that see it. With
    /// --json the output is the plan, which --plan applies.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the plan saved from `commit --dry-run --json` (that output, or
    /// its "plan") to the same FILE: the branch, mode, key and schema rules
    /// come from the plan. It commits only if planning again gives exactly
    /// that plan; when the branch moved since, or FILE is another input,
    /// nothing is committed.
    #[arg(long, value_name = "PLAN", conflicts_with_all = [
        "dry_run", "mode", "key", "branch", "create_branch", "allow_schema_change", "cast",
    ])]
    pub plan: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The table's name.
    pub table: String,
    /// The commit message.
    #[arg(short, long, default_value = "compact")]
    pub message: String,
    /// The branch whose head is compacted.
    #[arg(long, default_value = "main")]
    pub branch: String,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The branch (default: main).
    #[arg(value_name = "BRANCH", conflicts_with = "branch_flag")]
    pub branch: Option<String>,
    /// The branch, as a flag (the same as the argument).
    #[arg(long = "branch", id = "branch_flag", value_name = "BRANCH")]
    pub branch_flag: Option<String>,
    /// Show at most N versions.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    pub max_count: Option<usize>,
    /// Show only the versions that changed this table.
    #[arg(long, value_name = "TABLE")]
    pub table: Option<String>,
    /// Follow every parent of a merge, not only the first, and draw the
    /// branches' lanes beside the versions.
    #[arg(long)]
    pub graph: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The revision.
    #[arg(default_value = "main")]
    pub rev: String,
}

#[derive(Debug, Args)]
pub struct TagArgs {
    /// The tag to create (with --delete: to delete).
    pub name: Option<String>,
    /// The revision to tag.
    #[arg(default_value = "main")]
    pub rev: String,
    /// Why this version matters (e.g. the model trained on it).
    #[arg(short, long, default_value = "")]
    pub message: String,
    /// List tags.
    #[arg(long, conflicts_with = "delete")]
    pub list: bool,
    /// Delete the tag NAME (it stays restorable: --deleted, --restore).
    #[arg(long)]
    pub delete: bool,
    /// List deleted tags and the version each named last.
    #[arg(long, conflicts_with_all = ["delete", "list", "restore"])]
    pub deleted: bool,
    /// Restore the deleted tag NAME to the version it named last.
    #[arg(long, conflicts_with_all = ["delete", "list"])]
    pub restore: bool,
}

#[derive(Debug, Args)]
pub struct BranchArgs {
    /// The branch to create (with --delete: to delete).
    pub name: Option<String>,
    /// Where the new branch starts.
    #[arg(default_value = "main")]
    pub rev: String,
    /// List branches.
    #[arg(long, conflicts_with = "delete")]
    pub list: bool,
    /// Delete the branch NAME (it stays restorable: --deleted, --restore;
    /// gc keeps what it named for its grace period).
    #[arg(long)]
    pub delete: bool,
    /// With --delete: also delete main or the only branch.
    #[arg(long, requires = "delete")]
    pub force: bool,
    /// List deleted branches and the version each named last.
    #[arg(long, conflicts_with_all = ["delete", "list", "restore"])]
    pub deleted: bool,
    /// Restore the deleted branch NAME to the version it named last.
    #[arg(long, conflicts_with_all = ["delete", "list"])]
    pub restore: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The revision.
    pub rev: String,
    /// The table.
    pub table: String,
    /// The file to write: .parquet, .csv, .csv.gz, .tsv, .tsv.gz, .arrow
    /// or .feather; `-` for standard output (CSV unless --format says);
    /// with --format delta, a new folder.
    #[arg(short, long)]
    pub output: String,
    /// `delta`: write a Delta Lake table (a view whose data files are the
    /// repository's own, hard-linked when the repository is a local folder
    /// on the same file system, else copied; deletion vectors inline), for
    /// delta-rs, polars, Spark and other Delta readers. With `-o -`: csv,
    /// tsv, csv.gz, tsv.gz, parquet or arrow.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// With --format delta: one Delta version per version along REV's first
    /// parents, oldest first, so that Delta's VERSION AS OF reaches them.
    #[arg(long)]
    pub history: bool,
    /// With --format delta: no deletion vectors, for readers without them
    /// (deltalake's to_pyarrow_table and to_pandas, older Spark): each file
    /// a deletion vector touches is written again without its hidden rows,
    /// the rest linked as always.
    #[arg(long)]
    pub no_deletion_vectors: bool,
}

#[derive(Debug, Args)]
pub struct CatArgs {
    /// The revision.
    pub rev: String,
    /// The table.
    pub table: String,
    /// Rows to print.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The older revision.
    pub old: String,
    /// The newer revision.
    pub new: String,
    /// Only this table (default: every table either revision has).
    pub table: Option<String>,
    /// Print counts only (per table and per column).
    #[arg(long)]
    pub stat: bool,
    /// Rows to print per table (0: all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,
    /// Write every differing row to this file (.parquet, .csv, .arrow or
    /// .feather); one table at a time.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The query (one SELECT statement).
    pub query: String,
    /// Write the result to this file (.parquet, .csv, .arrow or .feather)
    /// instead of printing it.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The revision whose tables the branch gets back.
    pub rev: String,
    /// Only this table; the branch's other tables stay as they are.
    #[arg(long)]
    pub table: Option<String>,
    /// The commit message (default: "restore REV").
    #[arg(short, long)]
    pub message: Option<String>,
    /// The branch that gets the new version.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// How long to keep retrying while other writers commit to the branch.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub retry_for: humantime::Duration,
}

#[derive(Debug, Args)]
pub struct SettleArgs {
    /// Settle conflicts for the branch's side: every table's, or
    /// --ours=TABLE for one (repeatable).
    #[arg(long, num_args = 0..=1, require_equals = true, value_name = "TABLE", action = clap::ArgAction::Append)]
    pub ours: Option<Vec<String>>,
    /// Settle conflicts for the merged side: every table's, or
    /// --theirs=TABLE for one (repeatable).
    #[arg(long, num_args = 0..=1, require_equals = true, value_name = "TABLE", action = clap::ArgAction::Append)]
    pub theirs: Option<Vec<String>>,
    /// Write the conflicts to this file (.parquet, .csv, .arrow): one row
    /// per key, with `conflict`, `columns`, then base_C, ours_C and
    /// theirs_C for each column C. With several tables in conflict, name
    /// one with --table.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
    /// The table -o writes the conflicts of.
    #[arg(long)]
    pub table: Option<String>,
    /// The rows the conflicting keys should have (the table's columns, one
    /// row per conflicting key), as [TABLE=]FILE (repeatable; TABLE= may be
    /// left out when one table conflicts).
    #[arg(long, value_name = "[TABLE=]FILE")]
    pub resolved: Vec<String>,
    /// The commit message.
    #[arg(short, long)]
    pub message: Option<String>,
    /// How long to keep retrying while other writers commit to the branch.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub retry_for: humantime::Duration,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The branch (or any revision) whose changes come in.
    pub source: String,
    /// The branch that gets them.
    #[arg(long, default_value = "main", value_name = "BRANCH")]
    pub into: String,
    #[command(flatten)]
    pub settle: SettleArgs,
}

#[derive(Debug, Args)]
pub struct RevertArgs {
    /// The version whose changes are undone.
    pub rev: String,
    /// The branch that gets the new version.
    #[arg(long, default_value = "main")]
    pub branch: String,
    #[command(flatten)]
    pub settle: SettleArgs,
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The port on 127.0.0.1 (default: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Also prove that no stored blob holds a row that an erasure removed.
    #[arg(long)]
    pub erased: bool,
}

#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// Show what would be read and written, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// How young an unreferenced blob `gc` leaves alone unless told.
pub const DEFAULT_GRACE: &str = "1h";

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep the last N versions of each branch.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Keep versions younger than this (e.g. 30d, 12h).
    #[arg(long, value_name = "DURATION")]
    pub keep_within: Option<humantime::Duration>,
    /// Keep every tagged version (the default).
    #[arg(long)]
    pub keep_tags: bool,
    /// Do not protect tagged versions: a tag whose version expires is deleted.
    #[arg(long)]
    pub no_keep_tags: bool,
    /// Unreferenced blobs younger than this are left alone (a commit may be
    /// writing them). At least 10m, unless --sole-writer.
    #[arg(long, default_value = DEFAULT_GRACE, value_name = "DURATION")]
    pub grace: humantime::Duration,
    /// No other process writes to the repository while this gc runs, so a
    /// grace shorter than 10m (down to 0s) cannot delete the files of a
    /// commit still landing.
    #[arg(long)]
    pub sole_writer: bool,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct EraseArgs {
    /// The table.
    pub table: String,
    /// An SQL boolean expression over the table's columns, e.g.
    /// "Customer_ID = 17388" or "email IN ('a@x', 'b@y')".
    #[arg(long = "where", value_name = "PREDICATE")]
    pub predicate: String,
    /// Why (kept in the audit record). Required, except with --plan.
    #[arg(long)]
    pub reason: Option<String>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the plan saved from `erase --dry-run --json` (that output, or
    /// its "plan"), with the same --where, which the plan does not hold. It
    /// is applied only if planning again gives exactly that plan; when the
    /// repository moved since, nothing changes.
    #[arg(long, value_name = "FILE", conflicts_with = "dry_run")]
    pub plan: Option<PathBuf>,
}

#[cfg(feature = "lab")]
#[derive(Debug, Args)]
pub struct LabArgs {
    /// The Online Retail II data (.csv.gz, .csv or .xlsx); default:
    /// TABLEPIN_LAB_DATA, else a cached download.
    #[arg(long)]
    pub data: Option<String>,
    /// Where to write results.json, report.md and the charts.
    #[arg(long, default_value = "lab-out")]
    pub out: String,
    /// The customer to erase.
    #[arg(long, default_value_t = 17388)]
    pub customer: i64,
    /// The data is a sample in Online Retail II's format (some of its
    /// lines, or lines of its form), not the whole file: its row and
    /// cancellation counts are not checked, and the figures are the
    /// sample's, not the experiment's.
    #[arg(long)]
    pub sample: bool,
    /// Also version the month layout with the real `dvc` command (on
    /// PATH): each version's month files `dvc add`ed and `dvc push`ed to a
    /// local remote, whose files must be the layout's, to the byte.
    /// Slow: two dvc commands a version.
    #[arg(long)]
    pub dvc: bool,
}

#[cfg(feature = "lab")]
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Rows in the generated table.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: usize,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Also time gc and erase on the lab's 110 versions (needs the data).
    #[arg(long)]
    pub data: Option<String>,
    /// Instead, time the weekly commit and the head read on this bucket
    /// (s3://BUCKET/PREFIX, ...), with and without --latency per request,
    /// beside a local folder, and count their requests.
    #[arg(long, value_name = "URL")]
    pub remote: Option<String>,
    /// The latency added per request in the --remote measurement.
    #[arg(long, default_value = "20ms", value_name = "DURATION")]
    pub latency: humantime::Duration,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Rows to generate.
    #[arg(long, default_value_t = 1000)]
    pub rows: usize,
    /// First id.
    #[arg(long, default_value_t = 0)]
    pub start: i64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Raise `returned` on this many random existing rows (a weekly change).
    #[arg(long, default_value_t = 0)]
    pub returns: usize,
    /// The file to write: .parquet, .csv or .arrow.
    #[arg(short, long)]
    pub output: String,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (default: tablepin's own).
    #[arg(value_name = "COMMAND", conflicts_with = "out")]
    pub command: Option<String>,
    /// Write every page (tablepin.1, tablepin-COMMAND.1, ...) to this folder.
    #[arg(long, short, value_name = "DIR")]
    pub out: Option<PathBuf>,
}
