//! The `tablepin` command: parses arguments, calls the library, prints.
//!
//! Each subcommand is a few lines over `tablepin::Repo`. Errors print as one
//! sentence on stderr and exit with a documented code:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | storage or system failure |
//! | 2 | bad arguments or bad input (file, column, key, schema, predicate) |
//! | 3 | not found (repository, ref, revision, table) |
//! | 4 | conflict (exists already, or a ref moved; run again) |
//! | 5 | damaged data (a blob does not match its hash; `verify` found problems) |
//! | 6 | internal error (a bug in tablepin; please report it) |

// A binary: every item is crate-internal, so `pub` marks a module's API.
#![allow(unreachable_pub)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

// First, so that its `outln!` is in scope in the modules below.
#[macro_use]
mod output;
mod admin;
mod cli;
mod commands;
mod compare;
mod graph;
#[cfg(feature = "lab")]
mod lab;
mod merge;
mod ui;

use std::process::ExitCode;

use clap::Parser;
use tablepin::{Fix, Words};

// Arrow and Parquet allocate many large short-lived buffers from several
// threads; glibc's per-thread arenas hold on to freed memory, which cost the
// lab a quarter of its peak memory (BENCHMARKS.md). jemalloc returns it.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// What `--version` says: the release, the commit it was built from (by
/// `build.rs`; "unknown" outside a git checkout) and the newest repository
/// format it writes (docs/compatibility.md).
pub fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "{} (commit {}, repository format {})",
            env!("CARGO_PKG_VERSION"),
            env!("TABLEPIN_COMMIT"),
            tablepin::format::REPO_FORMAT
        )
    });
    &VERSION
}

fn main() -> ExitCode {
    let json_errors = std::env::args().any(|a| a == "--json");
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => return usage_error(e, json_errors),
    };
    let json_errors = args.json;
    let verbose = args.verbose;
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return report(&format!("cannot start: {e}"), 1, json_errors);
        }
    };
    match rt.block_on(commands::run(args)) {
        Ok(code) => code,
        Err(err) => {
            if err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                // The reader closed the pipe (`| head`): nothing left to say.
                return ExitCode::SUCCESS;
            }
            report(&message(&err, verbose), exit_code(&err), json_errors)
        }
    }
}

/// The error and its causes as one sentence: a cause is added only when
/// the text so far does not already say it (most of the library's errors
/// quote their source in their own message). A store's failure is said in
/// its own sentence; the store's whole answer (request, retries, the
/// server's body) follows only under `--verbose`.
pub fn message(err: &anyhow::Error, verbose: bool) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = match cause.downcast_ref::<tablepin::Error>() {
            Some(e) => e.say(&Flags),
            None => cause.to_string(),
        };
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
        if !verbose && says_the_store_failure(cause) {
            break;
        }
    }
    out
}

