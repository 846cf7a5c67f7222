//! The history the page draws: which lane each version sits on. Decided
//! from the versions' parents alone (no I/O).

use std::collections::HashMap;

use tablepin::VersionId;

/// The lane of each version: a branch's first-parent line is its lane,
/// the branches taken in the order given (main first), so a version two
/// branches share sits on the first one's lane. Versions no branch's
/// first parents reach (a merged branch's work, after the branch was
/// deleted) sit on one lane past the branches'.
pub fn lanes(
    heads: &[VersionId],
    parents: &HashMap<VersionId, Vec<VersionId>>,
    newest_first: &[VersionId],
) -> HashMap<VersionId, usize> {
    let mut lane: HashMap<VersionId, usize> = HashMap::new();
    // Places `start` and its first parents on lane `n`, up to a version
    // placed already or not listed.
    let mut walk = |start: VersionId, n: usize| {
        let mut at = Some(start);
        while let Some(id) = at {
            if lane.contains_key(&id) || !parents.contains_key(&id) {
                break;
            }
            lane.insert(id, n);
            at = parents.get(&id).and_then(|p| p.first()).copied();
        }
    };
    for (i, head) in heads.iter().enumerate() {
        walk(*head, i);
    }
    // What is left is a second parent's line: one lane past the branches,
    // as `log --graph` opens one.
    for id in newest_first {
        walk(*id, heads.len());
    }
    lane
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablepin::format::ObjectId;

    fn v(n: u8) -> VersionId {
        VersionId(ObjectId::of(&[n]))
    }

    #[test]
    fn each_branch_has_its_lane_and_shared_versions_sit_on_the_first() {
        // main: 1 <- 2 <- 4 <- 6 (6 merges 5); side: 2 <- 3 <- 5.
        let parents: HashMap<_, _> = [
            (v(1), vec![]),
            (v(2), vec![v(1)]),
            (v(3), vec![v(2)]),
            (v(4), vec![v(2)]),
            (v(5), vec![v(3)]),
            (v(6), vec![v(4), v(5)]),
        ]
        .into_iter()
        .collect();
        let order: Vec<_> = [6, 5, 4, 3, 2, 1].into_iter().map(v).collect();
        let both = lanes(&[v(6), v(5)], &parents, &order);
        let got: Vec<usize> = [1, 2, 3, 4, 5, 6]
            .into_iter()
            .map(|n| both[&v(n)])
            .collect();
        assert_eq!(got, [0, 0, 1, 0, 1, 0]);
        // The side branch deleted after the merge: its work gets a lane of
        // its own, past main's.
        let main_only = lanes(&[v(6)], &parents, &order);
        let got: Vec<usize> = [1, 2, 3, 4, 5, 6]
            .into_iter()
            .map(|n| main_only[&v(n)])
            .collect();
        assert_eq!(got, [0, 0, 1, 0, 1, 0]);
    }

    #[test]
    fn a_version_outside_the_listing_ends_a_lane() {
        // 2's parent 1 expired and is not listed.
        let parents: HashMap<_, _> = [(v(2), vec![v(1)]), (v(3), vec![v(2)])]
            .into_iter()
            .collect();
        let l = lanes(&[v(3)], &parents, &[v(3), v(2)]);
        assert_eq!((l[&v(3)], l[&v(2)], l.get(&v(1))), (0, 0, None));
    }
}
