//! Blobs one command has read from the store and checked, kept in memory
//! for the rest of that command: a blob is named by the hash of its bytes
//! and never changes, so a second read of it (gc and erase read at apply
//! what they read to plan, `verify` walks the versions it hashed) needs no
//! request. Bounded: blobs up to [`Memo::EACH`] bytes, [`Memo::new`]'s
//! total, the oldest dropped first.
//!
//! A blob never changes, but a gc or an erasure may delete it, and a
//! remembered copy does not say it is still stored. Those two delete only
//! under the gc/erasure lease, so each forgets the memo as it takes the
//! lease ([`crate::Store::forget_memo`]) and, where "stored" decides what
//! it does, asks a listing of the store rather than a read.
//!
//! Off unless asked for ([`crate::Store::with_memo`]): the command line
//! turns it on for each command, which lives seconds; a long-lived process
//! (a Python session) keeps it off, so that a blob another process erased
//! is not served from its memory later.
//! Refs and documents are never kept: they change, and reading them again
//! is how apply checks its plan still fits. `--stats` counts a GET of a
//! blob read before as repeated.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use tablepin_format::ObjectId;

/// The memo's size for one command of the command line.
pub const COMMAND_BYTES: u64 = 256 << 20;

/// The memo of one store.
#[derive(Debug)]
pub struct Memo {
    limit: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each blob with the number of its insertion.
    blobs: HashMap<ObjectId, (u64, Bytes)>,
    /// Insertions, oldest first, for dropping the oldest. An insertion
    /// whose blob was forgotten (or forgotten and kept again, under a
    /// newer number) is skipped.
    order: VecDeque<(u64, ObjectId)>,
    inserted: u64,
    bytes: u64,
}

impl Memo {
    /// The largest blob kept.
    pub const EACH: u64 = 8 << 20;

    /// A memo holding up to `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere cannot leave the map half-changed in a way that
        // matters: entries are whole, and a missing one is read again.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The blob's bytes, when this command read and checked them.
    pub fn get(&self, id: &ObjectId) -> Option<Bytes> {
        self.lock().blobs.get(id).map(|(_, b)| b.clone())
    }

    /// Keeps bytes read from the store and checked against `id`.
    pub fn put(&self, id: &ObjectId, bytes: &Bytes) {
        let size = bytes.len() as u64;
        if size > Self::EACH || size > self.limit {
            return;
        }
        let mut inner = self.lock();
        if inner.blobs.contains_key(id) {
            return;
        }
        inner.inserted += 1;
        let n = inner.inserted;
        inner.blobs.insert(*id, (n, bytes.clone()));
        inner.order.push_back((n, *id));
        inner.bytes += size;
        while inner.bytes > self.limit {
            let Some((n, old)) = inner.order.pop_front() else {
                break;
            };
            if inner.blobs.get(&old).is_some_and(|(m, _)| *m == n) {
                if let Some((_, b)) = inner.blobs.remove(&old) {
                    inner.bytes -= b.len() as u64;
                }
            }
        }
    }

    /// Forgets a blob (it was deleted).
    pub fn forget(&self, id: &ObjectId) {
        let mut inner = self.lock();
        if let Some((_, b)) = inner.blobs.remove(id) {
            inner.bytes -= b.len() as u64;
        }
    }

    /// Forgets every blob.
    pub fn clear(&self) {
        *self.lock() = Inner::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_its_limit_dropping_the_oldest() {
        let m = Memo::new(10);
        let blob = |s: &'static [u8]| (ObjectId::of(s), Bytes::from_static(s));
        let (a, ab) = blob(b"aaaa");
        let (b, bb) = blob(b"bbbb");
        let (c, cb) = blob(b"cccc");
        m.put(&a, &ab);
        m.put(&b, &bb);
        assert_eq!(m.get(&a), Some(ab.clone()));
        m.put(&c, &cb);
        assert_eq!(m.get(&a), None, "the oldest goes when 12 bytes exceed 10");
        assert_eq!(m.get(&b), Some(bb.clone()));
        m.forget(&b);
        assert_eq!(m.get(&b), None);
        let (big, bigb) = blob(b"more than ten bytes");
        m.put(&big, &bigb);
        assert_eq!(m.get(&big), None, "a blob above the limit is not kept");
        assert_eq!(m.get(&c), Some(cb.clone()));
        // A blob forgotten and kept again is as new: the older insertion
        // of it does not make it the next to go.
        let m = Memo::new(10);
        m.put(&a, &ab);
        m.put(&b, &bb);
        m.forget(&a);
        m.put(&a, &ab);
        m.put(&c, &cb);
        assert_eq!(m.get(&b), None, "b is now the oldest");
        assert_eq!(m.get(&a), Some(ab));
    }
}
