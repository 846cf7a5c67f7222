//! Progress of long work, told to whoever shows it (the command line
//! draws bars with it); the engine's layers tell it, none draws.

/// Reports progress of long work; the command line draws bars with it.
pub trait Progress: Send + Sync {
    /// Work of `total` units named `what` starts.
    fn begin(&self, _what: &str, _total: u64) {}
    /// `n` more units are done.
    fn advance(&self, _n: u64) {}
    /// The work is done.
    fn end(&self) {}
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;
impl Progress for NoProgress {}
