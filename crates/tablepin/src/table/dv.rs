//! Deletion vectors: a file's hidden positions as a roaring bitmap, how a
//! commit stores the ones it writes, and how they are read back.
//!
//! A commit that hides rows in several old files writes their bitmaps back
//! to back as one blob, a pack, and each snapshot entry names the pack and
//! the bitmap's offset in it ([`pack`]). A weekly commit that touches four
//! old files then creates one file instead of four, and the next commit's
//! look-up reads one. On a local disk each file created costs an inode
//! (0.07-0.9 ms of CPU on this project's machine, the more the more files
//! were deleted in the hours before); on an object store, a request.
//! A pack is a blob like any other: named by the hash of its bytes, checked
//! whole on every read, kept by gc while any snapshot names it.

use std::collections::HashMap;

use bytes::Bytes;
use roaring::RoaringBitmap;
use tablepin_format::{DeletionVector, FileEntry, ObjectId};
use tablepin_store::Store;

use crate::error::{Error, Result};

/// A new deletion vector for `bm`: its entry and its blob's bytes.
pub(crate) fn new(bm: &RoaringBitmap) -> Result<(DeletionVector, Bytes)> {
    let mut out = Vec::with_capacity(bm.serialized_size());
    bm.serialize_into(&mut out)
        .map_err(|e| Error::InvalidArgument(format!("cannot encode a deletion vector: {e}")))?;
    let dv = DeletionVector {
        blob: ObjectId::of(&out),
        count: bm.len(),
        bytes: out.len() as u64,
        offset: None,
    };
    Ok((dv, Bytes::from(out)))
}

/// Decodes one serialized bitmap (roaring portable format).
pub(crate) fn decode(blob: ObjectId, bytes: &[u8]) -> Result<RoaringBitmap> {
    RoaringBitmap::deserialize_from(bytes).map_err(|e| bad(blob, e.to_string()))
}

fn bad(blob: ObjectId, message: String) -> Error {
    super::datafile::bad(blob, "deletion vector")(message)
}

/// The bitmap `dv` names, out of the bytes of its blob (the whole blob, or
/// its slice of a pack).
pub(crate) fn decode_in(dv: &DeletionVector, blob: &[u8]) -> Result<RoaringBitmap> {
    let Some(at) = dv.offset else {
        return decode(dv.blob, blob);
    };
    let slice = usize::try_from(at)
        .ok()
        .zip(usize::try_from(dv.bytes).ok())
        .and_then(|(at, n)| blob.get(at..at.checked_add(n)?));
    match slice {
        Some(s) => decode(dv.blob, s),
        None => Err(bad(
            dv.blob,
            format!(
                "the pack holds {} bytes, but a snapshot places a bitmap of {} bytes at {at}; run `tablepin verify`",
                blob.len(),
                dv.bytes
            ),
        )),
    }
}

/// Stores the deletion vectors a commit wrote: `dvs` are their blobs, and
/// the entries in `files` that name one of them by its own hash (offset
/// absent) are the new ones. Two or more go into one pack, in file order,
/// each bitmap once however many files share it, and those entries then
/// name the pack and their offset; one stays a blob of its own. Returns the
/// blobs to write. Deterministic: the same bitmaps in the same files give
/// the same pack.
pub(crate) fn pack(files: &mut [FileEntry], dvs: Vec<Bytes>) -> Vec<Bytes> {
    if dvs.len() < 2 {
        return dvs;
    }
    let by_id: HashMap<ObjectId, Bytes> = dvs.into_iter().map(|b| (ObjectId::of(&b), b)).collect();
    let mut at: HashMap<ObjectId, u64> = HashMap::new();
    let mut packed = Vec::new();
    for d in files.iter().filter_map(|f| f.deletes.as_ref()) {
        if d.offset.is_some() || at.contains_key(&d.blob) {
            continue;
        }
        if let Some(b) = by_id.get(&d.blob) {
            at.insert(d.blob, packed.len() as u64);
            packed.extend_from_slice(b);
        }
    }
    if at.len() < 2 {
        // Only one of them is still used (compaction may have dropped the
        // others with their files).
        return by_id
            .into_iter()
            .filter(|(id, _)| at.contains_key(id))
            .map(|(_, b)| b)
            .collect();
    }
    let id = ObjectId::of(&packed);
    for d in files.iter_mut().filter_map(|f| f.deletes.as_mut()) {
        if d.offset.is_none() {
            if let Some(off) = at.get(&d.blob) {
                d.blob = id;
                d.offset = Some(*off);
            }
        }
    }
    vec![Bytes::from(packed)]
}

/// Loads a file's deletion vector, through `known` (see [`load_with`]).
pub(crate) async fn load(
    store: &Store,
    f: &FileEntry,
    known: &mut Known,
) -> Result<Option<RoaringBitmap>> {
    Ok(load_with(store, [f], known).await?.pop().flatten())
}

/// Loads the deletion vectors of several files, in their order, reading
/// each blob (a pack holds several) once.
pub(crate) async fn load_many<'f>(
    store: &Store,
    files: impl IntoIterator<Item = &'f FileEntry>,
) -> Result<Vec<Option<RoaringBitmap>>> {
    load_with(store, files, &mut Known::new()).await
}

