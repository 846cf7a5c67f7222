//! The lab's report: `report.md` (each figure beside the original
//! experiment's) and two charts, as SVG and PNG: bytes stored against commit
//! number (log scale), and bytes added per commit by kind of commit.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor;
use serde_json::Value;

use crate::run::{get, ORIGINAL};
use crate::LabError;

const LAYOUTS: [(&str, RGBColor); 6] = [
    ("copy", RGBColor(150, 150, 150)),
    ("month", RGBColor(31, 119, 180)),
    ("week", RGBColor(255, 127, 14)),
    ("changes", RGBColor(44, 160, 44)),
    ("tablepin_pyarrow", RGBColor(148, 103, 189)),
    ("tablepin", RGBColor(214, 39, 40)),
];

fn num(v: Option<&Value>) -> f64 {
    v.and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn mb(b: f64) -> String {
    format!("{:.1} MB", b / 1e6)
}

/// A tick of a log-scale bytes axis, in the unit that keeps it above 1
/// (a fixed unit read "0 MB" at 10 kB).
fn axis_bytes(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{} GB", round_tick(v / 1e9)),
        v if v >= 1e6 => format!("{} MB", round_tick(v / 1e6)),
        v if v >= 1e3 => format!("{} kB", round_tick(v / 1e3)),
        v => format!("{} B", round_tick(v)),
    }
}

fn round_tick(v: f64) -> String {
    if v >= 10.0 || (v - v.round()).abs() < 0.05 {
        format!("{:.0}", v)
    } else {
        format!("{:.1}", v)
    }
}

/// The Markdown report.
pub fn report(r: &Value) -> String {
    let mut s = String::new();
    head_and_figures(&mut s, r);
    bytes_and_files(&mut s, r);
    checks_and_returns(&mut s, r);
    as_of(&mut s, r);
    repository_and_retention(&mut s, r);
    playground_and_dvc(&mut s, r);
    s
}

/// The title, the data and the figures beside the original experiment's.
fn head_and_figures(s: &mut String, r: &Value) {
    let _ = writeln!(
        s,
        "# The Online Retail II experiment, reproduced by `tablepin lab`\n"
    );
    if r["sample"].as_bool() == Some(true) {
        let _ = writeln!(
            s,
            "**A sample** (`--sample`): the figures are the sample's, not the experiment's.\n"
        );
    }
    let _ = writeln!(
        s,
        "Data: `{}`. {} commits in {:.1} s, peak memory {:.0} MB.\n",
        r["data"].as_str().unwrap_or(""),
        r["commits"],
        num(r.get("seconds")),
        num(r.get("peak_rss_bytes")) / 1e6
    );
    let _ = writeln!(s, "## Figures beside the original experiment's\n");
    let _ = writeln!(
        s,
        "| figure | original | this run | ratio |\n|---|---:|---:|---:|"
    );
    for (key, orig) in ORIGINAL {
        let ours = num(get(r, key));
        let ratio = if *orig == 0.0 { f64::NAN } else { ours / orig };
        let fmt = |x: f64| {
            if x >= 1e6 && key.starts_with("stored") || key.ends_with("bytes") {
                mb(x)
            } else {
                format!("{x:.0}")
            }
        };
        let _ = writeln!(
            s,
            "| {key} | {} | {} | {} |",
            fmt(*orig),
            fmt(ours),
            if (ratio - 1.0).abs() < 1e-12 {
                "equal".to_string()
            } else {
                format!("{ratio:.3}")
            }
        );
    }
}

/// Bytes stored, bytes added by kind of commit, and files.
fn bytes_and_files(s: &mut String, r: &Value) {
    let _ = writeln!(s, "\n## Bytes stored for all {} versions\n", r["commits"]);
    let _ = writeln!(
        s,
        "| layout | stored | × last version's month files |\n|---|---:|---:|"
    );
    let last = num(get(r, "last_version.month_bytes"));
    for (l, _) in LAYOUTS {
        let b = num(get(r, &format!("stored.{l}")));
        let _ = writeln!(s, "| {l} | {} | {:.2} |", mb(b), b / last);
    }
    let _ = writeln!(
        s,
        "| copy_hashed | {} | {:.2} |",
        mb(num(get(r, "stored.copy_hashed"))),
        num(get(r, "stored.copy_hashed")) / last
    );
    let _ = writeln!(s, "\n## Bytes added by kind of commit\n");
    let _ = writeln!(s, "| kind | copy | month | week | changes | tablepin | tablepin (pyarrow settings) |\n|---|---:|---:|---:|---:|---:|---:|");
    if let Some(m) = r["added_by_kind"].as_object() {
        for (k, v) in m {
            let _ = writeln!(
                s,
                "| {k} | {} | {} | {} | {} | {} | {} |",
                mb(num(v.get("copy"))),
                mb(num(v.get("month"))),
                mb(num(v.get("week"))),
                mb(num(v.get("changes"))),
                mb(num(v.get("tablepin"))),
                mb(num(v.get("tablepin_pyarrow")))
            );
        }
    }
    let _ = writeln!(s, "\n## Files\n");
    let _ = writeln!(s, "| layout | files stored | files read for the last version | rows read |\n|---|---:|---:|---:|");
    for l in ["month", "week", "changes", "tablepin"] {
        let _ = writeln!(
            s,
            "| {l} | {} | {} | {} |",
            r["files_stored"][l], r["last_version_files"][l], r["last_version_rows_read"][l]
        );
    }
    let _ = writeln!(
        s,
        "\n(tablepin returns {} rows; its files also hold rows its deletion vectors hide.)",
        r["last_version_rows_read"]["tablepin_returned"]
    );
}

