//! What an error is about, as fields: the table, version, revision, ref,
//! file, blob, column, row or key its sentence names. Front ends give them
//! to their users as data (the Python exceptions' attributes), so a caller
//! can branch on the blob that is damaged or the column that is wrong
//! without reading the sentence.

use serde::Serialize;
use tablepin_store::StoreError;

use crate::error::Error;

/// The things an error names; each `None` where it names none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Subject {
    /// The table.
    pub table: Option<String>,
    /// The version (its id, or the short id the sentence gives).
    pub version: Option<String>,
    /// The revision as given (a branch, tag, id prefix, `main~3`, a date).
    pub rev: Option<String>,
    /// The branch or tag.
    pub r#ref: Option<String>,
    /// A user's file, or a stored object's path.
    pub path: Option<String>,
    /// The blob (its id).
    pub blob: Option<String>,
    /// The column.
    pub column: Option<String>,
    /// The row (data rows counted from 1, as the sentence counts them).
    pub row: Option<usize>,
    /// The key, as the sentence spells it.
    pub key: Option<String>,
}

impl Error {
    /// What the error names, as fields (see [`Subject`]).
    pub fn subject(&self) -> Subject {
        use Error as E;
        let s = Subject::default();
        let table = |t: &str| Subject {
            table: Some(t.to_string()),
            ..Subject::default()
        };
        match self {
            E::Input { path, .. } | E::Output { path, .. } | E::RepositoryExists { path } => {
                Subject {
                    path: Some(path.clone()),
                    ..s
                }
            }
            E::NoRepository { start } => Subject {
                path: Some(start.clone()),
                ..s
            },
            E::UnknownColumn {
                table: t, column, ..
            } => Subject {
                column: Some(column.clone()),
                ..table(t)
            },
            E::NullKey {
                table: t,
                column,
                row,
            }
            | E::LossyValue {
                table: t,
                column,
                row,
                ..
            } => Subject {
                column: Some(column.clone()),
                // As the sentence counts: from 1.
                row: Some(*row + 1),
                ..table(t)
            },
            E::DuplicateKey { table: t, key, .. } | E::KeyExists { table: t, key } => Subject {
                key: Some(key.clone()),
                ..table(t)
            },
            E::StagedGone { table: t, blob } => Subject {
                blob: Some(blob.to_string()),
                ..table(t)
            },
            E::Staged { table: t, .. }
            | E::KeyChange { table: t, .. }
            | E::NoKey { table: t, .. }
            | E::AlreadyCompact { table: t }
            | E::ContentMismatch { table: t }
            | E::SchemaChange { table: t, .. }
            | E::RewriteNeedsOverwrite { table: t, .. }
            | E::NoTableAtHeads { table: t, .. }
            | E::PlanInput { table: t, .. } => table(t),
            E::UnknownTable {
                table: t, version, ..
            } => Subject {
                version: Some(version.clone()),
                ..table(t)
            },
            E::Expired { version, .. } => Subject {
                version: Some(version.clone()),
                ..s
            },
            E::Damaged {
                version,
                table: t,
                source,
                ..
            } => {
                let named = t
                    .strip_prefix(", table '")
                    .and_then(|t| t.strip_suffix('\''));
                Subject {
                    table: named.map(str::to_string),
                    version: Some(version.to_string()),
                    ..store_subject(source)
                }
            }
            E::BadBlob { blob, .. } => Subject {
                blob: Some(blob.to_string()),
                ..s
            },
            E::Store(e) => store_subject(e),
            _ => self.ref_subject().unwrap_or_default(),
        }
    }

    /// [`Error::subject`] of the errors about refs and revisions.
    fn ref_subject(&self) -> Option<Subject> {
        use Error as E;
        let s = Subject::default();
        Some(match self {
            E::TagAndBranch { rev, .. } | E::UnknownRev { rev } | E::AmbiguousRev { rev, .. } => {
                Subject {
                    rev: Some(rev.clone()),
                    ..s
                }
            }
            E::RefExists { name, .. }
            | E::NameTaken { name, .. }
            | E::UnknownBranch { name, .. }
            | E::DeletedBranch { name, .. }
            | E::ProtectedBranch { name, .. }
            | E::UnknownRef { name, .. }
            | E::RefMoved { name }
            | E::NoVersionAt { branch: name, .. }
            | E::Conflict { branch: name, .. } => Subject {
                r#ref: Some(name.clone()),
                ..s
            },
            _ => return None,
        })
    }
}

/// What a store error names: the blob, else the object's path.
fn store_subject(e: &StoreError) -> Subject {
    match e {
        StoreError::Corrupt { id, .. }
        | StoreError::CorruptRange { id, .. }
        | StoreError::OutboardDamaged { id } => Subject {
            blob: Some(id.to_string()),
            ..Subject::default()
        },
        StoreError::NotFound { path }
        | StoreError::Exists { path }
        | StoreError::Decode { path, .. }
        | StoreError::Io { path, .. } => Subject {
            blob: blob_of(path),
            path: Some(path.clone()),
            ..Subject::default()
        },
        _ => Subject::default(),
    }
}

/// The blob id a stored object's path ends in (`objects/ab/cdef…`), if it
/// is a blob's.
fn blob_of(path: &str) -> Option<String> {
    let rest = path.rsplit_once("objects/")?.1;
    let id: String = rest.chars().filter(|c| *c != '/').collect();
    (id.len() == 64 && id.chars().all(|c| c.is_ascii_hexdigit())).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_their_subject_as_fields() {
        let e = Error::NullKey {
            table: "t".into(),
            column: "id".into(),
            row: 7,
        };
        assert_eq!(
            e.subject(),
            Subject {
                table: Some("t".into()),
                column: Some("id".into()),
                // Row 7 counted from 0 is the sentence's row 8.
                row: Some(8),
                ..Subject::default()
            }
        );
        let e = Error::UnknownRev { rev: "v9".into() };
        assert_eq!(e.subject().rev.as_deref(), Some("v9"));
        let id = "ab".repeat(32);
        let e = Error::Store(StoreError::NotFound {
            path: format!("repo/objects/{}/{}", &id[..2], &id[2..]),
        });
        assert_eq!(e.subject().blob, Some(id));
        let e = Error::Store(StoreError::NotFound {
            path: "repo/refs/heads/main".into(),
        });
        assert_eq!(e.subject().blob, None);
        assert_eq!(Error::KeepNone.subject(), Subject::default());
    }
}
