//! The multiset content hash: the sum, modulo 2^256, of the row hashes of a
//! table.
//!
//! Addition is commutative, so the same rows in any order give the same
//! hash; duplicates count (two equal rows add their hash twice); and the
//! hash updates in O(changed rows): add the new rows' hashes, subtract the
//! removed ones. This is the additive multiset hash ("AdHash") of Bellare
//! and Micciancio over 256-bit BLAKE3 row hashes. It detects accidental
//! change; it is not meant to resist an adversary who chooses rows to
//! collide, which the per-blob BLAKE3 names already prevent for stored
//! bytes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The hash of one row (see the `tablepin-rowhash` crate for its encoding).
pub type RowHash = [u8; 32];

/// A multiset hash of row hashes: the sum of them modulo 2^256, little-endian
/// limbs.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ContentHash([u64; 4]);

fn limbs(h: &RowHash) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (i, chunk) in h.chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        out[i] = u64::from_le_bytes(b);
    }
    out
}

impl ContentHash {
    /// The hash of the empty multiset.
    pub const EMPTY: Self = Self([0; 4]);

    /// Adds one row hash.
    pub fn add(&mut self, h: &RowHash) {
        self.add_limbs(limbs(h));
    }

    /// Removes one row hash (adds its negation modulo 2^256).
    pub fn sub(&mut self, h: &RowHash) {
        self.sub_limbs(limbs(h));
    }

    /// Adds a whole multiset.
    pub fn merge(&mut self, other: &ContentHash) {
        self.add_limbs(other.0);
    }

    /// Removes a whole multiset.
    pub fn unmerge(&mut self, other: &ContentHash) {
        self.sub_limbs(other.0);
    }

    fn add_limbs(&mut self, b: [u64; 4]) {
        let mut carry = false;
        for (a, b) in self.0.iter_mut().zip(b) {
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *a = s2;
            carry = c1 || c2;
        }
    }

    fn sub_limbs(&mut self, b: [u64; 4]) {
        let mut borrow = false;
        for (a, b) in self.0.iter_mut().zip(b) {
            let (d1, b1) = a.overflowing_sub(b);
            let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
            *a = d2;
            borrow = b1 || b2;
        }
    }

    /// The 32 bytes, little-endian.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, l) in self.0.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&l.to_le_bytes());
        }
        out
    }

    /// The first `n` hex digits, for display.
    pub fn short(&self, n: usize) -> String {
        let mut s = self.to_string();
        s.truncate(n.min(64));
        s
    }
}

impl FromIterator<RowHash> for ContentHash {
    fn from_iter<I: IntoIterator<Item = RowHash>>(iter: I) -> Self {
        let mut h = Self::EMPTY;
        for r in iter {
            h.add(&r);
        }
        h
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.to_bytes()))
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.short(16))
    }
}

impl FromStr for ContentHash {
    type Err = crate::IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let id: crate::ObjectId = s.parse()?;
        Ok(Self(limbs(id.as_bytes())))
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn carries_across_limbs() {
        let mut h = ContentHash::EMPTY;
        let mut max = [0u8; 32];
        max[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        h.add(&max);
        let mut one = [0u8; 32];
        one[0] = 1;
        h.add(&one);
        // 2^64 - 1 + 1 = 2^64: limb 0 is zero, limb 1 is one.
        let b = h.to_bytes();
        assert!(b[..8].iter().all(|x| *x == 0));
        assert_eq!(b[8], 1);
        h.sub(&one);
        h.sub(&max);
        assert_eq!(h, ContentHash::EMPTY);
    }

    proptest! {
        #[test]
        fn order_free_and_invertible(
            rows in proptest::collection::vec(proptest::array::uniform32(any::<u8>()), 0..40),
            seed in any::<u64>(),
        ) {
            let a: ContentHash = rows.iter().copied().collect();
            let mut shuffled = rows.clone();
            // A deterministic permutation from the seed.
            let n = shuffled.len();
            if n > 1 {
                for i in 0..n {
                    let j = (seed.wrapping_mul(i as u64 + 7) % n as u64) as usize;
                    shuffled.swap(i, j);
                }
            }
            let b: ContentHash = shuffled.iter().copied().collect();
            prop_assert_eq!(a, b);
            let mut c = a;
            for r in &rows { c.sub(r); }
            prop_assert_eq!(c, ContentHash::EMPTY);
            prop_assert_eq!(a.to_string().parse::<ContentHash>().unwrap(), a);
        }

        #[test]
        fn duplicates_count(row in proptest::array::uniform32(any::<u8>())) {
            let once: ContentHash = [row].into_iter().collect();
            let twice: ContentHash = [row, row].into_iter().collect();
            prop_assume!(row != [0u8; 32]);
            prop_assert_ne!(once, twice);
        }
    }
}
