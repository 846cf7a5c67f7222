//! Verified ranged reads: a blob's name is the BLAKE3 hash of its bytes,
//! and BLAKE3 is a tree hash, so a range of a blob can be checked against
//! that same name with the tree's inner hashes (its *outboard*, the Bao
//! format as `bao-tree` keeps it, chunk groups of 16 KiB: 64 bytes per
//! group, about 0.4% of the blob). A reader then fetches the ranges it
//! needs, each rounded out to whole chunk groups and nearby ones joined into
//! one request, and a flipped byte in any of them, or in the outboard, is
//! found and named as surely as in a blob read whole.
//!
//! [`Store::put_blob`] stores a blob of [`OUTBOARD_FROM`] bytes or more
//! with its outboard, written first, beside it at `outboards/ab/cdef…` (the
//! blob's name); [`Store::delete_blob`] deletes both. An outboard holds
//! the blob's size (8 bytes, little-endian), the hash pairs in pre-order,
//! and the BLAKE3 hash of those two (32 bytes), so that damage in it is
//! named as the outboard's and never taken for the blob's. It needs no
//! name of its own: its hashes lead to the blob's name or it is damaged. A blob without an outboard (a
//! small one, or one an older tablepin wrote) is read whole and sliced.
//!
//! The decisions (which groups to fetch, whether the pieces verify) are
//! pure functions here; [`Store::get_ranges`] does the I/O.

use std::collections::HashSet;
use std::ops::Range;

use bao_tree::io::outboard::PreOrderMemOutboard;
use bao_tree::io::sync::encode_ranges_validated;
use bao_tree::io::EncodeError;
use bao_tree::{BaoTree, BlockSize, ChunkNum, ChunkRanges};

use super::*;

/// Chunk groups of 2^4 BLAKE3 chunks: 16 KiB of data per hash pair.
const GROUP: BlockSize = BlockSize::from_chunk_log(4);

/// Bytes per chunk group.
pub const GROUP_BYTES: u64 = 16 * 1024;

/// Ranges of a blob in a bucket fewer than this many bytes apart are
/// fetched as one: a request to a bucket costs about what this many bytes
/// cost to download. A local folder joins only touching ranges
/// ([`Store::join_below`]): a read there costs its bytes, not a request
/// (as `object_store`'s own local store does not join ranges either), and
/// joining the pages of one row's columns, a column chunk apart, read
/// several times the bytes of the pages.
pub const JOIN_BELOW: u64 = 256 * 1024;

/// Blobs of this size and more are stored with an outboard; a smaller one
/// costs about one request whether read whole or in part.
pub const OUTBOARD_FROM: usize = 1 << 20;

/// A blob's name and its outboard (see the module's docs), from one
/// hashing of its bytes.
pub fn outboard(bytes: &[u8]) -> (ObjectId, Bytes) {
    let ob = PreOrderMemOutboard::create(bytes, GROUP);
    let mut out = Vec::with_capacity(8 + ob.data.len() + 32);
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&ob.data);
    let tag = ObjectId::of(&out);
    out.extend_from_slice(tag.as_bytes());
    (ObjectId::from_bytes(*ob.root.as_bytes()), Bytes::from(out))
}

/// The byte ranges to fetch of a blob of `size` bytes for the ranges
/// `wanted`: each rounded out to whole chunk groups and cut at the blob's
/// end, sorted, and those less than `join_below` bytes apart joined
/// ([`Store::join_below`]). No I/O.
pub fn fetch_plan(size: u64, wanted: &[Range<u64>], join_below: u64) -> Vec<Range<u64>> {
    let mut groups: Vec<Range<u64>> = wanted
        .iter()
        .filter(|r| r.start < r.end.min(size))
        .map(|r| {
            let start = r.start / GROUP_BYTES * GROUP_BYTES;
            let end = r.end.min(size).div_ceil(GROUP_BYTES) * GROUP_BYTES;
            start..end.min(size)
        })
        .collect();
    groups.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(groups.len());
    for g in groups {
        match out.last_mut() {
            Some(last) if g.start <= last.end.saturating_add(join_below) => {
                last.end = last.end.max(g.end)
            }
            _ => out.push(g),
        }
    }
    out
}

/// Where a ranged read found damage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The outboard's hashes do not lead to the blob's name (or it is not
    /// an outboard at all).
    Outboard,
    /// These bytes of the blob do not hash into its name.
    Bytes(Range<u64>),
}

