//! Verified ranged reads: a blob's name is the BLAKE3 hash of its bytes,
//! and BLAKE3 is a tree hash, so a range of a blob can be checked against
//! that same name with the tree's inner hashes (its *outboard*, the Bao
//! format as `bao-tree` keeps it: 64 bytes per chunk group). A reader then
//! fetches the ranges it needs, each rounded out to whole chunk groups and
//! nearby ones joined into one request, and a flipped byte in any of them,
//! or in the outboard, is found and named as surely as in a blob read whole.
//!
//! [`Store::put_blob`] stores a blob of [`OUTBOARD_FROM`] bytes or more
//! with its outboard, written first, beside it at `outboards/ab/cdef…` (the
//! blob's name); [`Store::delete_blob`] deletes both. An outboard holds
//! the blob's size (8 bytes, little-endian; its high byte names the chunk
//! group, see [`GROUP_LOG`]), the hash pairs in pre-order, and the BLAKE3
//! hash of those two (32 bytes), so that damage in it is named as the
//! outboard's and never taken for the blob's. It needs no name of its own:
//! its hashes lead to the blob's name or it is damaged. A blob without an
//! outboard (a small one, or one an older tablepin wrote) is read whole and
//! sliced.
//!
//! The chunk group sets what a read of one page costs: a page of a few
//! hundred bytes costs one or two whole groups, and the outboard costs 64
//! bytes a group. Format 3 used 16 KiB groups and fetched the outboard
//! whole (0.4% of the blob) before any range; format 4 uses 2 KiB groups
//! (3.1% of a large blob, stored) and fetches only the hash pairs on the
//! paths from the root to the groups it reads, in the same round as them
//! ([`Store::open_ranged_sized`]), so that a look-up of one row in a large
//! file reads its few pages and not 16 KiB for each of them.
//!
//! The decisions (which groups and which hash pairs to fetch, whether the
//! pieces verify) are pure functions here; [`Store::get_ranges`] does the
//! I/O.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use bao_tree::io::outboard::PreOrderMemOutboard;
use bao_tree::io::sync::{encode_ranges_validated, Outboard};
use bao_tree::io::EncodeError;
use bao_tree::iter::BaoChunk;
use bao_tree::{BaoTree, BlockSize, ChunkNum, ChunkRanges, TreeNode};

use super::*;

/// The chunk group of format 3's outboards: 2^4 BLAKE3 chunks, 16 KiB. An
/// outboard whose size field has a zero high byte has these.
pub const GROUP_LOG_FORMAT3: u8 = 4;

/// The chunk group of outboards written from format 4 on: 2^1 chunks of 1
/// KiB, 2 KiB of data per hash pair (see the module's docs).
pub const GROUP_LOG: u8 = 1;

/// The largest chunk group an outboard may name (2^10 chunks, 1 MiB).
const GROUP_LOG_MAX: u8 = 10;

/// Bytes of data per hash pair in chunk groups of 2^`log` chunks.
pub const fn group_bytes(log: u8) -> u64 {
    1024 << log
}

/// Bytes per chunk group of format 3's outboards.
pub const GROUP_BYTES: u64 = group_bytes(GROUP_LOG_FORMAT3);

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

/// The size field of an outboard: the blob's size, with the chunk group's
/// log in the high byte (0 for format 3's groups, which older builds wrote).
fn size_field(size: u64, log: u8) -> u64 {
    let named = if log == GROUP_LOG_FORMAT3 { 0 } else { log };
    size | (u64::from(named) << 56)
}

/// The blob's size and the chunk group's log an outboard's size field
/// gives, or `None` when it names no group this build reads.
fn read_size_field(field: u64) -> Option<(u64, u8)> {
    let size = field & ((1 << 56) - 1);
    match (field >> 56) as u8 {
        0 => Some((size, GROUP_LOG_FORMAT3)),
        log if log <= GROUP_LOG_MAX => Some((size, log)),
        _ => None,
    }
}

