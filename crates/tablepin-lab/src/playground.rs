//! The retention playground: one self-contained page (`playground.html`)
//! where a reader tries retention rules of their own on the experiment's
//! real file sizes.
//!
//! The page holds no data, only sizes: every file each layout stored (its
//! bytes, and whether it holds a line of the erased customer), each
//! version's files, and the tags. It parses rules itself (a small
//! expression language, no `eval`) and adds up what a rule keeps exactly
//! as [`Playground::kept`] does here; the lab checks this function against
//! the retention figures of `results.json` before it writes the page.
//!
//! Encoding: a layout's files are numbered in the order versions first
//! name them, so a version is its predecessor minus the files it dropped,
//! plus files named before and named again, plus a count of new files
//! (always the next numbers). The month, week, changes and tablepin
//! layouts of 110 versions fit in a few tens of kilobytes this way.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{json, Value};
use tablepin_format::ObjectId;

use crate::LabError;

/// The page's file name in the lab's output folder.
pub const PLAYGROUND: &str = "playground.html";

/// The page, with `__PLAYGROUND_DATA__` where the data goes.
const PAGE: &str = include_str!("playground.html");

/// One layout: its stored files and each version's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The layout's name, as in `results.json`.
    pub name: &'static str,
    /// Each file's bytes, by file number.
    pub sizes: Vec<u64>,
    /// Whether each file holds a line of the erased customer.
    pub holding: Vec<bool>,
    /// Each version's file numbers, sorted.
    pub versions: Vec<Vec<u32>>,
}

impl Layout {
    /// Numbers the files in the order the versions first name them.
    /// `size` gives a file's stored bytes (a file without one is an
    /// error: the page would count it as free), `holds` whether it holds
    /// a line of the erased customer.
    pub fn new(
        name: &'static str,
        versions: &[Vec<ObjectId>],
        size: impl Fn(&ObjectId) -> Option<u64>,
        holds: impl Fn(&ObjectId) -> bool,
    ) -> Result<Self, LabError> {
        let mut number: HashMap<ObjectId, u32> = HashMap::new();
        let mut out = Layout {
            name,
            sizes: Vec::new(),
            holding: Vec::new(),
            versions: Vec::with_capacity(versions.len()),
        };
        for files in versions {
            let mut v = Vec::with_capacity(files.len());
            for id in files {
                let n = match number.get(id) {
                    Some(&n) => n,
                    None => {
                        let bytes = size(id).ok_or_else(|| {
                            LabError::Other(format!(
                                "playground: the {name} layout's file {} has no stored size",
                                id.short(12)
                            ))
                        })?;
                        let n = out.sizes.len() as u32;
                        number.insert(*id, n);
                        out.sizes.push(bytes);
                        out.holding.push(holds(id));
                        n
                    }
                };
                v.push(n);
            }
            v.sort_unstable();
            v.dedup();
            out.versions.push(v);
        }
        Ok(out)
    }

    /// Each version as (new files, files dropped, files named again).
    fn deltas(&self) -> Vec<(u32, Vec<u32>, Vec<u32>)> {
        let mut seen = 0u32;
        let mut prev: BTreeSet<u32> = BTreeSet::new();
        let mut out = Vec::with_capacity(self.versions.len());
        for v in &self.versions {
            let cur: BTreeSet<u32> = v.iter().copied().collect();
            let dropped = prev.difference(&cur).copied().collect();
            let again = cur
                .iter()
                .copied()
                .filter(|n| *n < seen && !prev.contains(n))
                .collect();
            let new = cur.iter().filter(|n| **n >= seen).count() as u32;
            seen += new;
            out.push((new, dropped, again));
            prev = cur;
        }
        out
    }

    /// What keeping `versions` keeps of this layout.
    fn kept(&self, versions: &BTreeSet<usize>, tags: &[(String, usize)]) -> Kept {
        let mut keep = vec![false; self.sizes.len()];
        for &v in versions {
            for &f in self.versions.get(v).map_or(&[][..], |f| &f[..]) {
                keep[f as usize] = true;
            }
        }
        let kept = || (0..keep.len()).filter(|&f| keep[f]);
        Kept {
            bytes: kept().map(|f| self.sizes[f]).sum(),
            files: kept().count() as u64,
            tags_readable: tags
                .iter()
                .filter(|(_, v)| {
                    self.versions
                        .get(*v)
                        .is_some_and(|files| files.iter().all(|f| keep[*f as usize]))
                })
                .count() as u64,
            holding: kept().filter(|&f| self.holding[f]).count() as u64,
        }
    }

