//! What a collection keeps, decided from the refs' logs and the policy
//! alone (no I/O): the versions kept, the tags that keep them, and the
//! order blobs are swept in.

use super::*;

/// The order a sweep deletes in: the expired versions' records first,
/// then what they held. A sweep cut short then never leaves a stored
/// version record without one of its blobs (a version `verify` reaches
/// through the tombstone of its expired child, and must find whole).
pub(crate) fn sweep_order<'a>(
    blobs: &'a [ObjectId],
    records: &HashSet<ObjectId>,
) -> impl Iterator<Item = &'a ObjectId> {
    let (first, then): (Vec<&ObjectId>, Vec<&ObjectId>) =
        blobs.iter().partition(|b| records.contains(b));
    first.into_iter().chain(then)
}

/// Every ref's log, read once (see [`Repo::ref_logs`]).
pub(crate) struct RefLogs(pub(crate) Vec<(RefKind, String, Vec<tablepin_format::RefEntry>)>);

impl RefLogs {
    /// The refs of a kind as (name, version, live): the live ones at
    /// their heads, and those deleted after `deleted_since` (ms) at the
    /// version they named last.
    pub(crate) fn roots(
        &self,
        kind: RefKind,
        deleted_since: i64,
    ) -> Vec<(String, VersionId, bool)> {
        self.0
            .iter()
            .filter(|(k, _, _)| *k == kind)
            .filter_map(|(_, name, log)| {
                let head = log.last()?;
                match head.target {
                    Some(t) => Some((name.clone(), t, true)),
                    None if head.time_ms > deleted_since => {
                        super::super::last_named(log).map(|t| (name.clone(), t, false))
                    }
                    None => None,
                }
            })
            .collect()
    }

    /// Every version any entry of any log ever named.
    pub(crate) fn targets(&self) -> Vec<VersionId> {
        self.0
            .iter()
            .flat_map(|(_, _, log)| log.iter().filter_map(|e| e.target))
            .collect()
    }
}

/// A blob a kept version needs.
#[derive(Debug, Clone)]
pub(crate) struct Need {
    /// "data file", "deletion vector", "version record or snapshot".
    pub(crate) what: &'static str,
    /// A version that needs it.
    pub(crate) version: VersionId,
    /// Its table, or empty.
    pub(crate) table: String,
    /// Its size as recorded, where the listing can check it.
    pub(crate) bytes: Option<u64>,
}

impl Need {
    pub(crate) fn manifest(version: VersionId) -> Self {
        Need {
            what: "version record or snapshot",
            version,
            table: String::new(),
            bytes: None,
        }
    }
}

/// Refuses a gc when a blob a kept version needs is missing from the
/// listing or has another size than its snapshot records: a repository
/// with damage is left as it is, for `verify` to report and a person to
/// repair, rather than swept on a partial view.
pub(crate) fn check_needs(
    needs: &HashMap<ObjectId, Need>,
    blobs: &[tablepin_store::BlobMeta],
) -> Result<()> {
    let sizes: HashMap<ObjectId, u64> = blobs.iter().map(|b| (b.id, b.size)).collect();
    let mut problems: Vec<String> = needs
        .iter()
        .filter_map(|(id, n)| {
            let table = if n.table.is_empty() {
                String::new()
            } else {
                format!(", table '{}'", n.table)
            };
            let head = format!(
                "{} {} of version {}{table}",
                n.what,
                id.short(12),
                n.version.short(12)
            );
            match (sizes.get(id), n.bytes) {
                (None, _) => Some(format!("{head} is missing")),
                (Some(&got), Some(want)) if got != want => Some(format!(
                    "{head} has {got} bytes where its snapshot records {want}"
                )),
                _ => None,
            }
        })
        .collect();
    problems.sort();
    match problems.as_slice() {
        [] => Ok(()),
        [first, rest @ ..] => Err(Error::KeptBlobsDamaged {
            first: first.clone(),
            more: rest.len(),
        }),
    }
}

pub(crate) fn policy_text(p: &GcPolicy) -> String {
    let mut parts = Vec::new();
    if let Some(n) = p.keep_last {
        parts.push(format!("keep-last {n}"));
    }
    if let Some(d) = p.keep_within_ms {
        parts.push(format!("keep-within {}s", d / 1000));
    }
    parts.push(if p.keep_tags {
        "keep-tags".into()
    } else {
        "no-keep-tags".into()
    });
    format!("gc: {}", parts.join(", "))
}

/// The versions a policy keeps (pure): each branch's head, the versions
/// its rules keep along each branch's chain (newest first, with times),
/// every version when there are no rules, the targets of tags deleted
/// within the grace period, and tagged versions when tags are kept. Also
/// what becomes of each live tag, and the tags no longer readable.
pub(crate) fn kept_versions(
    chains: &BTreeMap<String, Vec<(VersionId, i64)>>,
    tag_roots: &[(String, VersionId, bool)],
    policy: &GcPolicy,
    now: i64,
) -> (BTreeSet<VersionId>, Vec<TagFate>, Vec<String>) {
    let rules = policy.keep_last.is_some() || policy.keep_within_ms.is_some();
    let mut kept: BTreeSet<VersionId> = BTreeSet::new();
    for chain in chains.values() {
        for (i, (id, t)) in chain.iter().enumerate() {
            let keep = i == 0
                || !rules
                || policy.keep_last.is_some_and(|n| i < n)
                || policy.keep_within_ms.is_some_and(|d| now - t <= d);
            if keep {
                kept.insert(*id);
            }
        }
    }
    // A tag deleted within the grace period keeps its version.
    for (_, target, live) in tag_roots {
        if !live {
            kept.insert(*target);
        }
    }
    let mut fates = Vec::new();
    let mut tags_deleted = Vec::new();
    for (name, target, _) in tag_roots.iter().filter(|r| r.2) {
        if policy.keep_tags || !rules {
            kept.insert(*target);
        }
        let readable = kept.contains(target);
        if !readable {
            tags_deleted.push(name.clone());
        }
        fates.push(TagFate {
            name: name.clone(),
            version: *target,
            readable,
        });
    }
    (kept, fates, tags_deleted)
}
