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
        .unwrap_or_else(|| Err(Error::Internal("a worker thread failed".into())))
}

#[cfg(test)]
mod tests {
    use crate::error::{Error, ErrorKind};
    use tablepin_rowhash::RowHashError;

    /// A worker that stops without an answer is the program's failure
    /// (exit code of an internal error), never bad input.
    #[test]
    fn a_failed_worker_thread_is_an_internal_error() {
        let err = super::map(&[1, 2, 3], |i| {
            if *i == 2 {
                panic!("worker stops");
            }
            Ok(*i)
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
        let hashing = Error::from(RowHashError::ThreadFailed);
        assert_eq!(hashing.kind(), ErrorKind::Internal, "{hashing}");
    }
}
