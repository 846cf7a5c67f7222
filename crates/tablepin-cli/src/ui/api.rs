//! The page's answers: each route's JSON, read from the repository as the
//! matching command's `--json` reads it (`log --graph`, `show`, `diff`,
//! `gc --dry-run`, `audit`), so the page and the commands cannot disagree.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use arrow::array::{RecordBatch, StringArray};
use serde_json::{json, Value};
use tablepin::{Diff, GcPolicy, LogEntry, LogOptions, RefKind, Repo, TableDiff, VersionId};

use super::history;
use super::route::{DiffQuery, RetentionQuery, Route};
use crate::commands::{rows_json, version_json};
use crate::output::json_value;

/// The diff a page of rows was last cut from: (old, new, table asked for).
type DiffKey = (VersionId, VersionId, Option<String>);

/// Answers the page's questions about one repository.
pub struct Answers<'a> {
    repo: &'a Repo,
    /// The last diff asked for: paging through it reads it once. One is
    /// kept, not every diff ever asked for.
    last_diff: Mutex<Option<(DiffKey, Arc<Diff>)>>,
}

impl<'a> Answers<'a> {
    pub fn new(repo: &'a Repo) -> Self {
        Answers {
            repo,
            last_diff: Mutex::new(None),
        }
    }

    /// A route's JSON; a failure is the repository's error, told as the
    /// command line tells it.
    pub async fn answer(&self, route: Route) -> Result<Value> {
        match route {
            Route::History => self.history().await,
            Route::Version { rev } => {
                let at = self.repo.snapshot(&rev).await?;
                json_value(&version_json(&at).await?)
            }
            Route::Diff(q) => self.diff(q).await,
            Route::Retention(q) => json_value(&self.repo.gc().plan(&policy(&q)?).await?),
            Route::Audit => json_value(&self.repo.erasure().audit().await?),
            Route::Asset(_) => Err(anyhow!("internal: an asset has no JSON answer")),
        }
    }

    /// Branches (main first), tags, and every version a branch reaches
    /// through any parent, newest first, each with its lane.
    async fn history(&self) -> Result<Value> {
        let mut branches = self.repo.refs().list(RefKind::Branch).await?;
        branches.sort_by_key(|b| (b.name != tablepin::DEFAULT_BRANCH, b.name.clone()));
        let tags = self.repo.refs().list(RefKind::Tag).await?;
        let opts = LogOptions {
            all_parents: true,
            ..LogOptions::default()
        };
        let mut seen = HashSet::new();
        let mut entries: Vec<LogEntry> = Vec::new();
        for b in &branches {
            if seen.contains(&b.target) {
                continue;
            }
            let log = self.repo.log(&b.name, &opts).await?;
            entries.extend(log.into_iter().filter(|e| seen.insert(e.id)));
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.time_ms));
        let parents: HashMap<_, _> = entries.iter().map(|e| (e.id, e.parents.clone())).collect();
        let order: Vec<_> = entries.iter().map(|e| e.id).collect();
        let heads: Vec<_> = branches.iter().map(|b| b.target).collect();
        let lane = history::lanes(&heads, &parents, &order);
        let mut versions = Vec::with_capacity(entries.len());
        for e in &entries {
            let mut v = serde_json::to_value(e)?;
            v["lane"] = json!(lane.get(&e.id).copied().unwrap_or(heads.len()));
            versions.push(v);
        }
        json_value(&json!({
            "repository": self.repo.store().location(),
            "branches": branches,
            "tags": tags,
            "versions": versions,
        }))
    }

    /// One page of one table's differing rows, with every table's counts.
    async fn diff(&self, q: DiffQuery) -> Result<Value> {
        let (old, new) = resolve_both(self.repo, &q.old, &q.new).await?;
        let key = (old, new, q.table.clone());
        let cached = self.cached(&key);
        let d = match cached {
            Some(d) => d,
            None => {
                let d = Arc::new(self.repo.diff(&old, &new, q.table.as_deref()).await?);
                if let Ok(mut last) = self.last_diff.lock() {
                    *last = Some((key, Arc::clone(&d)));
                }
                d
            }
        };
        // The table asked for, or the first with differing rows.
        let shown = match &q.table {
            Some(name) => d.tables.iter().find(|t| &t.table == name),
            None => d
                .tables
                .iter()
                .find(|t| t.rows.num_rows() > 0)
                .or(d.tables.first()),
        };
        let (total, rows, columns) = match shown {
            Some(t) => {
                let (total, rows) = page_of(t, q.kind.as_deref(), q.offset, q.limit)?;
                (total, rows, diff_columns(&t.rows))
            }
            None => (0, json!([]), Vec::new()),
        };
        json_value(&json!({
            "old": d.old, "new": d.new, "tables": d.tables,
            "table": shown.map(|t| &t.table), "key": shown.map(|t| &t.key),
            "columns": columns, "kind": q.kind.as_deref().unwrap_or("all"),
            "offset": q.offset, "limit": q.limit, "total": total, "rows": rows,
        }))
    }

    fn cached(&self, key: &DiffKey) -> Option<Arc<Diff>> {
        let last = self.last_diff.lock().ok()?;
        last.as_ref()
            .filter(|(k, _)| k == key)
            .map(|(_, d)| Arc::clone(d))
    }
}

async fn resolve_both(repo: &Repo, old: &str, new: &str) -> Result<(VersionId, VersionId)> {
    let (o, n) = tokio::join!(repo.resolve(old), repo.resolve(new));
    Ok((o?, n?))
}

/// `gc --dry-run`'s policy for a rule, with gc's default grace period.
fn policy(q: &RetentionQuery) -> Result<GcPolicy> {
    let grace = humantime::parse_duration(crate::cli::DEFAULT_GRACE)?;
    Ok(GcPolicy {
        keep_last: q.keep_last,
        keep_within_ms: q.keep_within_ms,
        keep_tags: q.keep_tags,
        grace_ms: i64::try_from(grace.as_millis())?,
        sole_writer: false,
        now_ms: None,
    })
}

/// The table's column names in a diff's rows (`from_C`, `to_C` pairs).
fn diff_columns(rows: &RecordBatch) -> Vec<String> {
    rows.schema()
        .fields()
        .iter()
        .skip(1)
        .step_by(2)
        .map(|f| f.name().trim_start_matches("from_").to_string())
        .collect()
}

/// Rows `offset..offset + limit` of a table's differing rows (of one kind
/// when given) as JSON, and how many there are in all.
fn page_of(
    t: &TableDiff,
    kind: Option<&str>,
    offset: usize,
    limit: usize,
) -> Result<(usize, Value)> {
    let rows = match kind {
        None => t.rows.clone(),
        Some(k) => {
            let mask =
                arrow::compute::kernels::cmp::eq(t.rows.column(0), &StringArray::new_scalar(k))?;
            arrow::compute::filter_record_batch(&t.rows, &mask)?
        }
    };
    let total = rows.num_rows();
    let start = offset.min(total);
    let page = rows.slice(start, limit.min(total - start));
    Ok((total, rows_json(std::slice::from_ref(&page))?))
}
