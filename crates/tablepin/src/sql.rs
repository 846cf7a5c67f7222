//! SQL over any version of any table, through DataFusion.
//!
//! In a query, a table is named `sales` (the head of the default branch) or
//! `"sales@REV"` (at any revision: a tag, a branch, a version id, `main~3`,
//! `main@2010-12-01`), quoted because `@` is not a plain identifier's
//! character. Two versions of one table join like two tables:
//!
//! ```sql
//! SELECT n.id, o.qty AS before, n.qty AS after
//! FROM "sales@train-v1" o JOIN sales n ON o.id = n.id
//! WHERE o.qty <> n.qty
//! ```
//!
//! Each (table, revision) is a [`VersionTable`], a DataFusion
//! `TableProvider` that streams the version's files, decodes only the
//! columns a query reads, skips the files (by key range) and pages (by the
//! page index) its row filters rule out, evaluates those filters while
//! reading (DataFusion evaluates them again on what it gets, so a filter
//! it cannot push is still right), stops at a limit, and verifies every
//! blob it reads against its name.
//!
//! Before planning, the query's table references are resolved and each
//! registered as a [`VersionTable`]. Its scan is a `StreamingTableExec`
//! whose partitions each stream every n-th file of the snapshot
//! (`table::scan`). A file whose key range rules out every row the
//! filters match is never fetched (DataFusion's `PruningPredicate` over the
//! snapshot's key ranges); `ReadStats::files_skipped` and `rows_decoded`
//! count what was spared. Filters are marked `Inexact`, and no order is
//! promised, so a `count(*) ... WHERE Country = 'France'` decodes one column
//! and pays no merge.

use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, TableReference};
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use futures::StreamExt;
use serde::Serialize;
use tablepin_format::{TableSnapshot, VersionId};
use tablepin_store::Store;

use crate::error::{Error, Result};
use crate::repo::Repo;
use crate::table::predicate::df_message;
use crate::table::scan::{RowFilter, Scan, ScanRequest};
use crate::table::{schema_of, ReadStats};

/// One table at one version, for DataFusion. Each scan streams the
/// snapshot's files (verified), decoding only the columns asked for and
/// the filters', skipping the files and pages the filters rule out, and
/// keeps what it read in [`VersionTable::stats`].
#[derive(Debug)]
pub struct VersionTable {
    store: Arc<Store>,
    table: String,
    version: VersionId,
    snapshot: TableSnapshot,
    schema: SchemaRef,
    scans: Mutex<Vec<Arc<Mutex<ReadStats>>>>,
}

impl VersionTable {
    /// `table` at the version `rev` names.
    pub async fn new(repo: &Repo, table: &str, rev: &str) -> Result<Self> {
        let at = repo.snapshot(rev).await?;
        let (version, snapshot) = (at.id(), at.table(table).await?);
        Ok(Self {
            store: repo.store_arc(),
            table: table.to_string(),
            version,
            schema: schema_of(&snapshot),
            snapshot,
            scans: Mutex::new(Vec::new()),
        })
    }

    /// The version read.
    pub fn version(&self) -> VersionId {
        self.version
    }

    /// What the scans of this table read so far (summed; the columns
    /// decoded are the most any scan decoded).
    pub fn stats(&self) -> ReadStats {
        let mut t = ReadStats::default();
        let Ok(scans) = self.scans.lock() else {
            return t;
        };
        for s in scans.iter() {
            let Ok(s) = s.lock() else { continue };
            t.files += s.files;
            t.deletion_vectors += s.deletion_vectors;
            t.rows_in_files += s.rows_in_files;
            t.rows += s.rows;
            t.bytes += s.bytes;
            t.rows_decoded += s.rows_decoded;
            t.files_skipped += s.files_skipped;
            t.columns_decoded = t.columns_decoded.max(s.columns_decoded);
        }
        t
    }
}

