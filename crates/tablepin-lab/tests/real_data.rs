//! An independent check of the lab on the real Online Retail II data: the
//! returns, the as-of figures and the files the month, week and changes
//! layouts store, derived a second way from plain per-line records, sharing nothing
//! with the lab but the file reader.
//!
//! Needs the data: `TABLEPIN_LAB_DATA`, else `../shared/data/` beside the
//! repository (where CI has it). Without it the test fails in CI and
//! elsewhere says it did not run (`scripts/test.sh` counts it skipped).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::PathBuf;

use arrow::array::Array;

fn data() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TABLEPIN_LAB_DATA") {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/online_retail_II.csv.gz");
    p.exists().then_some(p)
}

/// A sale's place in event order: time, 0 (sales sort before
/// cancellations of the same minute), line.
type Event = (i64, u8, usize);

/// One line as a plain record.
struct Rec {
    cancel: bool,
    stock: String,
    qty: i64,
    t: i64,
    customer: Option<u64>,
}

#[test]
fn returns_and_as_of_agree_when_derived_a_second_way() {
    let Some(path) = data() else {
        tablepin::store::gate::not_run(
            "returns_and_as_of_agree_when_derived_a_second_way",
            "the Online Retail II data is missing (set TABLEPIN_LAB_DATA or put it in ../shared/data/)",
        )
        .unwrap();
        return;
    };
    let l = tablepin_lab::data::load(&path).unwrap();
    let recs: Vec<Rec> = (0..l.len())
        .map(|i| Rec {
            cancel: l.invoice.value(i).starts_with('C'),
            stock: l.stock.value(i).to_string(),
            qty: l.quantity.value(i),
            t: l.time[i],
            customer: (!l.customer.is_null(i)).then(|| l.customer.value(i) as u64),
        })
        .collect();

    // Second way: per (customer, product), that customer's sales of that
    // product in event order; each cancellation takes, by binary search, the
    // last sale strictly before it in (time, sale-before-cancel, line) order.
    let mut sales: HashMap<(u64, &str), Vec<Event>> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if let (false, Some(c)) = (r.cancel, r.customer) {
            sales
                .entry((c, r.stock.as_str()))
                .or_default()
                .push((r.t, 0, i));
        }
    }
    for v in sales.values_mut() {
        v.sort_unstable();
    }
    let mut mine: Vec<(usize, usize, i64)> = Vec::new();
    let mut nothing = 0;
    for (i, r) in recs.iter().enumerate() {
        if !r.cancel {
            continue;
        }
        let hit = r.customer.and_then(|c| {
            let v = sales.get(&(c, r.stock.as_str()))?;
            let k = v.partition_point(|s| *s < (r.t, 1, i));
            k.checked_sub(1).map(|k| v[k].2)
        });
        match hit {
            Some(sale) => mine.push((i, sale, -r.qty)),
            None => nothing += 1,
        }
    }
    assert_eq!(recs.iter().filter(|r| !r.cancel).count(), 1_047_877);
    assert_eq!(recs.iter().filter(|r| r.cancel).count(), 19_494);
    assert_eq!(mine.len(), 16_675);
    assert_eq!(nothing, 2_819);

    // The lab's derivation agrees return for return.
    let d = tablepin_lab::experiment::derive(&l);
    let mut theirs: Vec<(usize, usize, i64)> = d
        .returns
        .iter()
        .map(|r| (r.cancel as usize, r.sale as usize, r.units))
        .collect();
    theirs.sort_unstable();
    mine.sort_unstable();
    assert_eq!(mine, theirs);

    // As of week 51: the tag against today's table (customer 17388 erased).
    let epoch = 1_259_625_600i64;
    let week = |t: i64| (t - epoch).div_euclid(7 * 86_400);
    let end = epoch + 52 * 7 * 86_400;
    let mut ret_tag = vec![0i64; recs.len()];
    let mut ret_today = vec![0i64; recs.len()];
    for &(c, s, u) in &mine {
        ret_today[s] += u;
        if week(recs[c].t) <= 51 {
            ret_tag[s] += u;
        }
    }
    let erased = |i: usize| recs[i].customer == Some(17388);
    let (mut tag_lines, mut changed, mut gone) = (0, 0, 0);
    for (i, r) in recs.iter().enumerate() {
        if r.cancel || week(r.t) > 51 {
            continue;
        }
        tag_lines += 1;
        if erased(i) {
            gone += 1;
        } else if ret_today[i] != ret_tag[i] {
            changed += 1;
        }
        assert!(r.t < end);
    }
    assert_eq!(tag_lines, 490_766);
    assert_eq!(changed, 911);
    assert_eq!(gone, 42);
    assert_eq!(
        recs.iter()
            .enumerate()
            .filter(|(i, r)| !r.cancel && erased(*i))
            .count(),
        57
    );

    // Files the month and week layouts store, counted a second way: a
    // layout writes a file again whenever a commit changes a row in it, so
    // its files are, commit by commit, the partitions the commit touches.
    // Weekly commits touch the partitions of the week's new lines and of the
    // sales its returns change (week 70 as two commits: lines, then
    // returns); after week 60 every partition is written in another order;
    // after week 95 the erased customer's partitions are rewritten.
    let month = |t: i64| {
        let d = chrono::DateTime::from_timestamp(t, 0).unwrap();
        chrono::Datelike::year(&d) as i64 * 12 + chrono::Datelike::month0(&d) as i64
    };
    let mut returns_by_week: HashMap<i64, Vec<usize>> = HashMap::new();
    for &(c, s, _) in &mine {
        returns_by_week.entry(week(recs[c].t)).or_default().push(s);
    }
    let mut lines_by_week: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if !r.cancel {
            lines_by_week.entry(week(r.t)).or_default().push(i);
        }
    }
    for (name, part, expect) in [
        ("month", &month as &dyn Fn(i64) -> i64, 816usize),
        ("week", &week, 1_880),
    ] {
        let mut present = vec![false; recs.len()];
        let mut written = 0usize;
        let commit = |lines: &[usize], sales: &[usize], present: &mut Vec<bool>| -> usize {
            let mut touched: Vec<i64> = Vec::new();
            for &i in lines {
                present[i] = true;
                touched.push(part(recs[i].t));
            }
            touched.extend(
                sales
                    .iter()
                    .filter(|s| present[**s])
                    .map(|s| part(recs[*s].t)),
            );
            touched.sort_unstable();
            touched.dedup();
            touched.len()
        };
        let last_week = recs.iter().map(|r| week(r.t)).max().unwrap();
        for w in 0..=last_week {
            let lines = lines_by_week.get(&w).map_or(&[][..], Vec::as_slice);
            let sales = returns_by_week.get(&w).map_or(&[][..], Vec::as_slice);
            if w == 70 {
                written += commit(lines, &[], &mut present);
                written += commit(&[], sales, &mut present);
            } else {
                written += commit(lines, sales, &mut present);
            }
            if w == 60 {
                let all: Vec<usize> = (0..recs.len()).filter(|i| present[*i]).collect();
                let mut parts: Vec<i64> = all.iter().map(|i| part(recs[*i].t)).collect();
                parts.sort_unstable();
                parts.dedup();
                written += parts.len();
            }
            if w == 95 {
                let mut parts: Vec<i64> = (0..recs.len())
                    .filter(|i| present[*i] && erased(*i))
                    .map(|i| part(recs[i].t))
                    .collect();
                parts.sort_unstable();
                parts.dedup();
                written += parts.len();
                for (i, p) in present.iter_mut().enumerate() {
                    if erased(i) {
                        *p = false;
                    }
                }
            }
        }
        assert_eq!(written, expect, "files the {name} layout stores");
    }

    // The changes layout writes each week's new lines once, and one change
    // file per commit that changes lines of earlier commits (the erasure's
    // too). After week 60 every file is written again in the other order,
    // which stores a new file only where that order differs.
    let key = |i: &usize| {
        let r = &recs[*i];
        (
            r.customer.is_none(),
            r.customer.unwrap_or(0),
            r.stock.as_str(),
        )
    };
    let mut files: Vec<Vec<usize>> = Vec::new();
    let last_week = recs.iter().map(|r| week(r.t)).max().unwrap();
    for w in 0..=last_week {
        if let Some(lines) = lines_by_week.get(&w) {
            files.push(lines.clone());
        }
        let mut changed: Vec<usize> = returns_by_week
            .get(&w)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .copied()
            .filter(|s| w == 70 || week(recs[*s].t) < w)
            .filter(|s| !(w > 95 && erased(*s)))
            .collect();
        changed.sort_unstable();
        changed.dedup();
        if !changed.is_empty() {
            files.push(changed);
        }
        if w == 95 {
            files.push((0..recs.len()).filter(|i| erased(*i)).collect());
        }
        if w == 60 {
            let resorted: Vec<Vec<usize>> = files
                .iter()
                .filter_map(|f| {
                    let mut sorted = f.clone();
                    sorted.sort_by_key(key);
                    (sorted != *f).then_some(sorted)
                })
                .collect();
            files.extend(resorted);
        }
    }
    let written = files.len();
    assert_eq!(written, 329, "files the changes layout stores");
}
