//! The way out of an error, as data, and the one sentence of each error
//! that has one.
//!
//! An error such as "key 7 exists already" has a fix the user takes in
//! the front end they use: `--mode upsert` on the command line,
//! `mode="upsert"` in Python, `Mode::Upsert` in Rust. The engine writes
//! each such sentence once ([`Error::say`]) and asks the front end's
//! [`Words`] only how its user names an argument or a command; the
//! library's own `Display` is [`Error::say`] with the library's words.
//! [`Error::way_out`] gives the fixes as data, for callers that branch.

use std::cell::RefCell;

use super::Error;
use crate::Mode;

/// One thing a user can change or run to get past an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fix {
    /// Commit in this mode.
    Mode(Mode),
    /// Give these key columns; none: give no key at all.
    Key(Vec<String>),
    /// Accept a change of the table's schema.
    AllowSchemaChange,
    /// Read the input's column as the table's type (no value changes).
    Cast {
        /// The input's column.
        column: String,
        /// The table's type.
        to: String,
    },
    /// Delete a protected branch anyway.
    Force,
    /// Give the erasure a reason for its audit record.
    Reason,
    /// Give gc a grace of this many milliseconds.
    Grace {
        /// The grace (ms).
        ms: i64,
    },
    /// Say that no other process writes while gc runs.
    SoleWriter,
    /// Keep the last this many versions of each branch.
    KeepLast(u64),
    /// Let the commit create its branch.
    CreateBranch,
    /// Open the repository by its location.
    Location,
    /// The same call again.
    Again,
    /// Retry for longer.
    RetryFor,
    /// Create a repository (here, or at a location).
    Init {
        /// The location; `None`: the current folder.
        at: Option<String>,
    },
    /// Create a branch.
    Branch {
        /// The branch.
        name: String,
        /// At a revision the user chooses (rather than the default).
        at_a_rev: bool,
    },
    /// Restore a deleted branch.
    RestoreBranch {
        /// The branch.
        name: String,
    },
    /// Delete a tag.
    DeleteTag {
        /// The tag.
        name: String,
    },
    /// Settle a table of a merge for one side: its rows where keys
    /// conflict, its table whole where the sides' tables do not merge.
    KeepSide {
        /// The table.
        table: String,
    },
    /// Check every blob, ref and version of the repository.
    Verify,
    /// List a branch's versions.
    Log,
    /// List the tags.
    Tags,
}

impl Fix {
    /// The usual imperative clause around the fix's `name` in a front
    /// end's words ("use --mode upsert", "pass --force", "omit --key",
    /// "run `tablepin init`"): what [`Words::take`] says unless the front
    /// end says otherwise.
    pub fn clause(&self, name: String) -> String {
        match self {
            f if f.is_command() => format!("run {name}"),
            Fix::Key(k) if k.is_empty() => format!("omit {name}"),
            Fix::Mode(_) | Fix::KeepLast(_) => format!("use {name}"),
            Fix::Grace { .. } => format!("give {name}"),
            Fix::Again | Fix::RetryFor => name,
            _ => format!("pass {name}"),
        }
    }

    /// True for a command (or a call) rather than an argument.
    pub fn is_command(&self) -> bool {
        matches!(
            self,
            Fix::Init { .. }
                | Fix::Branch { .. }
                | Fix::RestoreBranch { .. }
                | Fix::DeleteTag { .. }
        )
    }
}

/// How one front end names arguments and commands. `name` is enough; the
/// others say the usual clause around it and are overridden where a front
/// end says it otherwise.
pub trait Words {
    /// The argument or command as the user writes it: `--mode upsert`,
    /// `mode="upsert"`, "upsert mode", "`tablepin branch dev`".
    fn name(&self, fix: &Fix) -> String;

    /// The fix as an imperative clause: "use --mode upsert", "pass
    /// --force", "omit --key", "run `tablepin init`".
    fn take(&self, fix: &Fix) -> String {
        fix.clause(self.name(fix))
    }

    /// A fix named inside a sentence ("so it needs --mode overwrite").
    fn offer(&self, fix: &Fix) -> String {
        self.name(fix)
    }
}

/// The Rust library's words: plain English, as `Display` says it.
pub struct Library;

