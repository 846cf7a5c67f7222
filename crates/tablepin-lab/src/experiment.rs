//! The experiment's rules: which lines are sales, which cancellations are
//! returns against which sale line, and the 110 commits over 106 weeks.
//!
//! Returns: events sorted by time, a sale before a cancellation in the same
//! minute, then by line id. Walking them, remember for each (customer,
//! product) the most recent sale line; a cancellation with a customer whose
//! (customer, product) has such a line is a return of `-Quantity` units
//! against that line. Commits: one per week (append the week's sale lines,
//! then apply its returns), plus the table written again after week 40, the
//! same rows in another order after week 60, week 70 split into lines and
//! returns, and the erasure of one customer after week 95.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, TimestampSecondArray, UInt32Array,
};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::Serialize;

use crate::data::{Lines, EPOCH};
use crate::LabError;

/// Seconds in a week.
pub const WEEK: i64 = 7 * 86_400;
/// The weeks whose last version is tagged.
pub const TAG_WEEKS: [i64; 8] = [12, 25, 38, 51, 64, 77, 90, 103];
/// The week written again after.
pub const AGAIN_AFTER: i64 = 40;
/// The week after which the rows are reordered.
pub const ORDER_AFTER: i64 = 60;
/// The week split into two commits.
pub const SPLIT_WEEK: i64 = 70;
/// The week after which a customer is erased.
pub const ERASE_AFTER: i64 = 95;

/// The week of a time.
pub fn week_of(t: i64) -> i64 {
    (t - EPOCH).div_euclid(WEEK)
}

/// The end of a week (exclusive).
pub fn week_end(w: i64) -> i64 {
    EPOCH + (w + 1) * WEEK
}

/// Year * 12 + month of a time.
pub fn month_of(t: i64) -> i64 {
    use chrono::Datelike;
    let d = chrono::DateTime::from_timestamp(t, 0).unwrap_or_default();
    i64::from(d.year()) * 12 + i64::from(d.month0())
}

/// A cancellation matched to a sale line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Return {
    pub cancel: u32,
    pub sale: u32,
    pub units: i64,
    pub time: i64,
}

/// Sales and returns derived from the lines.
#[derive(Debug, Clone)]
pub struct Derived {
    pub sales: Vec<u32>,
    pub cancellations: usize,
    pub returns: Vec<Return>,
    pub unmatched: usize,
}

/// Derives the returns (see the module docs).
pub fn derive(l: &Lines) -> Derived {
    let n = l.len();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| (l.time[i as usize], l.is_cancel(i as usize), i));
    let mut products: HashMap<&str, u32> = HashMap::new();
    let mut last: HashMap<(u64, u32), u32> = HashMap::new();
    let mut returns = Vec::new();
    let mut unmatched = 0;
    let mut cancellations = 0;
    for &i in &order {
        let iu = i as usize;
        let next = products.len() as u32;
        let p = *products.entry(l.stock.value(iu)).or_insert(next);
        let cust = if l.customer.is_null(iu) {
            None
        } else {
            Some(l.customer.value(iu).to_bits())
        };
        if l.is_cancel(iu) {
            cancellations += 1;
            match cust.and_then(|c| last.get(&(c, p))) {
                Some(&sale) => returns.push(Return {
                    cancel: i,
                    sale,
                    units: -l.quantity.value(iu),
                    time: l.time[iu],
                }),
                None => unmatched += 1,
            }
        } else if let Some(c) = cust {
            last.insert((c, p), i);
        }
    }
    let sales = (0..n as u32)
        .filter(|i| !l.is_cancel(*i as usize))
        .collect();
    Derived {
        sales,
        cancellations,
        returns,
        unmatched,
    }
}

use arrow::array::Array;

/// Kinds of commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    First,
    Weekly,
    LinesOnly,
    LateReturns,
    WrittenAgain,
    AnotherOrder,
    Erasure,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::First => "first",
            Kind::Weekly => "weekly",
            Kind::LinesOnly => "week 70 lines",
            Kind::LateReturns => "late returns",
            Kind::WrittenAgain => "written again",
            Kind::AnotherOrder => "another order",
            Kind::Erasure => "erasure",
        }
    }
}

/// One commit of the experiment.
#[derive(Debug, Clone)]
pub struct Commit {
    pub kind: Kind,
    pub week: i64,
    /// Sale lines appended.
    pub add: Vec<u32>,
    /// Returns applied (indices into `Derived::returns`).
    pub returns: Vec<usize>,
}