/// A blob's name and its outboard (see the module's docs) in chunk groups
/// of 2^`log` chunks, from one hashing of its bytes.
pub fn outboard(bytes: &[u8], log: u8) -> (ObjectId, Bytes) {
    let ob = PreOrderMemOutboard::create(bytes, BlockSize::from_chunk_log(log));
    let mut out = Vec::with_capacity(8 + ob.data.len() + 32);
    out.extend_from_slice(&size_field(bytes.len() as u64, log).to_le_bytes());
    out.extend_from_slice(&ob.data);
    let tag = ObjectId::of(&out);
    out.extend_from_slice(tag.as_bytes());
    (ObjectId::from_bytes(*ob.root.as_bytes()), Bytes::from(out))
}

/// The byte ranges to fetch of a blob of `size` bytes for the ranges
/// `wanted`: each rounded out to whole chunk groups of `group` bytes and
/// cut at the blob's end, sorted, and those less than `join_below` bytes
/// apart joined ([`Store::join_below`]). No I/O.
pub fn fetch_plan(
    size: u64,
    wanted: &[Range<u64>],
    join_below: u64,
    group: u64,
) -> Vec<Range<u64>> {
    let rounded: Vec<Range<u64>> = wanted
        .iter()
        .filter(|r| r.start < r.end.min(size))
        .map(|r| {
            let start = r.start / group * group;
            let end = r.end.min(size).div_ceil(group) * group;
            start..end.min(size)
        })
        .collect();
    joined(rounded, join_below)
}

/// `ranges` sorted, and those less than `join_below` bytes apart joined.
fn joined(mut ranges: Vec<Range<u64>>, join_below: u64) -> Vec<Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for g in ranges {
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

/// What an outboard is made of: the size of the blob it describes, its
/// chunk group's log and its hash pairs.
struct Parts<'a> {
    size: u64,
    log: u8,
    pairs: &'a [u8],
}

/// The parts of a whole outboard, or `None` when the bytes are not one
/// (its own hash, at its end, does not match: a flipped size would
/// otherwise pass for damage in the blob's last chunk group).
fn parts(outboard: &[u8]) -> Option<Parts<'_>> {
    let (body, tag) = outboard.split_at_checked(outboard.len().checked_sub(32)?)?;
    if ObjectId::of(body).as_bytes()[..] != tag[..] {
        return None;
    }
    let field = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let (size, log) = read_size_field(field)?;
    let pairs = &body[8..];
    let tree = BaoTree::new(size, BlockSize::from_chunk_log(log));
    (tree.outboard_size() == pairs.len() as u64).then_some(Parts { size, log, pairs })
}

/// The chunk group's log of a whole outboard, or `None` when the bytes are
/// not one.
pub fn outboard_log(outboard: &[u8]) -> Option<u8> {
    parts(outboard).map(|p| p.log)
}

/// The chunks that `pieces` (each at its offset) cover, within `size`.
fn chunks_of(pieces: impl Iterator<Item = Range<u64>>, size: u64) -> ChunkRanges {
    let mut ranges = ChunkRanges::empty();
    for r in pieces {
        let end = r.end.min(size);
        if r.start < end {
            ranges |= ChunkRanges::from(ChunkNum::chunks(r.start)..ChunkNum::chunks(end));
        }
    }
    ranges
}

/// Checks `pieces` against blob `id` through the hash pairs of `outboard`
/// (a tree of `log`'s chunk groups over the blob's size).
fn check_with(
    outboard: impl Outboard,
    log: u8,
    pieces: &[(u64, Bytes)],
) -> std::result::Result<(), Damage> {
    let size = outboard.tree().size();
    let ranges = chunks_of(pieces.iter().map(|(at, b)| *at..at + b.len() as u64), size);
    match encode_ranges_validated(Pieces(pieces), outboard, &ranges, std::io::sink()) {
        Ok(()) => Ok(()),
        Err(EncodeError::LeafHashMismatch(chunk)) => {
            let start = chunk.to_bytes();
            Err(Damage::Bytes(start..(start + group_bytes(log)).min(size)))
        }
        Err(EncodeError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            // A piece shorter than the outboard says the blob is: the
            // stored blob is not the size its outboard records.
            Err(Damage::Outboard)
        }
        Err(_) => Err(Damage::Outboard),
    }
}

