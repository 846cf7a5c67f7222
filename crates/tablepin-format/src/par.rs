//! Independent work spread over threads: the one work-taking loop that the
//! store (hashing blobs), the engine (decoding files, encoding columns) and
//! the lab (encoding layouts) share.
//!
//! Work items differ in size by 20x and more (a base file beside a weekly
//! one), so each thread takes the next item not taken yet instead of a fixed
//! share, which left one thread idle while the other worked.
//!
//! The threads are rayon's, kept for the life of the process, one pool per
//! thread count. Threads started anew for each call (as this loop did with
//! scoped threads) cost a weekly commit ~1 ms per parallel step on this
//! machine's VM: the second thread began its first item about 1 ms after
//! the first, and each new thread's allocator cache was built and torn down
//! again (BENCHMARKS.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

/// Each item's result, `None` for an item not started after an error.
type Done<R, E> = Vec<Option<Result<R, E>>>;

/// The pools built so far, by process id and thread count.
type Pools = Vec<((u32, usize), Arc<rayon::ThreadPool>)>;

/// The process's pool of `threads` threads, built on first use; `None`
/// when the threads cannot be started. A forked process (a PyTorch
/// DataLoader worker) inherits its parent's pools but not their threads,
/// so pools are the process's own, by process id; the parent's are
/// forgotten without being dropped (a drop would wait for their threads).
fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Mutex::default).lock().ok()?;
    let pid = std::process::id();
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == (pid, threads)) {
        return Some(p.clone());
    }
    if pools.iter().any(|((owner, _), _)| *owner != pid) {
        for (_, inherited) in pools.drain(..) {
            std::mem::forget(inherited);
        }
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tablepin-{i}"))
            .build()
            .ok()?,
    );
    pools.push(((pid, threads), p.clone()));
    Some(p)
}

/// Applies `f` to every item on up to `threads` threads (one thread runs
/// inline) and returns the results in item order. After an error no thread
/// starts a new item, and the first error in item order among the items
/// done is returned, as a sequential loop would. `None` when a worker
/// thread panicked or the threads could not be started.
pub fn try_map<T, R, E, F>(threads: usize, items: &[T], f: F) -> Option<Result<Vec<R>, E>>
where
    T: Sync,
    R: Send,
    E: Send,
    F: Fn(&T) -> Result<R, E> + Sync,
{
    if threads.min(items.len()) <= 1 {
        return Some(items.iter().map(f).collect());
    }
    let pool = pool(threads)?;
    let failed = AtomicBool::new(false);
    let run = || -> Done<R, E> {
        items
            .par_iter()
            // One item a task: a thread that is done takes the next one.
            .with_max_len(1)
            .map(|item| {
                if failed.load(Ordering::Relaxed) {
                    return None;
                }
                let r = f(item);
                if r.is_err() {
                    // The other threads stop at their next item.
                    failed.store(true, Ordering::Relaxed);
                }
                Some(r)
            })
            .collect()
    };
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.install(run))).ok()?;
    let mut out = Vec::with_capacity(items.len());
    let mut first_err = None;
    for r in done {
        match r {
            Some(Ok(v)) if first_err.is_none() => out.push(v),
            Some(Err(e)) if first_err.is_none() => first_err = Some(e),
            _ => {}
        }
    }
    match first_err {
        Some(e) => Some(Err(e)),
        None if out.len() == items.len() => Some(Ok(out)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_reports_the_first_error() {
        let items: Vec<u32> = (0..100).collect();
        for threads in [1, 2, 8] {
            let out = try_map(threads, &items, |x| Ok::<_, String>(x * 2)).unwrap();
            assert_eq!(
                out.unwrap(),
                items.iter().map(|x| x * 2).collect::<Vec<_>>()
            );
            let err = try_map(threads, &items, |x| {
                if *x >= 40 {
                    Err(format!("item {x}"))
                } else {
                    Ok(*x)
                }
            })
            .unwrap()
            .unwrap_err();
            assert!(err.starts_with("item "), "{err}");
            let none = try_map(threads, &[] as &[u32], |x| Ok::<_, String>(*x));
            assert!(none.unwrap().unwrap().is_empty());
        }
        // A single thread stops at the first error, as a loop does.
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let r = try_map(1, &items, |x| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if *x == 3 {
                Err("three")
            } else {
                Ok(*x)
            }
        });
        assert_eq!(r, Some(Err("three")));
        assert_eq!(seen.into_inner(), 4);
    }

    #[test]
    fn a_panicking_worker_is_none() {
        let items: Vec<u32> = (0..10).collect();
        let r = try_map(2, &items, |x| {
            if *x == 5 {
                panic!("boom");
            }
            Ok::<_, String>(*x)
        });
        assert!(r.is_none());
    }
}