/// One partition of a [`VersionTable`] scan: every `parts`-th file from
/// `part` on, streamed one file at a time.
struct Part {
    scan: Arc<Scan>,
    schema: SchemaRef,
    part: usize,
    parts: usize,
    /// The version and table read, to name a lost or damaged file's.
    version: VersionId,
    table: String,
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VersionTable partition {} of {}", self.part, self.parts)
    }
}

impl PartitionStream for Part {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (version, table) = (self.version, self.table.clone());
        let rows = self
            .scan
            .clone()
            .stream(self.part, self.parts, 1)
            .map(move |r| {
                r.map_err(|e| {
                    let e = crate::repo::named(e, Some(version), &table);
                    DataFusionError::External(Box::new(e))
                })
            });
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), rows))
    }
}

/// The expression with its columns named without a table (`sales.id` is
/// `id`), as the snapshot's schema names them.
fn unqualified(e: &Expr) -> datafusion::error::Result<Expr> {
    e.clone()
        .transform(|e| {
            Ok(match e {
                Expr::Column(c) if c.relation.is_some() => {
                    Transformed::yes(Expr::Column(Column::new_unqualified(c.name)))
                }
                other => Transformed::no(other),
            })
        })
        .map(|t| t.data)
}

#[async_trait]
impl TableProvider for VersionTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let columns: Option<Vec<String>> = projection.map(|p| {
            p.iter()
                .map(|&i| self.schema.field(i).name().clone())
                .collect()
        });
        let filter = match filters {
            [] => None,
            [first, rest @ ..] => {
                let all = rest.iter().fold(first.clone(), |a, b| a.and(b.clone()));
                Some(unqualified(&all)?)
            }
        };
        let mut req = ScanRequest {
            columns: columns.as_deref(),
            filter: filter.as_ref().map(RowFilter::Expr),
            // With filters, DataFusion passes no limit unless they are
            // exact; none of ours is, so a limit here cuts unfiltered rows.
            limit,
            ordered: false,
            files: None,
        };
        let store = self.store.clone();
        let scan = match Scan::new(store.clone(), &self.snapshot, &self.table, &req).await {
            // A filter the engine cannot evaluate is DataFusion's to apply.
            Err(Error::Query(_)) if req.filter.is_some() => {
                req.filter = None;
                Scan::new(store, &self.snapshot, &self.table, &req).await
            }
            other => other,
        };
        let scan = Arc::new(scan.map_err(|e| {
            let e = crate::repo::named(e, Some(self.version), &self.table);
            DataFusionError::External(Box::new(e))
        })?);
        if let Ok(mut scans) = self.scans.lock() {
            scans.push(scan.stats());
        }
        let schema = scan.schema();
        let parts = state.config().target_partitions().min(scan.files()).max(1);
        let partitions = (0..parts)
            .map(|part| {
                Arc::new(Part {
                    scan: scan.clone(),
                    schema: schema.clone(),
                    part,
                    parts,
                    version: self.version,
                    table: self.table.clone(),
                }) as Arc<dyn PartitionStream>
            })
            .collect();
        let exec = StreamingTableExec::try_new(schema, partitions, None, [], false, limit)?;
        Ok(Arc::new(exec))
    }
}

/// The table and revision a name in a query means: `sales` is the default
/// branch's head, `sales@REV` the table at REV (table names hold no `@`).
pub fn parse_table_name(name: &str) -> (&str, &str) {
    match name.split_once('@') {
        Some((table, rev)) => (table, rev),
        None => (name, crate::repo::DEFAULT_BRANCH),
    }
}

/// A query's answer.
#[derive(Debug, Clone, Serialize)]
pub struct QueryResult {
    /// The result's schema.
    #[serde(skip)]
    pub schema: SchemaRef,
    /// The result's rows.
    #[serde(skip)]
    pub batches: Vec<RecordBatch>,
    /// Each table the query named: the version read and what was read.
    pub tables: Vec<QueriedTable>,
}

/// A table a query read.
#[derive(Debug, Clone, Serialize)]
pub struct QueriedTable {
    /// The name as the query wrote it.
    pub name: String,
    /// The version it read.
    pub version: VersionId,
    /// What was read.
    pub stats: ReadStats,
}

