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

// A binary: every item is crate-internal, so `pub` marks a module's API.
#![allow(unreachable_pub)]

mod admin;
mod cli;
mod commands;
mod output;

use std::process::ExitCode;

use clap::Parser;

// Arrow and Parquet allocate many large short-lived buffers from several
// threads; glibc's per-thread arenas hold on to freed memory, which cost the
// lab a quarter of its peak memory (BENCHMARKS.md). jemalloc returns it.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tablepin: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(commands::run(args)) {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            eprintln!("tablepin: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

/// The exit code of an error (see the table in the module docs).
fn exit_code(err: &anyhow::Error) -> u8 {
    use tablepin::ErrorKind as K;
    match err
        .downcast_ref::<tablepin::Error>()
        .map(tablepin::Error::kind)
    {
        Some(K::InvalidInput) => 2,
        Some(K::NotFound) => 3,
        Some(K::Conflict) => 4,
        Some(K::Damaged) => 5,
        Some(_) => 1,
        None => match err.downcast_ref::<commands::UsageError>() {
            Some(_) => 2,
            None => 1,
        },
    }
}
