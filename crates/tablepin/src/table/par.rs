//! Independent per-file work spread over the machine's cores.
//!
//! A commit or a read touches several data files whose decoding does not
//! depend on each other; [`map`] runs one closure per file on as many
//! threads as `tablepin_format::threads()` allows, through the shared
//! work-taking loop [`tablepin_format::try_map`], and returns the results
//! in item order. The first error wins, as in a sequential loop.

use crate::error::{Error, Result};

/// Applies `f` to every item, in parallel, keeping the items' order.
pub(crate) fn map<T, R, F>(items: &[T], f: F) -> Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> Result<R> + Sync,
{
    tablepin_format::try_map(tablepin_format::threads(), items, f)
        .unwrap_or_else(|| Err(Error::InvalidArgument("a worker thread failed".into())))
}