/// The fetched pieces of a blob, each at its offset.
struct Pieces<'a>(&'a [(u64, Bytes)]);

impl positioned_io::ReadAt for Pieces<'_> {
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let piece = (self.0.iter()).find(|(at, b)| *at <= pos && pos < at + b.len() as u64);
        let Some((at, bytes)) = piece else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("byte {pos} was not fetched"),
            ));
        };
        let from = (pos - at) as usize;
        let n = buf.len().min(bytes.len() - from);
        buf[..n].copy_from_slice(&bytes[from..from + n]);
        Ok(n)
    }
}

/// The size of the blob an outboard describes and its hash pairs, or
/// `None` when the bytes are not a whole outboard (its own hash, at its
/// end, does not match: a flipped size would otherwise pass for damage in
/// the blob's last chunk group).
fn parts(outboard: &[u8]) -> Option<(u64, &[u8])> {
    let (body, tag) = outboard.split_at_checked(outboard.len().checked_sub(32)?)?;
    if ObjectId::of(body).as_bytes()[..] != tag[..] {
        return None;
    }
    let size = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let pairs = &body[8..];
    (BaoTree::new(size, GROUP).outboard_size() == pairs.len() as u64).then_some((size, pairs))
}

/// The size of the blob an outboard describes, or `None` when the bytes
/// are not a whole outboard.
pub fn outboard_size(outboard: &[u8]) -> Option<u64> {
    parts(outboard).map(|(size, _)| size)
}

/// Checks fetched `pieces` of blob `id` (each at its offset, covering whole
/// chunk groups as [`fetch_plan`] gives them) against its name through its
/// `outboard`. No I/O.
pub fn check_pieces(
    id: &ObjectId,
    outboard: &[u8],
    pieces: &[(u64, Bytes)],
) -> std::result::Result<(), Damage> {
    let (size, pairs) = parts(outboard).ok_or(Damage::Outboard)?;
    let ob = PreOrderMemOutboard {
        root: bao_tree::blake3::Hash::from_bytes(*id.as_bytes()),
        tree: BaoTree::new(size, GROUP),
        data: pairs,
    };
    let mut ranges = ChunkRanges::empty();
    for (at, b) in pieces {
        let end = at + b.len() as u64;
        ranges |= ChunkRanges::from(ChunkNum::chunks(*at)..ChunkNum::chunks(end));
    }
    match encode_ranges_validated(Pieces(pieces), ob, &ranges, std::io::sink()) {
        Ok(()) => Ok(()),
        Err(EncodeError::LeafHashMismatch(chunk)) => {
            let start = chunk.to_bytes();
            Err(Damage::Bytes(start..(start + GROUP_BYTES).min(size)))
        }
        Err(EncodeError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            // A piece shorter than the outboard says the blob is: the
            // stored blob is not the size its outboard records.
            Err(Damage::Outboard)
        }
        Err(_) => Err(Damage::Outboard),
    }
}

/// A blob opened for ranged reads ([`Store::open_ranged`]).
#[derive(Debug, Clone)]
pub struct RangedBlob {
    id: ObjectId,
    size: u64,
    held: Held,
}

#[derive(Debug, Clone)]
enum Held {
    /// Its outboard: ranges are fetched and checked through it.
    Outboard(Bytes),
    /// The whole blob, checked: ranges are cut from it.
    Whole(Bytes),
}

/// A stored blob that `verify` read and found whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Its size in bytes.
    pub size: u64,
    /// It has an outboard (checked against it).
    pub outboard: bool,
}

impl RangedBlob {
    fn whole(id: ObjectId, bytes: Bytes) -> Self {
        Self {
            id,
            size: bytes.len() as u64,
            held: Held::Whole(bytes),
        }
    }

    /// The blob's name.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// The blob's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The whole blob, when it was read whole (it has no outboard).
    pub fn whole_bytes(&self) -> Option<&Bytes> {
        match &self.held {
            Held::Whole(b) => Some(b),
            Held::Outboard(_) => None,
        }
    }
}

/// The bytes of `wanted` cut out of verified `pieces`.
fn cut(pieces: &[(u64, Bytes)], wanted: &[Range<u64>]) -> Vec<Bytes> {
    wanted
        .iter()
        .map(|r| {
            let piece = pieces
                .iter()
                .find(|(at, b)| *at <= r.start && r.end <= at + b.len() as u64);
            match piece {
                Some((at, b)) => b.slice((r.start - at) as usize..(r.end - at) as usize),
                None => Bytes::new(),
            }
        })
        .collect()
}