/// The checks each kind of commit fired, and the returns' ages.
fn checks_and_returns(s: &mut String, r: &Value) {
    let _ = writeln!(s, "\n## Checks fired, by kind of commit (reference: the lab's own; tablepin: its commit records)\n");
    let _ = writeln!(s, "| kind | commits | rows | schema | files | content | tablepin rows | schema | files | content |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if let (Some(refc), Some(tp)) = (
        r["checks"]["reference"].as_object(),
        r["checks"]["tablepin"].as_object(),
    ) {
        for (k, c) in refc {
            let t = &tp[k];
            let _ = writeln!(
                s,
                "| {k} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c["commits"],
                c["rows"],
                c["schema"],
                c["files"],
                c["content"],
                t["rows"],
                t["schema"],
                t["files"],
                t["content"]
            );
        }
    }
    let a = &r["return_ages"];
    let _ = writeln!(
        s,
        "\n## Returns\n\nMedian age {:.1} days (original 10.1), {:.1}% over 7 days, {:.1}% over 28 (original 26.5%), {:.1}% over 90 (original 9.4%), longest {:.1} days (original 655.9), {:.1}% into an earlier month's file (original 48.2%).",
        num(a.get("median_days")),
        100.0 * num(a.get("over_7")),
        100.0 * num(a.get("over_28")),
        100.0 * num(a.get("over_90")),
        num(a.get("max_days")),
        100.0 * num(a.get("earlier_month_file"))
    );
    let m = &r["month_files_rewritten_per_week"];
    let _ = writeln!(
        s,
        "Month files rewritten a week: median {} (original 7), max {} (original 20), {:.1}% of weeks more than one (original 96.2%).",
        m["median"], m["max"], 100.0 * num(m.get("share_over_one"))
    );
}

/// Each tag against today's lines, and tablepin's own diff of it.
fn as_of(s: &mut String, r: &Value) {
    let _ = writeln!(s, "\n## As of each tag\n\nToday's lines dated before the end of the tag's week, against the tag; then with the returns also filtered by date.\n");
    let _ = writeln!(s, "| week | tag lines | changed | only in tag | units (tag) | units (today) | changed, returns by date | units, returns by date |\n|---:|---:|---:|---:|---:|---:|---:|---:|");
    if let Some(rows) = r["as_of"].as_array() {
        for a in rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                a["week"],
                a["tag_lines"],
                a["changed"],
                a["only_in_tag"],
                a["units_returned_tag"],
                a["units_returned_today"],
                a["filtered_by_date"]["changed"],
                a["filtered_by_date"]["units_returned_today"]
            );
        }
    }
    let _ = writeln!(s, "\ntablepin's own diff of each tag against the last version (`Repo::diff`, as `tablepin diff week-N main sales` runs it) finds the same lines, reading only what the two versions do not share:\n");
    let _ = writeln!(s, "| week | modified (all in `returned`) | removed | added | data files read | shared, not read |\n|---:|---:|---:|---:|---:|---:|");
    if let Some(rows) = r["as_of"].as_array() {
        for a in rows {
            let d = &a["tablepin_diff"];
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                a["week"],
                d["modified"],
                d["removed"],
                d["added"],
                d["files_read"],
                d["files_shared"]
            );
        }
    }
}