impl Words for Library {
    fn name(&self, fix: &Fix) -> String {
        match fix {
            Fix::Mode(m) => format!("{} mode", m.name()),
            Fix::Key(k) if k.is_empty() => "a key".into(),
            Fix::Key(k) => format!("the key [{}]", k.join(", ")),
            Fix::AllowSchemaChange => "allow_schema_change".into(),
            Fix::Cast { .. } => "cast".into(),
            Fix::Force => "force".into(),
            Fix::Reason => "reason".into(),
            Fix::Grace { ms } => format!("a grace of {} s", ms / 1000),
            Fix::SoleWriter => "sole_writer".into(),
            Fix::KeepLast(n) => format!("keeping the last {n} versions"),
            Fix::CreateBranch => "create_branch".into(),
            Fix::Location => "the repository's path".into(),
            Fix::Again => "commit again".into(),
            Fix::RetryFor => "retry for longer".into(),
            Fix::Init { .. } => "Repo::init".into(),
            Fix::Branch { .. } => "Refs::create".into(),
            Fix::RestoreBranch { .. } => "Refs::restore".into(),
            Fix::DeleteTag { .. } => "Refs::delete".into(),
            Fix::KeepSide { table } => format!(
                "MergeOptions::table_strategy[\"{table}\"] = Strategy::Ours or Strategy::Theirs"
            ),
            Fix::Verify => "Repo::verify".into(),
            Fix::Log => "Repo::log".into(),
            Fix::Tags => "Refs::list".into(),
        }
    }

    fn take(&self, fix: &Fix) -> String {
        match fix {
            f if f.is_command() => format!("call {}", self.name(f)),
            Fix::Key(k) if k.is_empty() => "commit without a key".into(),
            Fix::Key(k) => format!("with [{}]", k.join(", ")),
            Fix::AllowSchemaChange => "allow the schema change".into(),
            Fix::Cast { column, to } => {
                format!("cast the input's '{column}' to {to} when no value changes")
            }
            Fix::Force => "force the deletion".into(),
            Fix::Reason => "give it one".into(),
            Fix::Grace { ms } => format!("give {} s", ms / 1000),
            Fix::SoleWriter => "say that no other process writes".into(),
            Fix::KeepLast(n) => format!("keep the last {n}"),
            Fix::CreateBranch => "let the commit create it".into(),
            Fix::Location => "open one by its path".into(),
            _ => fix.clause(self.name(fix)),
        }
    }
}

/// Words that say nothing and keep every fix offered: [`Error::way_out`].
#[derive(Default)]
struct Recorder(RefCell<Vec<Fix>>);

impl Words for Recorder {
    fn name(&self, _: &Fix) -> String {
        String::new()
    }

    fn take(&self, fix: &Fix) -> String {
        self.0.borrow_mut().push(fix.clone());
        String::new()
    }

    fn offer(&self, fix: &Fix) -> String {
        self.take(fix)
    }
}

/// `s` with its first letter upper-case (a sentence after a full stop).
fn capitalized(s: String) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => s,
    }
}

impl Error {
    /// The ways out of this error, as data (empty when it has none): what
    /// [`Error::say`] offers, in the same order.
    pub fn way_out(&self) -> Vec<Fix> {
        let recorder = Recorder::default();
        // Only the sentences with a way out offer a fix: the others'
        // Display need not be made.
        let _ = self.say_fixed(&recorder);
        recorder.0.into_inner()
    }

    /// The error in one sentence with its way out in `words`: the command
    /// line's flags, Python's arguments, the library's plain English (what
    /// `Display` gives). Errors without a way out say their `Display`.
    pub fn say(&self, w: &dyn Words) -> String {
        self.say_fixed(w).unwrap_or_else(|| self.to_string())
    }