/// True for a store's failure said in one sentence (`StoreError::Io`):
/// the causes below it are the cloud client's whole answer.
fn says_the_store_failure(cause: &(dyn std::error::Error + 'static)) -> bool {
    use tablepin::store::StoreError;
    let store = match cause.downcast_ref::<tablepin::Error>() {
        Some(tablepin::Error::Store(e)) => Some(e),
        _ => cause.downcast_ref::<StoreError>(),
    };
    matches!(store, Some(StoreError::Io { .. }))
}

/// How the command line names the engine's ways out of an error: its
/// flags and commands ([`tablepin::Words`]); the sentences are the
/// engine's.
struct Flags;

impl Words for Flags {
    fn name(&self, fix: &Fix) -> String {
        match fix {
            Fix::Mode(m) => format!("--mode {}", m.name()),
            Fix::Key(k) if k.is_empty() => "--key".into(),
            Fix::Key(k) => format!("--key {}", k.join(",")),
            Fix::AllowSchemaChange => "--allow-schema-change".into(),
            Fix::Cast { .. } => "--cast".into(),
            Fix::Force => "--force".into(),
            Fix::Reason => "--reason \"…\"".into(),
            Fix::Grace { ms } => format!(
                "--grace {}",
                humantime::format_duration(std::time::Duration::from_millis(
                    u64::try_from(*ms).unwrap_or(0)
                ))
            ),
            Fix::SoleWriter => "--sole-writer".into(),
            Fix::KeepLast(n) => format!("--keep-last {n}"),
            Fix::CreateBranch => "--create-branch".into(),
            Fix::Location => "--repo".into(),
            Fix::Again => "run the command again".into(),
            Fix::RetryFor => "wait longer with --retry-for".into(),
            Fix::Init { at: None } => "`tablepin init`".into(),
            Fix::Init { at: Some(at) } => format!("`tablepin --repo {at} init`"),
            Fix::Branch { name, at_a_rev } => {
                format!(
                    "`tablepin branch {name}{}`",
                    if *at_a_rev { " REV" } else { "" }
                )
            }
            Fix::RestoreBranch { name } => format!("`tablepin branch --restore {name}`"),
            Fix::DeleteTag { name } => format!("`tablepin tag --delete {name}`"),
            Fix::KeepSide { table } => format!("--ours={table} or --theirs={table}"),
            Fix::Verify => "`tablepin verify`".into(),
            Fix::Log => "`tablepin log`".into(),
            Fix::Tags => "`tablepin tag --list`".into(),
            other => format!("{other:?}"),
        }
    }

    fn take(&self, fix: &Fix) -> String {
        match fix {
            Fix::Cast { column, to } => {
                format!("--cast to read the input's '{column}' as {to} when no value changes")
            }
            _ => fix.clause(self.name(fix)),
        }
    }
}

/// Prints an error on stderr (one line, or one JSON object under `--json`)
/// and gives its exit code.
fn report(message: &str, code: u8, json: bool) -> ExitCode {
    if json {
        let v = serde_json::json!({
            "error": message,
            "exit_code": code,
            "kind": code_name(code),
        });
        eprintln!("{v}");
    } else {
        eprintln!("tablepin: {message}");
    }
    ExitCode::from(code)
}

/// The name of an exit code, as `--json` errors give it.
pub fn code_name(code: u8) -> &'static str {
    match code {
        0 => "ok",
        2 => "bad_input",
        3 => "not_found",
        4 => "conflict",
        5 => "damaged",
        6 => "internal",
        _ => "storage",
    }
}

/// A command line the parser refused: help and version print as clap
/// prints them; every other mistake is one sentence (clap's first line)
/// and exit code 2, with no usage dump and no guessed command.
fn usage_error(e: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(if e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand {
                2
            } else {
                0
            });
        }
        _ => {}
    }
    let text = e.render().to_string();
    let mut lines = text.lines();
    let mut first = lines
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .trim_end_matches('.')
        .to_string();
    // "the following required arguments were not provided:" lists them on
    // the next, indented lines: keep them in the sentence.
    if first.ends_with(':') {
        let listed: Vec<&str> = lines
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        first = format!("{first} {}", listed.join(", "));
    }
    let msg = match e.kind() {
        K::InvalidSubcommand => {
            let name = first.split('\'').nth(1).unwrap_or("").to_string();
            format!("'{name}' is not a tablepin command; see `tablepin --help` for the commands")
        }
        _ => format!("{first}; see `tablepin --help`, or `tablepin COMMAND --help`"),
    };
    report(&msg, 2, json)
}
/// The exit code of an error (see the table in the module docs).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    use tablepin::ErrorKind as K;
    match err
        .downcast_ref::<tablepin::Error>()
        .map(tablepin::Error::kind)
    {
        Some(K::InvalidInput) => 2,
        Some(K::NotFound) => 3,
        Some(K::Conflict) => 4,
        Some(K::Damaged) => 5,
        Some(K::Internal) => 6,
        Some(_) => 1,
        None => match err.downcast_ref::<commands::UsageError>() {
            Some(_) => 2,
            None => 1,
        },
    }
}