/// Checks fetched `pieces` of blob `id` (each at its offset, covering whole
/// chunk groups as [`fetch_plan`] gives them) against its name through its
/// whole `outboard`. No I/O.
pub fn check_pieces(
    id: &ObjectId,
    outboard: &[u8],
    pieces: &[(u64, Bytes)],
) -> std::result::Result<(), Damage> {
    let p = parts(outboard).ok_or(Damage::Outboard)?;
    check_pairs(id, &p, pieces)
}

/// Checks `pieces` of blob `id` through the hash pairs of a whole outboard
/// already found to be one ([`parts`]).
fn check_pairs(
    id: &ObjectId,
    p: &Parts<'_>,
    pieces: &[(u64, Bytes)],
) -> std::result::Result<(), Damage> {
    let ob = PreOrderMemOutboard {
        root: bao_tree::blake3::Hash::from_bytes(*id.as_bytes()),
        tree: BaoTree::new(p.size, BlockSize::from_chunk_log(p.log)),
        data: p.pairs,
    };
    check_with(ob, p.log, pieces)
}

/// The pre-order positions of the hash pairs on the paths from the root
/// of `tree` to the chunks `ranges`: those a check of them loads, in the
/// order it loads them.
fn path_pairs(tree: BaoTree, ranges: &ChunkRanges) -> impl Iterator<Item = u64> + '_ {
    (tree.ranges_pre_order_chunks_iter_ref(ranges, 0)).filter_map(move |item| match item {
        BaoChunk::Parent { node, .. } => tree.pre_order_offset(node),
        BaoChunk::Leaf { .. } => None,
    })
}

/// Where the hash pair at pre-order position `at` lies in an outboard.
fn pair_bytes(at: u64) -> Range<u64> {
    8 + at * 64..8 + at * 64 + 64
}

/// The byte ranges of a blob's outboard (of `log`'s chunk groups over
/// `size` bytes) that checking the data ranges `fetch` needs: its size
/// field, and the hash pairs on the paths from the root to their chunk
/// groups, those less than `join_below` apart joined. No I/O.
pub fn pairs_plan(size: u64, log: u8, fetch: &[Range<u64>], join_below: u64) -> Vec<Range<u64>> {
    let tree = BaoTree::new(size, BlockSize::from_chunk_log(log));
    let ranges = chunks_of(fetch.iter().cloned(), size);
    let field = std::iter::once(0..8);
    joined(
        field
            .chain(path_pairs(tree, &ranges).map(pair_bytes))
            .collect(),
        join_below,
    )
}

/// Hash pairs of an outboard fetched by range, by their pre-order position:
/// an outboard for checking the ranges they were fetched for.
struct FetchedPairs {
    root: bao_tree::blake3::Hash,
    tree: BaoTree,
    pairs: HashMap<u64, (bao_tree::blake3::Hash, bao_tree::blake3::Hash)>,
}

impl Outboard for FetchedPairs {
    fn root(&self) -> bao_tree::blake3::Hash {
        self.root
    }

    fn tree(&self) -> BaoTree {
        self.tree
    }

    fn load(
        &self,
        node: TreeNode,
    ) -> std::io::Result<Option<(bao_tree::blake3::Hash, bao_tree::blake3::Hash)>> {
        let Some(at) = self.tree.pre_order_offset(node) else {
            return Ok(None);
        };
        match self.pairs.get(&at) {
            Some(pair) => Ok(Some(*pair)),
            None => Err(std::io::Error::other(format!(
                "hash pair {at} of the outboard was not fetched"
            ))),
        }
    }
}

/// What the size field of an outboard fetched by range says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The size and the chunk group expected.
    Expected,
    /// Another chunk group (an outboard an older format wrote): the
    /// outboard is read whole instead.
    OtherGroup,
}

