//! Independent per-file work spread over the machine's cores.
//!
//! A commit or a read touches several data files whose decoding does not
//! depend on each other; [`map`] runs one closure per file on scoped threads
//! (as many as `tablepin_format::threads()` allows, at most one per item) and returns the
//! results in item order. The first error wins, as in a sequential loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Applies `f` to every item, in parallel, keeping the items' order.
pub(crate) fn map<T, R, F>(items: &[T], f: F) -> Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> Result<R> + Sync,
{
    let threads = tablepin_format::threads().min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Result<R>)>> = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                let failed = r.is_err();
                if let Ok(mut d) = done.lock() {
                    d.push((i, r));
                }
                if failed {
                    // Let the other threads stop at their next item.
                    next.store(items.len(), Ordering::Relaxed);
                    break;
                }
            });
        }
    });
    let mut done = done
        .into_inner()
        .map_err(|_| Error::InvalidArgument("a worker thread failed".into()))?;
    done.sort_by_key(|(i, _)| *i);
    if let Some(pos) = done.iter().position(|(_, r)| r.is_err()) {
        return Err(done
            .swap_remove(pos)
            .1
            .err()
            .unwrap_or_else(|| Error::InvalidArgument("a worker thread failed".into())));
    }
    if done.len() != items.len() {
        return Err(Error::InvalidArgument("a worker thread failed".into()));
    }
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_reports_the_first_error() {
        let items: Vec<u32> = (0..100).collect();
        let out = map(&items, |x| Ok(x * 2)).unwrap();
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        let err = map(&items, |x| {
            if *x >= 40 {
                Err(Error::InvalidArgument(format!("item {x}")))
            } else {
                Ok(*x)
            }
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("item "), "{err}");
        assert!(map(&[] as &[u32], |x| Ok(*x)).unwrap().is_empty());
    }
}