/// The repository left behind, the tags read back, retention and erasure.
fn repository_and_retention(s: &mut String, r: &Value) {
    let _ = writeln!(s, "\n## The repository\n\nThe experiment's tablepin repository is left in `{}/` ({} versions, the {} tags, the customer erased from all of them), to explore:\n\n```sh\ntablepin --repo OUT/{0} log\ntablepin --repo OUT/{0} show week-51\ntablepin --repo OUT/{0} diff week-51 main sales --stat\ntablepin --repo OUT/{0} sql 'SELECT Country, sum(returned) FROM \"sales@week-51\" GROUP BY Country ORDER BY 2 DESC LIMIT 5'\ntablepin --repo OUT/{0} export week-51 sales -o week-51.parquet\n```\n\n(OUT is the folder given to `--out`.)", r["repository"].as_str().unwrap_or("repo"), r["commits"], tag_count(r));
    let _ = writeln!(s, "\n## Tags read back\n");
    if let Some(o) = r["tags_read_back_of"].as_object() {
        for (k, v) in o {
            let _ = writeln!(s, "- {k}: {} of {} exact", v["exact"], v["of"]);
        }
    }
    let _ = writeln!(s, "\n## Retention at the end\n");
    let _ = writeln!(s, "| layout | rule | bytes kept | tags readable | files holding the erased customer |\n|---|---|---:|---:|---:|");
    if let Some(o) = r["retention"].as_object() {
        for (layout, rules) in o {
            if let Some(rules) = rules.as_object() {
                for (rule, v) in rules {
                    let holding = v
                        .get("files_holding_erased")
                        .or_else(|| v.get("blobs_holding_erased"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let _ = writeln!(
                        s,
                        "| {layout} | {rule} | {} | {} of {} | {} |",
                        mb(num(v.get("bytes"))),
                        v["tags_readable"],
                        tag_count(r),
                        holding
                    );
                }
            }
        }
    }
    let _ = writeln!(s, "\ntablepin's rows are after `tablepin erase` removed the customer from every kept version; its gc ran for real on a copy of the repository per rule.\n");
    let _ = writeln!(
        s,
        "Purge of the reference layouts (keeping the last 4 and the tags): "
    );
    if let Some(o) = r["purge"].as_object() {
        for (k, v) in o {
            let _ = writeln!(
                s,
                "- {k}: {} files rewritten, {} written",
                v["files_rewritten"],
                mb(num(v.get("bytes_written")))
            );
        }
    }
    let e = &r["erasure"]["tablepin"];
    let _ = writeln!(
        s,
        "- tablepin erase: {} rows removed, {} versions replaced, {} blobs deleted, {} written, {:.2} s",
        e["rows_removed"], e["versions_replaced"], e["blobs_deleted"], mb(num(e.get("bytes_written"))), num(e.get("seconds"))
    );
    let _ = writeln!(
        s,
        "\n![bytes stored](stored.svg)\n\n![bytes added by kind](added_by_kind.svg)"
    );
}

/// The report's sections on the playground page and the DVC check.
fn playground_and_dvc(s: &mut String, r: &Value) {
    let p = &r["playground"];
    let _ = writeln!(
        s,
        "\n## Try your own retention rule\n\nOpen [`{}`]({}) in a browser ({} bytes, no network): every layout's \
         file sizes and each version's files, a box that takes rules such as `keep(last(4)) | keep(TAGS)` or \
         `keep(range(0, VERSIONS, 4))`, and what each layout keeps. Its arithmetic agreed with the retention \
         figures above on {} figures before it was written; {} of them were measured, not computed: \
         tablepin's after a real `gc`, each reference layout's on disk after its files were deleted \
         by the rule and the rest counted and hashed.",
        p["file"].as_str().unwrap_or(""),
        p["file"].as_str().unwrap_or(""),
        p["bytes"],
        p["presets_checked"],
        p["presets_independent"]
    );
    let d = &r["dvc"];
    if d.is_null() {
        let _ = writeln!(
            s,
            "\n## Real DVC\n\nNot run (`tablepin lab --dvc` versions the month layout with the `dvc` command)."
        );
        return;
    }
    let _ = writeln!(
        s,
        "\n## Real DVC\n\n`dvc add` and `dvc push` of each of the {} versions' month files to a local remote \
         ({:.0} s in `dvc`): the remote holds {} files of {} bytes, the month layout {} files of {} bytes \
         (the original experiment: 816 files, 431,946,842 bytes), plus {} folder listings of {} bytes.",
        d["versions"],
        num(d.get("dvc_seconds")),
        d["remote_files"],
        d["remote_bytes"],
        d["month_files"],
        d["month_bytes"],
        d["listings"],
        d["listing_bytes"]
    );
}

/// Writes both charts as SVG and PNG.
pub fn charts(out: &Path, r: &Value) -> Result<(), LabError> {
    let err = |e: String| LabError::Output {
        path: out.display().to_string(),
        message: e,
    };
    {
        let p = out.join("stored.svg");
        stored_chart(SVGBackend::new(&p, (900, 560)).into_drawing_area(), r).map_err(err)?;
        let p = out.join("stored.png");
        stored_chart(BitMapBackend::new(&p, (900, 560)).into_drawing_area(), r).map_err(err)?;
        let p = out.join("added_by_kind.svg");
        kind_chart(SVGBackend::new(&p, (900, 560)).into_drawing_area(), r).map_err(err)?;
        let p = out.join("added_by_kind.png");
        kind_chart(BitMapBackend::new(&p, (900, 560)).into_drawing_area(), r).map_err(err)?;
    }
    Ok(())
}

fn stored_chart<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    r: &Value,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let series: Vec<(&str, RGBColor, Vec<f64>)> = LAYOUTS
        .iter()
        .map(|(l, c)| {
            let v = r["series"][l]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            (*l, *c, v)
        })
        .collect();
    let n = series.iter().map(|s| s.2.len()).max().unwrap_or(1);
    let max = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&area)
        .caption("Bytes stored against commit number", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(1usize..n, (1e4f64..max * 2.0).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("commit")
        .y_desc("bytes stored")
        .y_label_formatter(&|v| axis_bytes(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (name, color, v) in series {
        let c = color;
        chart
            .draw_series(LineSeries::new(
                v.iter().enumerate().map(|(i, b)| (i + 1, b.max(1e4))),
                c.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    area.present().map_err(|e| e.to_string())
}

fn kind_chart<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    r: &Value,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let kinds: Vec<(String, Value)> = r["added_by_kind"]
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let commits_of = |k: &str| -> f64 {
        r["per_commit"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|c| {
                        crate::run::get(c, "kind")
                            .and_then(Value::as_str)
                            .map(|s| s.replace('_', " "))
                            == Some(k.to_string())
                            || kind_name(c) == k
                    })
                    .count() as f64
            })
            .unwrap_or(1.0)
            .max(1.0)
    };
    let groups = kinds.len().max(1);
    let per = LAYOUTS.len();
    let mut chart = ChartBuilder::on(&area)
        .caption(
            "Bytes added per commit, by kind of commit",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..(groups * (per + 1)) as f64, (1e2f64..1e9).log_scale())
        .map_err(|e| e.to_string())?;
    let labels: Vec<String> = kinds.iter().map(|k| k.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Group names are drawn below the axis, one under each group:
        // plotters' evenly spaced ticks fell under 2 of the 7.
        .x_labels(0)
        .y_desc("bytes added per commit (mean)")
        .y_label_formatter(&|v| axis_bytes(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    let font = ("sans-serif", 14)
        .into_font()
        .color(&BLACK)
        .pos(text_anchor::Pos::new(
            text_anchor::HPos::Center,
            text_anchor::VPos::Top,
        ));
    for (g, label) in labels.iter().enumerate() {
        let middle = (g * (per + 1)) as f64 + per as f64 / 2.0;
        let (x, y) = chart.backend_coord(&(middle, 100.0));
        area.draw(&Text::new(label.clone(), (x, y + 8), font.clone()))
            .map_err(|e| e.to_string())?;
    }
    for (li, (layout, color)) in LAYOUTS.iter().enumerate() {
        let c = *color;
        let bars: Vec<Rectangle<(f64, f64)>> = kinds
            .iter()
            .enumerate()
            .map(|(g, (k, v))| {
                let x0 = (g * (per + 1) + li) as f64;
                let y = (num(v.get(*layout)) / commits_of(k)).max(100.0);
                Rectangle::new([(x0, 100.0), (x0 + 0.9, y)], c.filled())
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(*layout)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    area.present().map_err(|e| e.to_string())
}

fn kind_name(c: &Value) -> &'static str {
    match c["kind"].as_str().unwrap_or("") {
        "first" => "first",
        "weekly" => "weekly",
        "lines_only" => "week 70 lines",
        "late_returns" => "late returns",
        "written_again" => "written again",
        "another_order" => "another order",
        "erasure" => "erasure",
        _ => "",
    }
}

/// The tags the run made (eight on the full data, fewer on a sample).
fn tag_count(r: &Value) -> usize {
    r["tags"].as_array().map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_ticks_never_read_zero() {
        // A fixed "MB" unit printed 10 kB as "0 MB" and 100 B as "0 kB".
        let ticks: Vec<String> = [1e2, 1e3, 1e4, 2.5e6, 1e8, 1e9]
            .into_iter()
            .map(axis_bytes)
            .collect();
        assert_eq!(
            ticks,
            ["100 B", "1 kB", "10 kB", "2.5 MB", "100 MB", "1 GB"]
        );
    }
}