    /// The sentence of the errors that have a way out; `None` for the
    /// others. `Display` of these variants is this with [`Library`].
    pub(super) fn say_fixed(&self, w: &dyn Words) -> Option<String> {
        use Error as E;
        Some(match self {
            E::NoRepository { start } if start.contains("://") => {
                let init = w.take(&Fix::Init { at: Some(start.clone()) });
                format!("no tablepin repository at {start}; {init} to create one")
            }
            E::NoRepository { start } => format!(
                "no tablepin repository in {start} or any parent folder; {} there, or {}",
                w.take(&Fix::Init { at: None }),
                w.take(&Fix::Location)
            ),
            E::KeyExists { table, key } => format!(
                "key {key} exists already in table '{table}'; {} to replace rows",
                w.take(&Fix::Mode(Mode::Upsert))
            ),
            E::NoKey { table, mode } => format!(
                "{} needs a keyed table, and '{table}' has no key (a key is declared on a table's first commit); commit the whole table with {}, or add rows with {}",
                w.name(&Fix::Mode(*mode)),
                w.offer(&Fix::Mode(Mode::Overwrite)),
                w.offer(&Fix::Mode(Mode::Append))
            ),
            E::KeyChange { table, old, new } if old.is_empty() => format!(
                "table '{table}' has no key (it was first committed without {}), so {} does not apply to it; {}",
                w.name(&Fix::Key(Vec::new())),
                w.name(&Fix::Key(new.clone())),
                w.take(&Fix::Key(Vec::new()))
            ),
            E::KeyChange { table, old, new } => format!(
                "table '{table}' is keyed by [{}], not [{}]; {} or {}",
                old.join(", "),
                new.join(", "),
                w.take(&Fix::Key(Vec::new())),
                w.take(&Fix::Key(old.clone()))
            ),
            E::SchemaChange { .. } | E::RewriteNeedsOverwrite { .. } => self.say_schema(w)?,
            E::Conflict { branch, waited_s } => format!(
                "branch '{branch}' kept moving while committing: other writers committed first for {waited_s} s; {}, or {}",
                w.take(&Fix::Again),
                w.take(&Fix::RetryFor)
            ),
            _ => {
                return self
                    .say_refs(w)
                    .or_else(|| self.say_retention(w))
                    .or_else(|| self.say_pointers(w))
            }
        })
    }

    fn say_schema(&self, w: &dyn Words) -> Option<String> {
        use Error as E;
        Some(match self {
            E::SchemaChange {
                table,
                detail,
                cast_to,
            } => {
                // Said in the sentence's order, which is the way out's.
                let allow = w.take(&Fix::AllowSchemaChange);
                let cast = cast_to.as_ref().map_or(String::new(), |(column, to)| {
                    let cast = Fix::Cast {
                        column: column.clone(),
                        to: to.clone(),
                    };
                    format!(", or {}", w.take(&cast))
                });
                format!("schema of table '{table}' would change: {detail}; {allow} to accept it{cast}")
            }
            E::RewriteNeedsOverwrite { table, detail } => format!(
                "schema of table '{table}' changes ({detail}); an incompatible schema change rewrites the table, so it needs {}",
                w.offer(&Fix::Mode(Mode::Overwrite))
            ),
            _ => return None,
        })
    }

    fn say_refs(&self, w: &dyn Words) -> Option<String> {
        use Error as E;
        Some(match self {
            E::UnknownBranch { name, branches, hint } => format!(
                "branch '{name}' does not exist (branches: {branches}){hint}; {} to create it, or {}",
                w.take(&Fix::Branch {
                    name: name.clone(),
                    at_a_rev: false
                }),
                w.take(&Fix::CreateBranch)
            ),
            E::DeletedBranch { name, target } => format!(
                "branch '{name}' was deleted (its head was {target}); {} to restore it, or {} to start it again at a version of your choice",
                w.take(&Fix::RestoreBranch { name: name.clone() }),
                w.take(&Fix::Branch {
                    name: name.clone(),
                    at_a_rev: true
                })
            ),
            E::ProtectedBranch { name, reason, what } => format!(
                "{reason}; deleting it leaves {what} for gc to expire. {} to delete it anyway (branch '{name}' stays restorable with {})",
                capitalized(w.take(&Fix::Force)),
                w.name(&Fix::RestoreBranch { name: name.clone() })
            ),
            E::Unmergeable { table, why } => format!(
                "table '{table}' cannot be merged: {why}; keep one side's table with {}",
                w.offer(&Fix::KeepSide {
                    table: table.clone()
                })
            ),
            E::ResolutionShort { table, key } => format!(
                "the resolution of table '{table}' has no row for conflicting key ({key}): give the row each conflicting key should have, or leave the resolution out and settle the table's conflicts with {}",
                w.offer(&Fix::KeepSide {
                    table: table.clone()
                })
            ),
            E::TagAndBranch { rev, tag, branch } => format!(
                "'{rev}' names both a tag (at {tag}) and a branch (at {branch}); rename one of them ({} and tag again under another name)",
                w.take(&Fix::DeleteTag { name: rev.clone() })
            ),
            _ => return None,
        })
    }

