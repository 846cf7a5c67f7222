//! `log --graph`: the lanes of a history drawn beside its lines, as git
//! draws them. Pure: versions and their parents in, text out.

use tablepin::VersionId;

/// One log line's graph: the column drawn before the line (`*` marks the
/// version on its lane, `|` every other open lane), and the lines drawn
/// after it: `\` where a merge opens a lane for its second parent, `/`
/// where a lane ends because its version was reached on another lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawn {
    pub line: String,
    pub after: Vec<String>,
}

fn render(lanes: &[Option<VersionId>], mark: impl Fn(usize) -> Option<char>) -> String {
    let mut s = String::new();
    for (i, l) in lanes.iter().enumerate() {
        let c = mark(i).unwrap_or(if l.is_some() { '|' } else { ' ' });
        s.push(c);
        s.push(' ');
    }
    s.trim_end().to_string()
}

/// The graph of `versions` (newest first, each before its parents), each
/// given with its parents.
pub fn draw(versions: &[(VersionId, Vec<VersionId>)]) -> Vec<Drawn> {
    let mut lanes: Vec<Option<VersionId>> = Vec::new();
    let mut out = Vec::with_capacity(versions.len());
    for (id, parents) in versions {
        let col = match lanes.iter().position(|l| *l == Some(*id)) {
            Some(c) => c,
            None => match lanes.iter().position(Option::is_none) {
                Some(free) => {
                    lanes[free] = Some(*id);
                    free
                }
                None => {
                    lanes.push(Some(*id));
                    lanes.len() - 1
                }
            },
        };
        let line = render(&lanes, |i| (i == col).then_some('*'));
        let mut after = Vec::new();
        // Lanes that waited for this version too end here.
        let joined: Vec<usize> = (0..lanes.len())
            .filter(|&j| j != col && lanes[j] == Some(*id))
            .collect();
        for j in joined.into_iter().rev() {
            after.push(render(&lanes, |i| (i == j).then_some('/')));
            lanes[j] = None;
        }
        lanes[col] = parents.first().copied();
        for p in parents.iter().skip(1) {
            if lanes.contains(&Some(*p)) {
                continue;
            }
            lanes.insert(col + 1, Some(*p));
            after.push(render(&lanes, |i| (i == col + 1).then_some('\\')));
        }
        while lanes.last() == Some(&None) {
            lanes.pop();
        }
        out.push(Drawn { line, after });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablepin::format::ObjectId;

    fn v(n: u8) -> VersionId {
        VersionId(ObjectId::of(&[n]))
    }

    #[test]
    fn a_merge_opens_a_lane_that_closes_at_the_common_ancestor() {
        // 5 merges 4 (main) and 3 (side); 4 and 3 both come from 2; 1 is
        // the root.
        let history = vec![
            (v(5), vec![v(4), v(3)]),
            (v(4), vec![v(2)]),
            (v(3), vec![v(2)]),
            (v(2), vec![v(1)]),
            (v(1), vec![]),
        ];
        let d = draw(&history);
        let shown: Vec<String> = d
            .iter()
            .flat_map(|d| std::iter::once(d.line.clone()).chain(d.after.clone()))
            .collect();
        assert_eq!(shown, ["*", "| \\", "* |", "| *", "* |", "| /", "*"]);
    }
}