/// DataFusion's error as the engine's: an error of the engine's own (an
/// unknown revision, a damaged blob) as itself, anything else as a query
/// error in one sentence.
fn from_df(e: DataFusionError) -> Error {
    match take_ours(e) {
        Ok(ours) => ours,
        Err(e) => Error::Query(df_message(&e)),
    }
}

/// The engine's error inside DataFusion's, when there is one.
fn take_ours(e: DataFusionError) -> std::result::Result<Error, DataFusionError> {
    match e {
        DataFusionError::External(b) => match b.downcast::<Error>() {
            Ok(ours) => Ok(*ours),
            Err(b) => Err(DataFusionError::External(b)),
        },
        DataFusionError::Context(c, inner) => {
            take_ours(*inner).map_err(|i| DataFusionError::Context(c, Box::new(i)))
        }
        DataFusionError::Shared(a) => match Arc::try_unwrap(a) {
            Ok(inner) => take_ours(inner),
            Err(a) => Err(DataFusionError::Shared(a)),
        },
        other => Err(other),
    }
}

/// A query's rows as they come ([`Repo::sql_stream`]), with the tables it
/// reads.
pub struct QueryStream {
    /// The result's schema.
    pub schema: SchemaRef,
    /// The rows, a batch at a time.
    pub rows: futures::stream::BoxStream<'static, Result<RecordBatch>>,
    tables: Vec<(TableReference, Arc<VersionTable>)>,
}

impl QueryStream {
    /// The next batch of rows; `None` once every row was given.
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        self.rows.next().await
    }

    /// Each table the query named, with what was read of it so far (all
    /// of it once `rows` has ended).
    pub fn tables(&self) -> Vec<QueriedTable> {
        self.tables
            .iter()
            .map(|(r, t)| QueriedTable {
                name: r.to_string(),
                version: t.version(),
                stats: t.stats(),
            })
            .collect()
    }
}

impl Repo {
    /// Runs a read-only SQL query (see the module's docs for how tables and
    /// versions are named), holding every row of the answer.
    pub async fn sql(&self, query: &str) -> Result<QueryResult> {
        let mut q = self.sql_stream(query).await?;
        let mut batches = Vec::new();
        while let Some(b) = q.rows.next().await {
            batches.push(b?);
        }
        Ok(QueryResult {
            schema: q.schema.clone(),
            batches,
            tables: q.tables(),
        })
    }

    /// Runs a read-only SQL query and gives its rows as they come: memory
    /// holds what the query itself needs (a sort or an aggregate holds its
    /// state), not the answer, and the first rows come before the last
    /// are read.
    pub async fn sql_stream(&self, query: &str) -> Result<QueryStream> {
        let config = SessionConfig::new()
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let ctx = SessionContext::new_with_config(config);
        let statements = DFParser::parse_sql(query).map_err(|e| Error::Query(df_message(&e)))?;
        let [statement] = Vec::from(statements).try_into().map_err(|v: Vec<_>| {
            Error::Query(format!("give one SQL statement, not {}", v.len()))
        })?;
        let refs = ctx
            .state()
            .resolve_table_references(&statement)
            .map_err(from_df)?;
        let mut tables: Vec<(TableReference, Arc<VersionTable>)> = Vec::new();
        for r in refs {
            if tables.iter().any(|(t, _)| *t == r) {
                continue;
            }
            let (table, rev) = parse_table_name(r.table());
            let provider = Arc::new(VersionTable::new(self, table, rev).await?);
            ctx.register_table(r.clone(), provider.clone())
                .map_err(from_df)?;
            tables.push((r, provider));
        }
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        let df = ctx
            .sql_with_options(query, options)
            .await
            .map_err(from_df)?;
        let schema: SchemaRef = df.schema().inner().clone();
        let stream = df.execute_stream().await.map_err(from_df)?;
        Ok(QueryStream {
            schema,
            rows: stream.map(|r| r.map_err(from_df)).boxed(),
            tables,
        })
    }
}