/// Deletion-vector blobs by name: a commit's own, not stored yet, or ones
/// already read (and verified) that later loads take from memory.
pub(crate) type Known = HashMap<ObjectId, Bytes>;

/// Names `fresh` blobs for [`load_with`].
pub(crate) fn known(fresh: &[Bytes]) -> Known {
    fresh.iter().map(|b| (ObjectId::of(b), b.clone())).collect()
}

/// [`load_many`], taking the blobs in `blobs` from there rather than from
/// the store, and keeping there the ones it reads: an erasure that walks a
/// hundred versions reads each pack once, not once per version.
pub(crate) async fn load_with<'f>(
    store: &Store,
    files: impl IntoIterator<Item = &'f FileEntry>,
    blobs: &mut Known,
) -> Result<Vec<Option<RoaringBitmap>>> {
    let dvs: Vec<Option<&DeletionVector>> = files.into_iter().map(|f| f.deletes.as_ref()).collect();
    let mut ids: Vec<ObjectId> = dvs
        .iter()
        .flatten()
        .map(|d| d.blob)
        .filter(|id| !blobs.contains_key(id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    blobs.extend(ids.iter().copied().zip(store.get_blobs(&ids).await?));
    dvs.into_iter()
        .map(|d| {
            let Some(d) = d else { return Ok(None) };
            match blobs.get(&d.blob) {
                Some(b) => decode_in(d, b).map(Some),
                None => Err(bad(d.blob, "it was not read".into())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablepin_format::ContentHash;

    fn entry(data: &[u8], dv: Option<DeletionVector>) -> FileEntry {
        FileEntry {
            data: ObjectId::of(data),
            rows: 100,
            bytes: 1,
            hash_sum: ContentHash::EMPTY,
            deletes: dv,
            key_min: None,
            key_max: None,
        }
    }

    fn bitmap(ps: &[u32]) -> RoaringBitmap {
        ps.iter().copied().collect()
    }

    #[test]
    fn a_commit_s_bitmaps_share_one_pack_and_read_back() {
        let (a, ab) = new(&bitmap(&[1, 5, 9])).unwrap();
        let (b, bb) = new(&bitmap(&[2, 70])).unwrap();
        let (old, _) = new(&bitmap(&[3])).unwrap();
        let mut packed_old = old.clone();
        packed_old.offset = Some(0);
        let mut files = vec![
            entry(b"f0", Some(a.clone())),
            entry(b"f1", None),
            entry(b"f2", Some(b.clone())),
            // A second file with the same bitmap as the first.
            entry(b"f3", Some(a.clone())),
            // An older entry, already in a pack: left as it is.
            entry(b"f4", Some(packed_old.clone())),
        ];
        let out = pack(&mut files, vec![ab.clone(), bb.clone(), ab.clone()]);
        assert_eq!(out.len(), 1);
        let p = &out[0];
        assert_eq!(p.len(), ab.len() + bb.len(), "each bitmap once");
        let pid = ObjectId::of(p);
        let d0 = files[0].deletes.clone().unwrap();
        let d2 = files[2].deletes.clone().unwrap();
        assert_eq!((d0.blob, d0.offset), (pid, Some(0)));
        assert_eq!((d2.blob, d2.offset), (pid, Some(ab.len() as u64)));
        assert_eq!(files[3].deletes, files[0].deletes);
        assert_eq!(files[4].deletes, Some(packed_old));
        assert_eq!((d0.count, d0.bytes), (a.count, a.bytes));
        assert_eq!(decode_in(&d0, p).unwrap(), bitmap(&[1, 5, 9]));
        assert_eq!(decode_in(&d2, p).unwrap(), bitmap(&[2, 70]));

        // The same bitmaps in the same files give the same pack.
        let mut again = vec![
            entry(b"f0", Some(a.clone())),
            entry(b"f1", None),
            entry(b"f2", Some(b)),
            entry(b"f3", Some(a)),
        ];
        assert_eq!(pack(&mut again, vec![bb, ab]), out);
    }

    #[test]
    fn one_bitmap_stays_a_blob_of_its_own() {
        let (a, ab) = new(&bitmap(&[4])).unwrap();
        let mut files = vec![entry(b"f0", Some(a.clone()))];
        assert_eq!(pack(&mut files, vec![ab.clone()]), vec![ab.clone()]);
        assert_eq!(files[0].deletes, Some(a.clone()));
        // Two written, one no longer named (its file was compacted away).
        let (_, gone) = new(&bitmap(&[8])).unwrap();
        assert_eq!(pack(&mut files, vec![gone, ab.clone()]), vec![ab]);
        assert_eq!(files[0].deletes, Some(a));
    }

    #[test]
    fn a_slice_past_the_pack_s_end_is_a_bad_blob_not_a_panic() {
        let (mut a, ab) = new(&bitmap(&[1, 2, 3])).unwrap();
        a.offset = Some(1);
        let err = decode_in(&a, &ab).unwrap_err();
        assert!(matches!(err, Error::BadBlob { .. }), "{err}");
        assert!(err.to_string().contains("places a bitmap"), "{err}");
        a.offset = Some(u64::MAX);
        assert!(decode_in(&a, &ab).is_err());
        assert!(decode(ObjectId::of(b"x"), b"zz").is_err());
    }
}