    /// Errors whose way out is to look further: the log, the tags, a
    /// check of the whole repository.
    fn say_pointers(&self, w: &dyn Words) -> Option<String> {
        use Error as E;
        let verify = || w.take(&Fix::Verify);
        Some(match self {
            E::UnknownRev { rev } => format!(
                "unknown revision '{rev}': no tag, branch or version id matches; see {} and {}",
                w.offer(&Fix::Log),
                w.offer(&Fix::Tags)
            ),
            E::ContentMismatch { table } => format!(
                "the live rows of table '{table}' do not hash to the content hash its snapshot records, so nothing was written; {} to find the damaged blob",
                verify()
            ),
            E::KeptBlobsDamaged { first, more } => {
                let more = match more {
                    0 => String::new(),
                    n => format!(" (and {n} more)"),
                };
                format!("gc changed nothing: {first}{more}; {} to list every problem", verify())
            }
            E::DamagedDocument(what) => format!("{what}; {} to list every problem", verify()),
            _ => return None,
        })
    }

    fn say_retention(&self, w: &dyn Words) -> Option<String> {
        use Error as E;
        Some(match self {
            E::NoReason => format!(
                "an erasure needs a reason for the audit record: {}",
                w.take(&Fix::Reason)
            ),
            E::ShortGrace { grace_ms, min_ms } => format!(
                "{} could delete the files of a commit still landing; {} or more, or {} when no other process writes to this repository while gc runs",
                w.name(&Fix::Grace { ms: *grace_ms }),
                w.take(&Fix::Grace { ms: *min_ms }),
                w.take(&Fix::SoleWriter)
            ),
            E::KeepNone => format!(
                "{} would expire every branch head, which gc always keeps; {} or more",
                w.name(&Fix::KeepLast(0)),
                w.take(&Fix::KeepLast(1))
            ),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_change(cast: bool) -> Error {
        Error::SchemaChange {
            table: "sales".into(),
            detail: "column 'qty' would change type from Int64 to Float64".into(),
            cast_to: cast.then(|| ("qty".into(), "Int64".into())),
        }
    }

    /// Words that show where each fix goes: `<name>`, `<take>`.
    struct Marked;

    impl Words for Marked {
        fn name(&self, fix: &Fix) -> String {
            format!("<name {fix:?}>")
        }
        fn take(&self, fix: &Fix) -> String {
            format!("<take {fix:?}>")
        }
    }

    #[test]
    fn the_way_out_is_the_fixes_the_sentence_offers_in_order() {
        let key = Error::KeyExists {
            table: "t".into(),
            key: "id=1".into(),
        };
        assert_eq!(key.way_out(), vec![Fix::Mode(Mode::Upsert)]);
        assert_eq!(
            schema_change(true).way_out(),
            vec![
                Fix::AllowSchemaChange,
                Fix::Cast {
                    column: "qty".into(),
                    to: "Int64".into()
                }
            ]
        );
        assert_eq!(schema_change(false).way_out(), vec![Fix::AllowSchemaChange]);
        let no_key = Error::NoKey {
            table: "t".into(),
            mode: Mode::Upsert,
        };
        // The mode the problem names is not a way out; the two others are.
        assert_eq!(
            no_key.way_out(),
            vec![Fix::Mode(Mode::Overwrite), Fix::Mode(Mode::Append)]
        );
        let nowhere = Error::NoRepository {
            start: "/tmp/x".into(),
        };
        assert_eq!(
            nowhere.way_out(),
            vec![Fix::Init { at: None }, Fix::Location]
        );
        assert_eq!(Error::KeepNone.way_out(), vec![Fix::KeepLast(1)]);
        let rev = Error::UnknownRev { rev: "v9".into() };
        assert_eq!(rev.way_out(), vec![Fix::Log, Fix::Tags]);
        // The library's own words send to its calls, not the command line.
        assert!(!rev.to_string().contains("tablepin "), "{rev}");
        // An error without one says so.
        assert!(Error::Internal("x".into()).way_out().is_empty());
    }

    #[test]
    fn display_is_the_sentence_in_the_library_s_words_and_front_ends_change_only_the_fixes() {
        let errors = [
            schema_change(true),
            Error::KeyChange {
                table: "t".into(),
                old: vec!["id".into()],
                new: vec!["name".into()],
            },
            Error::ShortGrace {
                grace_ms: 5_000,
                min_ms: 600_000,
            },
            Error::DeletedBranch {
                name: "dev".into(),
                target: "1f2e".into(),
            },
        ];
        for e in &errors {
            assert_eq!(e.to_string(), e.say(&Library));
            assert!(!e.to_string().contains("--"), "{e}");
            // Every fix is said where the sentence offers it, and the
            // rest of the sentence is the same whoever says it.
            let marked = e.say(&Marked);
            for fix in e.way_out() {
                assert!(marked.contains(&format!("<take {fix:?}>")), "{marked}");
            }
            let problem = marked.split('<').next().unwrap_or_default();
            assert!(e.to_string().starts_with(problem), "{e} / {marked}");
        }
        // Errors without a way out say their Display whatever the words.
        let plain = Error::AlreadyCompact { table: "t".into() };
        assert_eq!(plain.say(&Marked), plain.to_string());
    }

    /// Every variant whose `Display` is [`Error::say_fixed`] has its
    /// sentence there: a variant missing from it would display as nothing.
    #[test]
    fn every_variant_said_here_has_a_sentence_and_a_way_out() {
        let s = || "x".to_string();
        let all = [
            Error::NoRepository { start: s() },
            Error::NoRepository {
                start: "s3://b/p".into(),
            },
            Error::KeyExists {
                table: s(),
                key: s(),
            },
            Error::KeyChange {
                table: s(),
                old: vec![],
                new: vec![s()],
            },
            Error::KeyChange {
                table: s(),
                old: vec![s()],
                new: vec![s()],
            },
            Error::NoKey {
                table: s(),
                mode: Mode::Delete,
            },
            Error::ContentMismatch { table: s() },
            schema_change(false),
            Error::RewriteNeedsOverwrite {
                table: s(),
                detail: s(),
            },
            Error::NoReason,
            Error::KeepNone,
            Error::TagAndBranch {
                rev: s(),
                tag: s(),
                branch: s(),
            },
            Error::UnknownRev { rev: s() },
            Error::UnknownBranch {
                name: s(),
                branches: s(),
                hint: String::new(),
            },
            Error::DeletedBranch {
                name: s(),
                target: s(),
            },
            Error::ShortGrace {
                grace_ms: 0,
                min_ms: 600_000,
            },
            Error::ProtectedBranch {
                name: s(),
                reason: s(),
                what: s(),
            },
            Error::Unmergeable {
                table: s(),
                why: s(),
            },
            Error::ResolutionShort {
                table: s(),
                key: s(),
            },
            Error::KeptBlobsDamaged {
                first: s(),
                more: 2,
            },
            Error::DamagedDocument(s()),
            Error::Conflict {
                branch: s(),
                waited_s: 60,
            },
        ];
        for e in &all {
            assert!(e.say_fixed(&Library).is_some(), "{e:?}");
            assert!(!e.to_string().is_empty(), "{e:?}");
            assert!(!e.way_out().is_empty(), "{e:?}");
        }
    }

    #[test]
    fn library_words_read_as_english() {
        let e = Error::KeyChange {
            table: "t".into(),
            old: Vec::new(),
            new: vec!["id".into()],
        };
        assert_eq!(
            e.to_string(),
            "table 't' has no key (it was first committed without a key), so the key [id] does not apply to it; commit without a key"
        );
        assert_eq!(
            Error::KeepNone.to_string(),
            "keeping the last 0 versions would expire every branch head, which gc always keeps; keep the last 1 or more"
        );
    }
}