/// Checks `pieces` of blob `id` (of `size` bytes) against its name through
/// the pieces of its outboard `pairs` fetched by [`pairs_plan`] for
/// chunk groups of `log`: its size field first, then the hash pairs. No
/// I/O.
pub fn check_pieces_by_pairs(
    id: &ObjectId,
    size: u64,
    log: u8,
    pairs: &[(u64, Bytes)],
    pieces: &[(u64, Bytes)],
) -> std::result::Result<Field, Damage> {
    let at = |pos: u64, len: u64| -> Option<&[u8]> {
        let (start, b) =
            (pairs.iter()).find(|(s, b)| *s <= pos && pos + len <= s + b.len() as u64)?;
        b.get((pos - start) as usize..(pos - start + len) as usize)
    };
    let field = at(0, 8).ok_or(Damage::Outboard)?;
    let field = u64::from_le_bytes(field.try_into().map_err(|_| Damage::Outboard)?);
    match read_size_field(field) {
        Some((s, l)) if s == size && l == log => {}
        Some((s, _)) if s == size => return Ok(Field::OtherGroup),
        _ => return Err(Damage::Outboard),
    }
    let tree = BaoTree::new(size, BlockSize::from_chunk_log(log));
    let ranges = chunks_of(pieces.iter().map(|(p, b)| *p..p + b.len() as u64), size);
    let hash = |b: &[u8]| -> Option<bao_tree::blake3::Hash> {
        Some(bao_tree::blake3::Hash::from_bytes(b.try_into().ok()?))
    };
    let mut fetched = HashMap::new();
    for n in path_pairs(tree, &ranges) {
        let r = pair_bytes(n);
        let pair = at(r.start, r.end - r.start).ok_or(Damage::Outboard)?;
        let (l, r) = (hash(&pair[..32]), hash(&pair[32..]));
        fetched.insert(n, (l.ok_or(Damage::Outboard)?, r.ok_or(Damage::Outboard)?));
    }
    let ob = FetchedPairs {
        root: bao_tree::blake3::Hash::from_bytes(*id.as_bytes()),
        tree,
        pairs: fetched,
    };
    check_with(ob, log, pieces).map(|()| Field::Expected)
}

/// A blob opened for ranged reads ([`Store::open_ranged`],
/// [`Store::open_ranged_sized`]).
#[derive(Debug, Clone)]
pub struct RangedBlob {
    id: ObjectId,
    size: u64,
    held: Held,
}