/// The 110 commits.
pub fn commits(l: &Lines, d: &Derived) -> Vec<Commit> {
    let last_week = d
        .sales
        .iter()
        .map(|&i| week_of(l.time[i as usize]))
        .max()
        .unwrap_or(0);
    let mut lines_by_week: Vec<Vec<u32>> = vec![Vec::new(); last_week as usize + 1];
    for &i in &d.sales {
        lines_by_week[week_of(l.time[i as usize]) as usize].push(i);
    }
    let mut returns_by_week: Vec<Vec<usize>> = vec![Vec::new(); last_week as usize + 1];
    for (k, r) in d.returns.iter().enumerate() {
        let w = week_of(r.time).clamp(0, last_week) as usize;
        returns_by_week[w].push(k);
    }
    let mut out = Vec::new();
    for w in 0..=last_week {
        let add = std::mem::take(&mut lines_by_week[w as usize]);
        let rets = std::mem::take(&mut returns_by_week[w as usize]);
        if w == SPLIT_WEEK {
            out.push(Commit {
                kind: Kind::LinesOnly,
                week: w,
                add,
                returns: vec![],
            });
            out.push(Commit {
                kind: Kind::LateReturns,
                week: w,
                add: vec![],
                returns: rets,
            });
        } else {
            let kind = if w == 0 { Kind::First } else { Kind::Weekly };
            out.push(Commit {
                kind,
                week: w,
                add,
                returns: rets,
            });
        }
        let special = match w {
            AGAIN_AFTER => Some(Kind::WrittenAgain),
            ORDER_AFTER => Some(Kind::AnotherOrder),
            ERASE_AFTER => Some(Kind::Erasure),
            _ => None,
        };
        if let Some(kind) = special {
            out.push(Commit {
                kind,
                week: w,
                add: vec![],
                returns: vec![],
            });
        }
    }
    out
}

/// What one commit did to the table.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// Lines appended.
    pub added: Vec<u32>,
    /// Lines present before whose `returned` changed, ascending.
    pub changed: Vec<u32>,
    /// Lines erased, ascending.
    pub erased: Vec<u32>,
    /// Every file is rewritten in the new order.
    pub reorder: bool,
}

/// The table as the commits leave it.
#[derive(Debug, Clone)]
pub struct State {
    pub present: Vec<bool>,
    pub returned: Vec<i64>,
    /// Table order: appended lines, in commit then line order.
    pub order: Vec<u32>,
    /// Files are kept sorted by customer (nulls last) then product.
    pub sorted: bool,
    pub rows: usize,
}

impl State {
    pub fn new(n: usize) -> Self {
        Self {
            present: vec![false; n],
            returned: vec![0; n],
            order: Vec::new(),
            sorted: false,
            rows: 0,
        }
    }

    /// Applies a commit; the erasure removes `customer`'s lines.
    pub fn apply(&mut self, l: &Lines, d: &Derived, c: &Commit, customer: f64) -> Delta {
        let mut delta = Delta::default();
        let mut was_present: Vec<u32> = Vec::new();
        for &i in &c.add {
            self.present[i as usize] = true;
            self.order.push(i);
            self.rows += 1;
        }
        delta.added = c.add.clone();
        let added: std::collections::HashSet<u32> = c.add.iter().copied().collect();
        for &k in &c.returns {
            let r = d.returns[k];
            if !self.present[r.sale as usize] {
                continue;
            }
            self.returned[r.sale as usize] += r.units;
            if !added.contains(&r.sale) {
                was_present.push(r.sale);
            }
        }
        was_present.sort_unstable();
        was_present.dedup();
        delta.changed = was_present;
        match c.kind {
            Kind::AnotherOrder => {
                self.sorted = true;
                delta.reorder = true;
                let keys = sort_keys(l);
                let mut pos: Vec<(SortKey<'_>, usize, u32)> = self
                    .order
                    .iter()
                    .enumerate()
                    .map(|(p, &i)| (keys(i), p, i))
                    .collect();
                pos.sort();
                self.order = pos.into_iter().map(|x| x.2).collect();
            }
            Kind::Erasure => {
                let mut erased = Vec::new();
                for &i in &self.order {
                    if !l.customer.is_null(i as usize) && l.customer.value(i as usize) == customer {
                        erased.push(i);
                    }
                }
                for &i in &erased {
                    self.present[i as usize] = false;
                }
                self.order.retain(|i| self.present[*i as usize]);
                self.rows -= erased.len();
                erased.sort_unstable();
                delta.erased = erased;
            }
            _ => {}
        }
        delta
    }
}

/// The sort key of the reorder: customer (nulls last), then product.
pub type SortKey<'a> = (bool, u64, &'a str);

