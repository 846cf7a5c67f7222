//! Content addresses: a blob's name is the BLAKE3-256 hash of its bytes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The BLAKE3-256 hash of a blob's bytes, which is also its name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId([u8; 32]);

impl ObjectId {
    /// The id of these bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// The id of the bytes a reader gives, read a buffer at a time (a
    /// blob's file checked without holding it).
    pub fn of_reader(mut r: impl std::io::Read) -> std::io::Result<Self> {
        let mut hasher = blake3::Hasher::new();
        std::io::copy(&mut r, &mut hasher)?;
        Ok(Self(*hasher.finalize().as_bytes()))
    }

    /// Wraps raw hash bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw hash bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The relative storage path of the blob: `ab/cdef…` (git's fan-out).
    pub fn fanout_path(&self) -> String {
        let hex = self.to_string();
        format!("{}/{}", &hex[..2], &hex[2..])
    }

    /// The first `n` hex digits, for display.
    pub fn short(&self, n: usize) -> String {
        let mut s = self.to_string();
        s.truncate(n.min(64));
        s
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short(12))
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an object id (64 hex digits)")]
pub struct IdParseError(pub String);

impl FromStr for ObjectId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 32];
        if s.len() != 64 {
            return Err(IdParseError(s.to_string()));
        }
        hex::decode_to_slice(s, &mut out).map_err(|_| IdParseError(s.to_string()))?;
        Ok(Self(out))
    }
}

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The id of a version: the [`ObjectId`] of its encoded manifest, so history
/// is a Merkle DAG as in Git.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VersionId(pub ObjectId);

impl fmt::Display for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VersionId({})", self.0.short(12))
    }
}

impl VersionId {
    /// The first `n` hex digits, for display.
    pub fn short(&self, n: usize) -> String {
        self.0.short(n)
    }
}

impl FromStr for VersionId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.parse()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn id_is_blake3_of_bytes() {
        // BLAKE3 of the empty input, from the BLAKE3 reference test vectors.
        assert_eq!(
            ObjectId::of(b"").to_string(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(ObjectId::of(b"").fanout_path()[..3], *"af/");
    }

    #[test]
    fn bad_hex_is_an_error() {
        assert!("xyz".parse::<ObjectId>().is_err());
        assert!("g".repeat(64).parse::<ObjectId>().is_err());
    }

    proptest! {
        #[test]
        fn display_parse_roundtrip(bytes in proptest::array::uniform32(any::<u8>())) {
            let id = ObjectId::from_bytes(bytes);
            prop_assert_eq!(id.to_string().parse::<ObjectId>().unwrap(), id);
            let json = serde_json::to_string(&VersionId(id)).unwrap();
            prop_assert_eq!(serde_json::from_str::<VersionId>(&json).unwrap(), VersionId(id));
        }
    }
}