#[derive(Debug, Clone)]
enum Held {
    /// The hash pairs of its whole outboard (checked when opened), of chunk
    /// groups of 2^`log` chunks: ranges are fetched and checked through
    /// them.
    Outboard { pairs: Bytes, log: u8 },
    /// Nothing yet: each read fetches the hash pairs its ranges need from
    /// an outboard of chunk groups of 2^`log` chunks, with them.
    Pairs { log: u8 },
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
            Held::Outboard { .. } | Held::Pairs { .. } => None,
        }
    }

    /// Bytes of data a read fetches at least: its chunk group (a blob
    /// held whole, 1).
    pub fn group_bytes(&self) -> u64 {
        match &self.held {
            Held::Whole(_) => 1,
            Held::Pairs { log } | Held::Outboard { log, .. } => group_bytes(*log),
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

    /// Bytes of data per chunk group of the outboards this store writes:
    /// [`GROUP_LOG`]'s in a repository of format 4 and later,
    /// [`GROUP_LOG_FORMAT3`]'s before (which older builds read).
    pub fn outboard_group_bytes(&self) -> u64 {
        group_bytes(self.outboard_log)
    }

    /// The store, writing outboards of chunk groups of 2^`log` chunks and
    /// reading blobs of a known size by their hash pairs when `log` is
    /// [`GROUP_LOG`] ([`Store::open_ranged_sized`]).
    pub fn with_outboard_group_log(mut self, log: u8) -> Self {
        self.outboard_log = log;
        self
    }

    /// Opens a blob for ranged reads: reads its outboard, or, when it has
    /// none, the whole blob (checked as [`Store::get_blob`] checks it).
    pub async fn open_ranged(&self, id: &ObjectId) -> Result<RangedBlob> {
        if let Some(bytes) = self.memo.as_ref().and_then(|m| m.get(id)) {
            return Ok(RangedBlob::whole(*id, bytes));
        }
        match self.get_path(&layout::outboard(id)).await {
            Ok(ob) => {
                let p = parts(&ob).ok_or(StoreError::OutboardDamaged { id: *id })?;
                let (size, log) = (p.size, p.log);
                let pairs = ob.slice(8..8 + p.pairs.len());
                Ok(RangedBlob {
                    id: *id,
                    size,
                    held: Held::Outboard { pairs, log },
                })
            }
            Err(StoreError::NotFound { .. }) => {
                Ok(RangedBlob::whole(*id, self.get_blob(id).await?))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a blob of `size` bytes (as a verified record of it says) for
    /// ranged reads without reading anything: where this store writes
    /// format 4's outboards, each read fetches only the hash pairs its
    /// ranges need, beside them; otherwise as [`Store::open_ranged`].
    pub async fn open_ranged_sized(&self, id: &ObjectId, size: u64) -> Result<RangedBlob> {
        if self.outboard_log == GROUP_LOG_FORMAT3 || size < OUTBOARD_FROM as u64 {
            return self.open_ranged(id).await;
        }
        if let Some(bytes) = self.memo.as_ref().and_then(|m| m.get(id)) {
            return Ok(RangedBlob::whole(*id, bytes));
        }
        Ok(RangedBlob {
            id: *id,
            size,
            held: Held::Pairs {
                log: self.outboard_log,
            },
        })
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
    /// are fetched, nearby ones in one request (with the outboard's hash
    /// pairs they need, when it is read by pairs); a blob read whole is
    /// sliced. A range past the blob's end is cut at it.
    pub async fn read_ranges(
        &self,
        blob: &RangedBlob,
        wanted: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let wanted = clip(wanted, blob.size);
        match &blob.held {
            Held::Whole(bytes) => Ok(cut(&[(0, bytes.clone())], &wanted)),
            Held::Outboard { pairs, log } => self.read_through(blob, pairs, *log, &wanted).await,
            Held::Pairs { log } => {
                match self
                    .read_by_pairs(&blob.id, blob.size, *log, &wanted)
                    .await?
                {
                    Some(got) => Ok(got),
                    // Its outboard has other chunk groups, or it has none:
                    // read as format 3 reads (`open_ranged` holds the whole
                    // outboard or the whole blob, never pairs).
                    None => {
                        let opened = self.open_ranged(&blob.id).await?;
                        Box::pin(self.read_ranges(&opened, &wanted)).await
                    }
                }
            }
        }
    }

    /// [`Store::read_ranges`] of `blob` through the hash `pairs` of its
    /// whole outboard, of chunk groups of 2^`log` chunks.
    async fn read_through(
        &self,
        blob: &RangedBlob,
        pairs: &[u8],
        log: u8,
        wanted: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let id = &blob.id;
        let fetch = fetch_plan(blob.size, wanted, self.join_below(), group_bytes(log));
        if fetch.is_empty() {
            return Ok(wanted.iter().map(|_| Bytes::new()).collect());
        }
        let got = self.fetch_ranges(&layout::blob(id), &fetch).await?;
        let pieces: Vec<(u64, Bytes)> = fetch.iter().map(|r| r.start).zip(got).collect();
        let p = Parts {
            size: blob.size,
            log,
            pairs,
        };
        match check_pairs(id, &p, &pieces) {
            Ok(()) => Ok(cut(&pieces, wanted)),
            Err(d) => Err(damage(id, d)),
        }
    }

    /// [`Store::read_ranges`] of blob `id` of `size` bytes by the hash
    /// pairs of its outboard (chunk groups of 2^`log` chunks), fetched
    /// with the data; `None` when its outboard is missing or has other
    /// chunk groups.
    async fn read_by_pairs(
        &self,
        id: &ObjectId,
        size: u64,
        log: u8,
        wanted: &[Range<u64>],
    ) -> Result<Option<Vec<Bytes>>> {
        let fetch = fetch_plan(size, wanted, self.join_below(), group_bytes(log));
        if fetch.is_empty() {
            return Ok(Some(wanted.iter().map(|_| Bytes::new()).collect()));
        }
        let plan = pairs_plan(size, log, &fetch, self.join_below());
        let (pairs, got) = futures::future::join(
            self.fetch_ranges(&layout::outboard(id), &plan),
            self.fetch_ranges(&layout::blob(id), &fetch),
        )
        .await;
        // No outboard, or one shorter than the plan (of other chunk
        // groups, or cut short): read as format 3 reads, which reads the
        // whole outboard and names what is wrong with it.
        let Ok(pairs) = pairs else {
            return Ok(None);
        };
        let pairs: Vec<(u64, Bytes)> = plan.iter().map(|r| r.start).zip(pairs).collect();
        let pieces: Vec<(u64, Bytes)> = fetch.iter().map(|r| r.start).zip(got?).collect();
        match check_pieces_by_pairs(id, size, log, &pairs, &pieces) {
            Ok(Field::Expected) => Ok(Some(cut(&pieces, wanted))),
            Ok(Field::OtherGroup) => Ok(None),
            Err(d) => Err(damage(id, d)),
        }
    }

    /// Ranges of the object at `path`: a local folder reads them all from
    /// one open file in one blocking task (a task and an open each cost
    /// more than a page's bytes); a bucket, each range its own request, at
    /// once (its `get_ranges` would join ranges up to 1 MiB apart, reading
    /// far more than asked; [`fetch_plan`] joins them where a request costs
    /// more).
    async fn fetch_ranges(&self, path: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if self.inline_reads {
            return retried(|_| self.os.get_ranges(path, ranges))
                .await
                .map_err(|e| io(path, e));
        }
        futures::future::try_join_all(ranges.iter().map(|r| async move {
            retried(|_| self.os.get_range(path, r.clone()))
                .await
                .map_err(|e| io(path, e))
        }))
        .await
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
    /// by a build before outboards), in chunk groups of 2^`log` chunks:
    /// reads the blob from the repository, checks it against its name, and
    /// stores the outboard its hashing gives. Returns the bytes read.
    pub async fn write_outboard(&self, id: &ObjectId, log: u8) -> Result<u64> {
        let bytes = self.get_path(&layout::blob(id)).await?;
        let (actual, ob) = outboard(&bytes, log);
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
                    let log = outboard_log(ob).unwrap_or(GROUP_LOG_FORMAT3);
                    let (actual, want) = outboard(bytes, log);
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

/// The error for damage a ranged read of blob `id` found.
fn damage(id: &ObjectId, d: Damage) -> StoreError {
    match d {
        Damage::Outboard => StoreError::OutboardDamaged { id: *id },
        Damage::Bytes(range) => StoreError::CorruptRange { id: *id, range },
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
            fetch_plan(size, &[10..20, 30..40, 2 * g + 5..2 * g + 6], JOIN_BELOW, g),
            vec![0..3 * g]
        );
        // Far apart: two fetches, in order, whatever the order asked.
        let far = 60 * g;
        assert_eq!(
            fetch_plan(size, &[far..far + 1, 0..1], JOIN_BELOW, g),
            vec![0..g, far..far + g]
        );
        // The last group is short; a range past the end is cut or dropped.
        assert_eq!(
            fetch_plan(size, &[size - 1..size + 50], JOIN_BELOW, g),
            vec![100 * g..size]
        );
        assert!(fetch_plan(size, &[size + 1..size + 9, 5..5], JOIN_BELOW, g).is_empty());
        // Joined only when touching, as a local folder reads them.
        assert_eq!(
            fetch_plan(size, &[10..20, g + 1..g + 2, 3 * g..3 * g + 1], 0, g),
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
    /// ranged read that covers it and named: none passes silently; in
    /// format 3's chunk groups and in format 4's.
    #[test]
    fn every_flipped_byte_in_a_range_or_the_outboard_is_found_and_named() {
        for log in [GROUP_LOG_FORMAT3, GROUP_LOG] {
            let g = group_bytes(log);
            let bytes = sample(5 * GROUP_BYTES as usize + 777);
            let (id, ob) = outboard(&bytes, log);
            assert_eq!(id, ObjectId::of(&bytes));
            assert_eq!(outboard_log(&ob), Some(log));
            let size = bytes.len() as u64;
            let whole = fetch_plan(size, &[0..size], JOIN_BELOW, g);
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
                let group = at as u64 / g * g;
                assert_eq!(
                    got,
                    Err(Damage::Bytes(group..(group + g).min(size))),
                    "byte {at}"
                );
                // A read of only that byte's group finds it too.
                let one = fetch_plan(size, &[at as u64..at as u64 + 1], 0, g);
                let piece: Vec<(u64, Bytes)> = (one.iter())
                    .map(|r| {
                        let b = bad[r.start as usize..r.end as usize].to_vec();
                        (r.start, Bytes::from(b))
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
    }

    /// The pieces of an outboard [`pairs_plan`] names for a read.
    fn pairs_of(ob: &[u8], plan: &[Range<u64>]) -> Vec<(u64, Bytes)> {
        (plan.iter())
            .map(|r| {
                (
                    r.start,
                    Bytes::from(ob[r.start as usize..r.end as usize].to_vec()),
                )
            })
            .collect()
    }

    /// A read by hash pairs fetches a few hundred bytes of the outboard,
    /// and every flipped byte of them, of the data it reads, or of its size
    /// field is found and named; an outboard of format 3's groups is told
    /// apart, not taken for damage.
    #[test]
    fn a_read_by_hash_pairs_fetches_its_paths_and_finds_every_flipped_byte() {
        let bytes = sample(300 * group_bytes(GROUP_LOG) as usize + 5);
        let size = bytes.len() as u64;
        let (id, ob) = outboard(&bytes, GROUP_LOG);
        let few = [vec![5..9], vec![600_000..600_010, size - 3..size]];
        for (i, wanted) in few.into_iter().chain([vec![0..size]]).enumerate() {
            let fetch = fetch_plan(size, &wanted, 0, group_bytes(GROUP_LOG));
            let plan = pairs_plan(size, GROUP_LOG, &fetch, 0);
            let pieces: Vec<(u64, Bytes)> = (fetch.iter())
                .map(|r| (r.start, bytes.slice(r.start as usize..r.end as usize)))
                .collect();
            let pairs = pairs_of(&ob, &plan);
            let fetched: u64 = plan.iter().map(|r| r.end - r.start).sum();
            if i < 2 {
                // The paths of a few groups: about 64 bytes a level.
                assert!(fetched < 64 * 20 * wanted.len() as u64, "{fetched} bytes");
            }
            let ok = check_pieces_by_pairs(&id, size, GROUP_LOG, &pairs, &pieces);
            assert_eq!(ok, Ok(Field::Expected), "{wanted:?}");
            for (i, (at, p)) in pairs.iter().enumerate() {
                for j in 0..p.len() {
                    let mut bad = pairs.clone();
                    let mut b = p.to_vec();
                    b[j] ^= 0x04;
                    bad[i].1 = Bytes::from(b);
                    let got = check_pieces_by_pairs(&id, size, GROUP_LOG, &bad, &pieces);
                    // The size field's high byte names the chunk group: a
                    // flip there reads as another group, and the read then
                    // checks the whole outboard, which its own hash refuses.
                    let want = match at + j as u64 {
                        7 => Ok(Field::OtherGroup),
                        _ => Err(Damage::Outboard),
                    };
                    assert_eq!(got, want, "outboard byte {}", at + j as u64);
                }
            }
            for (i, (at, p)) in pieces.iter().enumerate() {
                for j in (0..p.len()).step_by(331) {
                    let mut bad = pieces.clone();
                    let mut b = p.to_vec();
                    b[j] ^= 0x40;
                    bad[i].1 = Bytes::from(b);
                    let got = check_pieces_by_pairs(&id, size, GROUP_LOG, &pairs, &bad);
                    assert!(matches!(got, Err(Damage::Bytes(r)) if r.contains(&(at + j as u64))));
                }
            }
        }
        // A size that is not the blob's is damage; format 3's groups are not.
        let fetch = fetch_plan(size, &[5..9], 0, group_bytes(GROUP_LOG));
        let pieces = vec![(0, bytes.slice(0..fetch[0].end as usize))];
        let plan = pairs_plan(size, GROUP_LOG, &fetch, 0);
        let got = check_pieces_by_pairs(&id, size + 1, GROUP_LOG, &pairs_of(&ob, &plan), &pieces);
        assert_eq!(got, Err(Damage::Outboard));
        let (_, old) = outboard(&bytes, GROUP_LOG_FORMAT3);
        let got = check_pieces_by_pairs(&id, size, GROUP_LOG, &pairs_of(&old, &plan), &pieces);
        assert_eq!(got, Ok(Field::OtherGroup));
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
        let err = store
            .write_outboard(&id, GROUP_LOG_FORMAT3)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt { id: i, .. } if *i == id),
            "{err}"
        );
        assert!(!store.list_outboards().await.unwrap().contains(&id));
    }

    /// In a repository of format 4, a read of a large blob by a record of
    /// its size fetches its pages and their hash pairs, a few kB, with no
    /// outboard fetched first; damage in either is named with the blob; an
    /// outboard of format 3's groups, or none, is read as format 3 reads.
    #[tokio::test]
    async fn a_read_by_hash_pairs_reads_a_few_kilobytes_and_names_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap())
            .unwrap()
            .with_outboard_group_log(GROUP_LOG);
        let bytes = sample(3 * OUTBOARD_FROM);
        let size = bytes.len() as u64;
        let id = store.put_blob(bytes.clone()).await.unwrap().id;
        let wanted = [100..200, 2_000_000..2_000_050, size - 10..size];
        async fn read_at(
            store: &Store,
            id: ObjectId,
            size: u64,
            wanted: &[Range<u64>],
        ) -> Result<(Vec<Bytes>, RequestCounts)> {
            let blob = store.open_ranged_sized(&id, size).await?;
            let before = store.requests();
            let got = store.read_ranges(&blob, wanted).await?;
            Ok((got, store.requests().since(&before)))
        }
        let read = |store| read_at(store, id, size, &wanted);
        let (got, counts) = read(&store).await.unwrap();
        for (r, g) in wanted.iter().zip(&got) {
            assert_eq!(g, &bytes.slice(r.start as usize..r.end as usize));
        }
        // Three groups of 2 KiB and the pairs on their paths, in one read of
        // the blob and one of its outboard (a local folder: all ranges of a
        // file at once, each counted).
        let g = group_bytes(GROUP_LOG);
        assert!(counts.bytes_read < 3 * g + 3 * 64 * 12 + 8, "{counts:?}");
        let ob_path = dir.path().join("outboards").join(id.fanout_path());
        let blob_path = dir.path().join("objects").join(id.fanout_path());
        let ob_good = std::fs::read(&ob_path).unwrap();
        // A flipped byte in the data read, then in a hash pair on its path,
        // then in the size field's chunk group.
        let mut bad = bytes.to_vec();
        bad[2_000_010] ^= 1;
        std::fs::write(&blob_path, &bad).unwrap();
        let err = read(&store).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::CorruptRange { id: i, range } if *i == id && range.contains(&2_000_010)),
            "{err}"
        );
        std::fs::write(&blob_path, &bytes).unwrap();
        let fetch = fetch_plan(size, &wanted, 0, group_bytes(GROUP_LOG));
        let plan = pairs_plan(size, GROUP_LOG, &fetch, 0);
        for at in [8 + 5, plan[plan.len() / 2].start as usize + 3, 7] {
            let mut ob = ob_good.clone();
            ob[at] ^= 1;
            std::fs::write(&ob_path, &ob).unwrap();
            let err = read(&store).await.unwrap_err();
            assert!(
                matches!(&err, StoreError::OutboardDamaged { id: i } if *i == id),
                "outboard byte {at}: {err}"
            );
        }
        // An outboard of format 3's groups: read whole, then by it.
        let (_, old) = outboard(&bytes, GROUP_LOG_FORMAT3);
        std::fs::write(&ob_path, &old).unwrap();
        let (got, _) = read(&store).await.unwrap();
        assert_eq!(got[1], bytes.slice(2_000_000..2_000_050));
        // None at all: the blob read whole and checked.
        std::fs::remove_file(&ob_path).unwrap();
        let (got, counts) = read(&store).await.unwrap();
        assert_eq!(got[2], bytes.slice(size as usize - 10..));
        assert!(counts.bytes_read >= size);
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
        assert_eq!(
            store.write_outboard(&id, GROUP_LOG_FORMAT3).await.unwrap(),
            bytes.len() as u64
        );
        assert_eq!(std::fs::read(&ob_path).unwrap(), stored);
        // A small blob needs none and gets none.
        assert_eq!(
            store
                .write_outboard(&small, GROUP_LOG_FORMAT3)
                .await
                .unwrap(),
            100
        );
        assert_eq!(store.list_outboards().await.unwrap(), HashSet::from([id]));
        let answers = store.check_stored_blobs(&[id]).await;
        assert!(answers[0].as_ref().unwrap().outboard);
    }
}