/// The function giving a line's sort key.
pub fn sort_keys<'a>(l: &'a Lines) -> impl Fn(u32) -> SortKey<'a> + 'a {
    move |i| {
        let iu = i as usize;
        let null = l.customer.is_null(iu);
        // Customer ids are positive floats: their bits sort as they do.
        let c = if null {
            0
        } else {
            l.customer.value(iu).to_bits()
        };
        (null, c, l.stock.value(iu))
    }
}

/// Each line's rank in the reorder's key, equal keys sharing a rank, so
/// that a stable sort by rank is the stable sort by key. Computed once (one
/// sort of every line) instead of comparing text keys in every file's sort.
pub fn key_ranks(l: &Lines) -> &[u32] {
    l.key_rank.get_or_init(|| {
        let keys = sort_keys(l);
        let mut idx: Vec<u32> = (0..l.len() as u32).collect();
        idx.sort_unstable_by(|a, b| keys(*a).cmp(&keys(*b)));
        let mut rank = vec![0u32; l.len()];
        let mut r = 0u32;
        for (k, w) in idx.iter().enumerate() {
            if k > 0 && keys(idx[k - 1]) != keys(*w) {
                r += 1;
            }
            rank[*w as usize] = r;
        }
        rank
    })
}

/// Sorts lines by the reorder's key, keeping their order among equals.
pub fn sort_lines(l: &Lines, lines: &mut [u32]) {
    let rank = key_ranks(l);
    lines.sort_by_key(|&i| rank[i as usize]);
}

/// The schema of the sales table.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("line", DataType::Int64, false),
        Field::new("Invoice", DataType::Utf8, true),
        Field::new("StockCode", DataType::Utf8, true),
        Field::new("Description", DataType::Utf8, true),
        Field::new("Quantity", DataType::Int64, true),
        Field::new(
            "InvoiceDate",
            DataType::Timestamp(TimeUnit::Second, None),
            true,
        ),
        Field::new("Price", DataType::Float64, true),
        Field::new("Customer_ID", DataType::Float64, true),
        Field::new("Country", DataType::Utf8, true),
        Field::new("returned", DataType::Int64, true),
    ]))
}

/// The lines' columns as Arrow arrays, ready to `take` rows from.
pub struct Master {
    cols: Vec<ArrayRef>,
}

impl Master {
    pub fn new(l: &Lines) -> Self {
        let n = l.len() as i64;
        Self {
            cols: vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(l.invoice.clone()),
                Arc::new(l.stock.clone()),
                Arc::new(l.description.clone()),
                Arc::new(l.quantity.clone()),
                Arc::new(TimestampSecondArray::from(l.time.clone())),
                Arc::new(l.price.clone()),
                Arc::new(l.customer.clone()),
                Arc::new(l.country.clone()),
            ],
        }
    }

    /// Rows for these lines with these `returned` values.
    pub fn rows(&self, lines: &[u32], returned: &[i64]) -> Result<RecordBatch, LabError> {
        let idx = UInt32Array::from(lines.to_vec());
        let mut cols = self
            .cols
            .iter()
            .map(|c| take(c.as_ref(), &idx, None))
            .collect::<Result<Vec<_>, _>>()?;
        cols.push(Arc::new(Int64Array::from(returned.to_vec())));
        Ok(RecordBatch::try_new(schema(), cols)?)
    }

    /// Rows for these lines with the state's current `returned`.
    pub fn current(&self, lines: &[u32], s: &State) -> Result<RecordBatch, LabError> {
        let r: Vec<i64> = lines.iter().map(|&i| s.returned[i as usize]).collect();
        self.rows(lines, &r)
    }

    /// A change file's rows: changed lines whole, deleted lines as their id
    /// alone, and a `deleted` flag.
    pub fn change_rows(&self, rows: &[(u32, i64, bool)]) -> Result<RecordBatch, LabError> {
        let lines: Vec<u32> = rows.iter().map(|r| r.0).collect();
        let ret: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let b = self.rows(&lines, &ret)?;
        let deleted = BooleanArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>());
        let mut cols: Vec<ArrayRef> = Vec::new();
        for (j, c) in b.columns().iter().enumerate() {
            if j == 0 || !rows.iter().any(|r| r.2) {
                cols.push(c.clone());
            } else {
                // A deleted line keeps its id only.
                cols.push(arrow::compute::nullif(c, &deleted)?);
            }
        }
        cols.push(Arc::new(deleted));
        let mut fields: Vec<Field> = schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("deleted", DataType::Boolean, false));
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
    }
}