    /// "copy": every version a whole copy of this layout's files.
    fn copied(&self, versions: &BTreeSet<usize>, tags: &[(String, usize)]) -> Kept {
        let files = || {
            versions
                .iter()
                .filter_map(|&v| self.versions.get(v))
                .flatten()
        };
        Kept {
            bytes: files().map(|&f| self.sizes[f as usize]).sum(),
            files: files().count() as u64,
            tags_readable: tags.iter().filter(|(_, v)| versions.contains(v)).count() as u64,
            holding: files().filter(|&&f| self.holding[f as usize]).count() as u64,
        }
    }
}

/// What a rule keeps of one layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// Bytes of the files kept.
    pub bytes: u64,
    /// Files kept.
    pub files: u64,
    /// Tags whose every file is kept.
    pub tags_readable: u64,
    /// Files kept that hold a line of the erased customer.
    pub holding: u64,
}

/// The page's data.
#[derive(Debug, Clone)]
pub struct Playground {
    /// How many versions there are (numbered 0 to `versions - 1`).
    pub versions: usize,
    /// Each tag and its version's number.
    pub tags: Vec<(String, usize)>,
    /// The layouts, "month" first (the "copy" layout is derived from it).
    pub layouts: Vec<Layout>,
}

impl Playground {
    /// What keeping `versions` keeps, by layout; "copy" (every version a
    /// whole copy of its month files) comes from the month layout.
    pub fn kept(&self, versions: &BTreeSet<usize>) -> BTreeMap<&'static str, Kept> {
        let mut out = BTreeMap::new();
        for l in &self.layouts {
            if l.name == "month" {
                out.insert("copy", l.copied(versions, &self.tags));
            }
            out.insert(l.name, l.kept(versions, &self.tags));
        }
        out
    }

    /// The page's data as JSON (see the module docs for the encoding).
    pub fn data(&self) -> Value {
        let layouts: Vec<Value> = self
            .layouts
            .iter()
            .map(|l| {
                json!({
                    "name": l.name,
                    "sizes": l.sizes,
                    "holding": (0..l.holding.len()).filter(|&f| l.holding[f]).collect::<Vec<_>>(),
                    "versions": l.deltas().into_iter().map(|(n, d, a)| json!([n, d, a])).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({"versions": self.versions, "tags": self.tags, "layouts": layouts})
    }

    /// The whole page: the template with the data in it.
    pub fn html(&self) -> String {
        // The data sits in a <script> element: no '<' may open a tag there.
        let data = self.data().to_string().replace('<', "\\u003c");
        PAGE.replace("__PLAYGROUND_DATA__", &data)
    }
}

/// How many of the page's figures agreed with the measured retention, and
/// how many of those were measured independently of the page's arithmetic
/// (tablepin's real `gc`, and the reference layouts' files deleted and
/// counted on disk, `on_disk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresetCheck {
    pub agreed: u64,
    pub independent: u64,
}

/// Checks the page's arithmetic against the retention the lab measured
/// (`results.json`'s `retention`, by layout and rule): for every rule and
/// layout, the bytes, the tags still readable, the files holding the
/// erased customer and, for tablepin, the blobs `gc` left; for the
/// reference layouts also the bytes, files and readable tags measured on
/// disk (`on_disk`). The first figure that does not agree is an error.
pub fn check_presets(
    p: &Playground,
    rules: &[(&str, Vec<usize>)],
    retention: &serde_json::Map<String, Value>,
) -> Result<PresetCheck, LabError> {
    let mut c = PresetCheck {
        agreed: 0,
        independent: 0,
    };
    for (rule, versions) in rules {
        for (layout, k) in p.kept(&versions.iter().copied().collect()) {
            // (the field's path in the rule's entry, the page's figure,
            // measured independently of the page's arithmetic)
            let fields: &[(&str, u64, bool)] = match layout {
                "tablepin" => &[
                    ("bytes", k.bytes, true),
                    ("blobs", k.files, true),
                    ("tags_readable", k.tags_readable, true),
                    ("blobs_holding_erased", k.holding, true),
                ],
                _ => &[
                    ("bytes", k.bytes, false),
                    ("tags_readable", k.tags_readable, false),
                    ("files_holding_erased", k.holding, false),
                    ("on_disk/bytes", k.bytes, true),
                    ("on_disk/files", k.files, true),
                    ("on_disk/tags_readable", k.tags_readable, true),
                ],
            };
            let measured = retention.get(layout).and_then(|r| r.get(*rule));
            for (field, page, independent) in fields {
                let lab = measured
                    .and_then(|m| m.pointer(&format!("/{field}")))
                    .and_then(Value::as_u64);
                if lab != Some(*page) {
                    return Err(LabError::Other(format!(
                        "playground: keeping {rule}, the page counts {page} {field} for {layout}, the lab measured {}",
                        lab.map_or("nothing".into(), |n| n.to_string())
                    )));
                }
                c.agreed += 1;
                c.independent += u64::from(*independent);
            }
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::of(&[n])
    }

    fn layout(versions: &[&[u8]]) -> Layout {
        let v: Vec<Vec<ObjectId>> = versions
            .iter()
            .map(|v| v.iter().map(|&n| id(n)).collect())
            .collect();
        let size = |i: &ObjectId| (1..=9u8).find(|&n| id(n) == *i).map(|n| 10 * n as u64);
        Layout::new("month", &v, size, |i| *i == id(3)).unwrap()
    }

    /// Decodes the deltas as the page does.
    fn decode(l: &Layout) -> Vec<Vec<u32>> {
        let (mut cur, mut next, mut out) = (BTreeSet::new(), 0u32, Vec::new());
        for (new, dropped, again) in l.deltas() {
            for d in dropped {
                cur.remove(&d);
            }
            cur.extend(again);
            cur.extend(next..next + new);
            next += new;
            out.push(cur.iter().copied().collect());
        }
        out
    }

    #[test]
    fn deltas_decode_to_every_version() {
        // A file dropped and named again (3), one kept throughout (1).
        let l = layout(&[&[1, 2], &[1, 3], &[1, 2, 4], &[4, 1, 3], &[5]]);
        assert_eq!(decode(&l), l.versions);
        assert_eq!(l.sizes, vec![10, 20, 30, 40, 50]);
    }

    #[test]
    fn kept_counts_each_file_once_and_copy_every_time() {
        let l = layout(&[&[1, 2], &[1, 3], &[1, 3]]);
        let p = Playground {
            versions: 3,
            tags: vec![("t0".into(), 0), ("t2".into(), 2)],
            layouts: vec![l],
        };
        let k = p.kept(&BTreeSet::from([1, 2]));
        assert_eq!(
            k["month"],
            Kept {
                bytes: 40,
                files: 2,
                tags_readable: 1,
                holding: 1
            }
        );
        assert_eq!(
            k["copy"],
            Kept {
                bytes: 80,
                files: 4,
                tags_readable: 1,
                holding: 2
            }
        );
        assert_eq!(p.kept(&BTreeSet::new())["month"], Kept::default());
    }

    #[test]
    fn presets_are_checked_against_the_measured_retention() {
        let p = Playground {
            versions: 2,
            tags: vec![("t0".into(), 0)],
            layouts: vec![layout(&[&[1, 2], &[3]])],
        };
        let rules = [("all", vec![0, 1])];
        let measured = |bytes: u64, copy_holding: u64| {
            let disk = json!({"bytes": 60, "files": 3, "tags_readable": 1});
            json!({
                "month": {"all": {"bytes": bytes, "tags_readable": 1, "files_holding_erased": 1, "on_disk": disk}},
                "copy": {"all": {"bytes": 60, "tags_readable": 1, "files_holding_erased": copy_holding, "on_disk": disk}},
            })
        };
        let ok = measured(60, 1);
        assert_eq!(
            check_presets(&p, &rules, ok.as_object().unwrap()).unwrap(),
            PresetCheck {
                agreed: 12,
                independent: 6
            }
        );
        let off = measured(61, 1);
        let err = check_presets(&p, &rules, off.as_object().unwrap()).unwrap_err();
        assert!(err.to_string().contains("60 bytes for month"), "{err}");
        // The copies' files holding the customer are measured and checked
        // too (the report once gave none where the page gave a count).
        let off = measured(60, 2);
        let err = check_presets(&p, &rules, off.as_object().unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .contains("1 files_holding_erased for copy, the lab measured 2"),
            "{err}"
        );
        // So are the files measured on disk.
        let mut off = measured(60, 1);
        off["month"]["all"]["on_disk"]["files"] = json!(2);
        let err = check_presets(&p, &rules, off.as_object().unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .contains("3 on_disk/files for month, the lab measured 2"),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_a_size_is_an_error() {
        let v = vec![vec![id(1)]];
        let err = Layout::new("week", &v, |_| None, |_| false).unwrap_err();
        assert!(err.to_string().contains("week layout's file"), "{err}");
    }

    #[test]
    fn the_page_holds_the_data_and_no_tag_opens_in_it() {
        let p = Playground {
            versions: 1,
            tags: vec![("</script><b>".into(), 0)],
            layouts: vec![layout(&[&[1]])],
        };
        let html = p.html();
        assert!(!html.contains("__PLAYGROUND_DATA__"));
        assert!(!html.contains("</script><b>"));
        assert!(html.contains("\\u003c/script>\\u003cb>"));
    }
}
