//! Independent work spread over threads: the one work-taking loop that the
//! store (hashing blobs), the engine (decoding files, encoding columns) and
//! the lab (encoding layouts) share.
//!
//! Work items differ in size by 20x and more (a base file beside a weekly
//! one), so each thread takes the next item not taken yet instead of a fixed
//! share, which left one thread idle while the other worked.

/// The results a thread produced, each with its item's index.
type Done<R, E> = Vec<(usize, Result<R, E>)>;

/// Applies `f` to every item on up to `threads` scoped threads (at most one
/// per item; one thread runs inline) and returns the results in item order.
/// After an error no thread starts a new item, and the first error in item
/// order among the items done is returned, as a sequential loop would.
/// `None` when a worker thread panicked.
pub fn try_map<T, R, E, F>(threads: usize, items: &[T], f: F) -> Option<Result<Vec<R>, E>>
where
    T: Sync,
    R: Send,
    E: Send,
    F: Fn(&T) -> Result<R, E> + Sync,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = threads.min(items.len());
    if threads <= 1 {
        return Some(items.iter().map(f).collect());
    }
    let next = AtomicUsize::new(0);
    let joined: Vec<Option<Done<R, E>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break done };
                        let r = f(item);
                        let failed = r.is_err();
                        done.push((i, r));
                        if failed {
                            // The other threads stop at their next item.
                            next.store(items.len(), Ordering::Relaxed);
                            break done;
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok()).collect()
    });
    let mut done: Done<R, E> = Vec::with_capacity(items.len());
    for d in joined {
        done.extend(d?);
    }
    done.sort_unstable_by_key(|(i, _)| *i);
    if let Some(pos) = done.iter().position(|(_, r)| r.is_err()) {
        return done.swap_remove(pos).1.err().map(Err);
    }
    if done.len() != items.len() {
        return None;
    }
    Some(done.into_iter().map(|(_, r)| r).collect())
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