impl Store {
    /// Stores a blob's outboard beside it (put-if-absent: it is derived
    /// from the blob's bytes, so any copy already there is the same).
    pub(crate) async fn put_outboard(&self, id: &ObjectId, outboard: Bytes) -> Result<()> {
        let path = layout::outboard(id);
        let (put, _) = self.create_retried(&path, &outboard).await;
        match put {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(io(&path, e)),
        }
    }

    /// Byte ranges of a blob, each verified against its name (see
    /// [`Store::read_ranges`]).
    pub async fn get_ranges(&self, id: &ObjectId, wanted: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let blob = self.open_ranged(id).await?;
        self.read_ranges(&blob, wanted).await
    }

    /// Opens a blob for ranged reads: reads its outboard, or, when it has
    /// none, the whole blob (checked as [`Store::get_blob`] checks it).
    pub async fn open_ranged(&self, id: &ObjectId) -> Result<RangedBlob> {
        if let Some(bytes) = self.memo.as_ref().and_then(|m| m.get(id)) {
            return Ok(RangedBlob::whole(*id, bytes));
        }
        match self.get_path(&layout::outboard(id)).await {
            Ok(ob) => {
                let size = outboard_size(&ob).ok_or(StoreError::OutboardDamaged { id: *id })?;
                Ok(RangedBlob {
                    id: *id,
                    size,
                    held: Held::Outboard(ob),
                })
            }
            Err(StoreError::NotFound { .. }) => {
                Ok(RangedBlob::whole(*id, self.get_blob(id).await?))
            }
            Err(e) => Err(e),
        }
    }

    /// How far apart two ranges of a blob may be and still be fetched as
    /// one ([`fetch_plan`]): [`JOIN_BELOW`] for a bucket (and a store
    /// behind the `testing` layers, which stand for one), 0 for a local
    /// folder or memory, where a request costs nothing but its bytes.
    pub fn join_below(&self) -> u64 {
        if self.inline_reads {
            0
        } else {
            JOIN_BELOW
        }
    }

    /// Byte ranges of an opened blob, each verified against its name:
    /// through its outboard, only the chunk groups that hold the ranges
    /// are fetched, nearby ones in one request; a blob read whole is
    /// sliced. A range past the blob's end is cut at it.
    pub async fn read_ranges(
        &self,
        blob: &RangedBlob,
        wanted: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let wanted = clip(wanted, blob.size);
        let ob = match &blob.held {
            Held::Whole(bytes) => return Ok(cut(&[(0, bytes.clone())], &wanted)),
            Held::Outboard(ob) => ob,
        };
        let fetch = fetch_plan(blob.size, &wanted, self.join_below());
        if fetch.is_empty() {
            return Ok(wanted.iter().map(|_| Bytes::new()).collect());
        }
        let path = layout::blob(&blob.id);
        let got = if self.inline_reads {
            // A local folder reads them all from one open file in one
            // blocking task (a task and an open each cost more than a
            // page's bytes).
            retried(|_| self.os.get_ranges(&path, &fetch))
                .await
                .map_err(|e| io(&path, e))?
        } else {
            // Each range its own request, at once: a bucket's `get_ranges`
            // would join ranges up to 1 MiB apart, reading far more than the
            // pages asked for; `fetch_plan` joins them where a request
            // costs more.
            futures::future::try_join_all(fetch.iter().map(|r| {
                let path = &path;
                async move {
                    retried(|_| self.os.get_range(path, r.clone()))
                        .await
                        .map_err(|e| io(path, e))
                }
            }))
            .await?
        };
        let pieces: Vec<(u64, Bytes)> = fetch.iter().map(|r| r.start).zip(got).collect();
        match check_pieces(&blob.id, ob, &pieces) {
            Ok(()) => Ok(cut(&pieces, &wanted)),
            Err(Damage::Outboard) => Err(StoreError::OutboardDamaged { id: blob.id }),
            Err(Damage::Bytes(range)) => Err(StoreError::CorruptRange { id: blob.id, range }),
        }
    }

    /// The names of the blobs that have an outboard stored (whether or not
    /// the blob itself still is).
    pub async fn list_outboards(&self) -> Result<HashSet<ObjectId>> {
        Ok(self
            .list_outboard_metas()
            .await?
            .iter()
            .map(|m| m.id)
            .collect())
    }

    /// Every stored outboard: the name of its blob, its own size and age.
    pub async fn list_outboard_metas(&self) -> Result<Vec<BlobMeta>> {
        let metas = self.list(&Path::from("outboards")).await?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let parts: Vec<_> = m.location.parts().collect();
                let [_, a, b] = parts.as_slice() else {
                    return None;
                };
                Some(BlobMeta {
                    id: format!("{}{}", a.as_ref(), b.as_ref()).parse().ok()?,
                    size: m.size,
                    last_modified: m.last_modified,
                })
            })
            .collect())
    }

    /// Writes the outboard of a stored blob that lacks one (a blob stored
    /// by a build before outboards): reads the blob from the repository,
    /// checks it against its name, and stores the outboard its hashing
    /// gives. Returns the bytes read.
    pub async fn write_outboard(&self, id: &ObjectId) -> Result<u64> {
        let bytes = self.get_path(&layout::blob(id)).await?;
        let (actual, ob) = outboard(&bytes);
        check_blob(id, actual)?;
        if bytes.len() >= OUTBOARD_FROM {
            self.put_outboard(id, ob).await?;
        }
        Ok(bytes.len() as u64)
    }

    /// Reads each blob of `ids` from the repository (never the local
    /// cache), checks it against its name and a large blob's outboard, if
    /// it has one, against it: one hashing gives both ([`outboard`]). Each
    /// blob's answer, in `ids` order: its size and whether it has an
    /// outboard, or what is wrong with it. What `verify` checks, a batch at
    /// a time on all cores.
    pub async fn check_stored_blobs(&self, ids: &[ObjectId]) -> Vec<Result<Checked>> {
        let fetched = futures::future::join_all(ids.iter().map(|id| async move {
            let bytes = self.get_path(&layout::blob(id)).await?;
            let ob = match bytes.len() >= OUTBOARD_FROM {
                true => self.get_outboard(id).await?,
                false => None,
            };
            Ok::<_, StoreError>((bytes, ob))
        }))
        .await;
        let mut out: Vec<(usize, Result<Checked>)> = Vec::with_capacity(ids.len());
        let mut items = Vec::new();
        for (i, f) in fetched.into_iter().enumerate() {
            match f {
                Ok(got) => items.push((i, got)),
                Err(e) => out.push((i, Err(e))),
            }
        }
        let check = |(i, (bytes, ob)): &(usize, (Bytes, Option<Bytes>))| {
            let id = &ids[*i];
            let answer = match ob {
                None => check_blob(id, ObjectId::of(bytes)),
                Some(ob) => {
                    let (actual, want) = outboard(bytes);
                    check_blob(id, actual).and_then(|()| match want == ob {
                        true => Ok(()),
                        false => Err(StoreError::OutboardDamaged { id: *id }),
                    })
                }
            };
            Ok::<_, std::convert::Infallible>(answer.map(|()| Checked {
                size: bytes.len() as u64,
                outboard: ob.is_some(),
            }))
        };
        let threads = tablepin_format::threads();
        let checked: Vec<Result<Checked>> = match tablepin_format::try_map(threads, &items, check) {
            Some(Ok(r)) => r,
            _ => items.iter().filter_map(|item| check(item).ok()).collect(),
        };
        // Kept, like every checked read, for this command's later reads.
        if let Some(memo) = &self.memo {
            for ((i, (bytes, _)), answer) in items.iter().zip(&checked) {
                if answer.is_ok() {
                    memo.put(&ids[*i], bytes);
                }
            }
        }
        out.extend(items.iter().map(|(i, _)| *i).zip(checked));
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, answer)| answer).collect()
    }

    /// The outboard stored beside a blob, as stored (`verify` checks it
    /// against the blob), or `None` when it has none.
    pub async fn get_outboard(&self, id: &ObjectId) -> Result<Option<Bytes>> {
        match self.get_path(&layout::outboard(id)).await {
            Ok(ob) => Ok(Some(ob)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// `wanted` cut at `size` (an empty range where one starts past it).
fn clip(wanted: &[Range<u64>], size: u64) -> Vec<Range<u64>> {
    wanted
        .iter()
        .map(|r| r.start.min(size)..r.end.min(size).max(r.start.min(size)))
        .collect()
}

#[cfg(test)]
// A range alone in a slice is what these tests mean.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    /// Bytes that differ from group to group, so that a group read in the
    /// wrong place would not pass for the right one.
    fn sample(n: usize) -> Bytes {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect::<Vec<u8>>()
            .into()
    }

    #[test]
    fn ranges_are_rounded_out_to_groups_joined_when_near_and_cut_at_the_end() {
        let g = GROUP_BYTES;
        let size = 100 * g + 100;
        // Two ranges in one group, one a little further: one fetch.
        assert_eq!(
            fetch_plan(size, &[10..20, 30..40, 2 * g + 5..2 * g + 6], JOIN_BELOW),
            vec![0..3 * g]
        );
        // Far apart: two fetches, in order, whatever the order asked.
        let far = 60 * g;
        assert_eq!(
            fetch_plan(size, &[far..far + 1, 0..1], JOIN_BELOW),
            vec![0..g, far..far + g]
        );
        // The last group is short; a range past the end is cut or dropped.
        assert_eq!(
            fetch_plan(size, &[size - 1..size + 50], JOIN_BELOW),
            vec![100 * g..size]
        );
        assert!(fetch_plan(size, &[size + 1..size + 9, 5..5], JOIN_BELOW).is_empty());
        // Joined only when touching, as a local folder reads them.
        assert_eq!(
            fetch_plan(size, &[10..20, g + 1..g + 2, 3 * g..3 * g + 1], 0),
            vec![0..2 * g, 3 * g..4 * g]
        );
    }

    #[tokio::test]
    async fn ranges_read_back_verified_and_fetch_only_their_groups() {
        let store = Store::open("memory://").unwrap();
        let bytes = sample(3_000_000);
        let id = store.put_blob(bytes.clone()).await.unwrap().id;
        assert_eq!(id, ObjectId::of(&bytes));
        let ob = store.get_outboard(&id).await.unwrap().unwrap();
        // About 0.4% of the blob.
        assert!(ob.len() < bytes.len() / 200, "{} bytes", ob.len());
        let wanted = [
            5..9,
            1_500_000..1_500_100,
            2_999_990..3_000_000,
            3_000_000..3_000_001,
        ];
        let before = store.requests();
        let got = store.get_ranges(&id, &wanted).await.unwrap();
        let gets = store.requests().get - before.get;
        for (r, g) in wanted.iter().zip(&got) {
            let end = r.end.min(3_000_000) as usize;
            assert_eq!(g, &bytes.slice(r.start as usize..end), "{r:?}");
        }
        // The outboard and three pieces, not the blob.
        assert_eq!(gets, 4);
        // A small blob has no outboard: it is read whole and checked.
        let small = store.put_blob(sample(1000)).await.unwrap().id;
        assert!(store.get_outboard(&small).await.unwrap().is_none());
        let got = store.get_ranges(&small, &[10..20]).await.unwrap();
        assert_eq!(got[0], sample(1000).slice(10..20));
        // Deleting a blob deletes its outboard.
        store.delete_blob(&id).await.unwrap();
        assert!(store.get_outboard(&id).await.unwrap().is_none());
    }

    /// Every byte of a blob and of its outboard, flipped, is found by a
    /// ranged read that covers it and named: none passes silently.
    #[test]
    fn every_flipped_byte_in_a_range_or_the_outboard_is_found_and_named() {
        let bytes = sample(5 * GROUP_BYTES as usize + 777);
        let (id, ob) = outboard(&bytes);
        assert_eq!(id, ObjectId::of(&bytes));
        let size = bytes.len() as u64;
        let whole = fetch_plan(size, &[0..size], JOIN_BELOW);
        let pieces = |b: &Bytes| -> Vec<(u64, Bytes)> {
            (whole.iter())
                .map(|r| (r.start, b.slice(r.start as usize..r.end as usize)))
                .collect()
        };
        assert_eq!(check_pieces(&id, &ob, &pieces(&bytes)), Ok(()));
        for at in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
            let mut bad = bytes.to_vec();
            bad[at] ^= 0x10;
            let got = check_pieces(&id, &ob, &pieces(&Bytes::from(bad.clone())));
            let group = at as u64 / GROUP_BYTES * GROUP_BYTES;
            assert_eq!(
                got,
                Err(Damage::Bytes(group..(group + GROUP_BYTES).min(size))),
                "byte {at}"
            );
            // A read of only that byte's group finds it too.
            let one = fetch_plan(size, &[at as u64..at as u64 + 1], 0);
            let piece: Vec<(u64, Bytes)> = (one.iter())
                .map(|r| {
                    (
                        r.start,
                        Bytes::from(bad[r.start as usize..r.end as usize].to_vec()),
                    )
                })
                .collect();
            assert!(check_pieces(&id, &ob, &piece).is_err(), "byte {at} alone");
        }
        for at in 0..ob.len() {
            let mut bad = ob.to_vec();
            bad[at] ^= 0x01;
            assert_eq!(
                check_pieces(&id, &bad, &pieces(&bytes)),
                Err(Damage::Outboard),
                "outboard byte {at}"
            );
        }
        // Not an outboard at all.
        assert_eq!(
            check_pieces(&id, &ob[..ob.len() - 1], &pieces(&bytes)),
            Err(Damage::Outboard)
        );
    }

    #[tokio::test]
    async fn a_damaged_stored_range_or_outboard_is_named_with_its_blob() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let bytes = sample(80 * GROUP_BYTES as usize);
        let id = store.put_blob(bytes.clone()).await.unwrap().id;
        let at = 20 * GROUP_BYTES + 3;
        let path = dir.path().join("objects").join(id.fanout_path());
        let mut bad = bytes.to_vec();
        bad[at as usize] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        // A range away from the damage reads; one over it is refused.
        assert!(store.get_ranges(&id, &[0..100]).await.is_ok());
        let err = store.get_ranges(&id, &[at..at + 1]).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::CorruptRange { id: i, range } if *i == id && range.contains(&at)),
            "{err}"
        );
        assert!(err.to_string().contains(&id.to_string()));
        std::fs::write(&path, &bytes).unwrap();
        let ob_path = dir.path().join("outboards").join(id.fanout_path());
        let ob_good = std::fs::read(&ob_path).unwrap();
        let mut ob = ob_good.clone();
        ob[100] ^= 1;
        std::fs::write(&ob_path, &ob).unwrap();
        let err = store
            .get_ranges(&id, &[0..bytes.len() as u64])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::OutboardDamaged { id: i } if *i == id),
            "{err}"
        );
        assert!(err.to_string().contains(&id.to_string()));
        // What verify checks finds it too, and a damaged blob beside it.
        let other = store.put_blob(sample(2000)).await.unwrap().id;
        let answers = store.check_stored_blobs(&[other, id]).await;
        let small = Checked {
            size: 2000,
            outboard: false,
        };
        assert_eq!(answers[0].as_ref().unwrap(), &small);
        assert!(matches!(&answers[1], Err(StoreError::OutboardDamaged { id: i }) if *i == id));
        std::fs::write(&ob_path, ob_good).unwrap();
        std::fs::write(&path, &bad).unwrap();
        let answers = store.check_stored_blobs(&[id, other]).await;
        assert!(matches!(&answers[0], Err(StoreError::Corrupt { id: i, .. }) if *i == id));
        assert!(answers[1].is_ok());
        // A damaged blob gets no outboard written from it.
        std::fs::remove_file(&ob_path).unwrap();
        let err = store.write_outboard(&id).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt { id: i, .. } if *i == id),
            "{err}"
        );
        assert!(!store.list_outboards().await.unwrap().contains(&id));
    }

    /// A large blob stored without its outboard (by a build before them)
    /// gets it from `write_outboard`: the very bytes a new write stores,
    /// listed by `list_outboards`, and checked by `verify`'s reads.
    #[tokio::test]
    async fn an_outboard_written_later_is_the_one_a_new_write_stores() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let bytes = sample(3 * OUTBOARD_FROM / 2);
        let id = store.put_blob(bytes.clone()).await.unwrap().id;
        let small = store.put_blob(sample(100)).await.unwrap().id;
        assert_eq!(store.list_outboards().await.unwrap(), HashSet::from([id]));
        let ob_path = dir.path().join("outboards").join(id.fanout_path());
        let stored = std::fs::read(&ob_path).unwrap();
        std::fs::remove_file(&ob_path).unwrap();
        let answers = store.check_stored_blobs(&[id]).await;
        assert!(!answers[0].as_ref().unwrap().outboard);
        assert!(store.list_outboards().await.unwrap().is_empty());
        assert_eq!(store.write_outboard(&id).await.unwrap(), bytes.len() as u64);
        assert_eq!(std::fs::read(&ob_path).unwrap(), stored);
        // A small blob needs none and gets none.
        assert_eq!(store.write_outboard(&small).await.unwrap(), 100);
        assert_eq!(store.list_outboards().await.unwrap(), HashSet::from([id]));
        let answers = store.check_stored_blobs(&[id]).await;
        assert!(answers[0].as_ref().unwrap().outboard);
    }
}
