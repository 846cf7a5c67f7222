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
//! `TableProvider` that decodes only the columns a query reads, evaluates
//! the query's row filters while reading (DataFusion evaluates them again
//! on what it gets, so a filter it cannot push is still right), stops at a
//! limit, and verifies every blob it reads against its name.

use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, TableReference};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use serde::Serialize;
use tablepin_format::{TableSnapshot, VersionId};
use tablepin_store::Store;

use crate::error::{Error, Result};
use crate::repo::Repo;
use crate::table::predicate::df_message;
use crate::table::{scan_request, schema_of, ReadStats, RowFilter, ScanRequest};

/// One table at one version, for DataFusion. Each scan reads the snapshot's
/// files (verified), decoding only the columns asked for and the filters',
/// and keeps what it read in [`VersionTable::stats`].
#[derive(Debug)]
pub struct VersionTable {
    store: Arc<Store>,
    table: String,
    version: VersionId,
    snapshot: TableSnapshot,
    schema: SchemaRef,
    stats: Mutex<ReadStats>,
}

impl VersionTable {
    /// `table` at the version `rev` names.
    pub async fn new(repo: &Repo, table: &str, rev: &str) -> Result<Self> {
        let version = repo.resolve(rev).await?;
        let snapshot = repo.snapshot(&version, table).await?;
        Ok(Self {
            store: repo.store_arc(),
            table: table.to_string(),
            version,
            schema: schema_of(&snapshot),
            snapshot,
            stats: Mutex::new(ReadStats::default()),
        })
    }

    /// The version read.
    pub fn version(&self) -> VersionId {
        self.version
    }

    /// What the scans of this table read so far (summed).
    pub fn stats(&self) -> ReadStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn add_stats(&self, s: &ReadStats) {
        if let Ok(mut t) = self.stats.lock() {
            t.files += s.files;
            t.deletion_vectors += s.deletion_vectors;
            t.rows_in_files += s.rows_in_files;
            t.rows += s.rows;
            t.bytes += s.bytes;
            t.columns_decoded = t.columns_decoded.max(s.columns_decoded);
        }
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
        _state: &dyn Session,
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
        };
        let read = match scan_request(&self.store, &self.snapshot, &self.table, &req).await {
            // A filter the engine cannot evaluate is DataFusion's to apply.
            Err(Error::Query(_)) if req.filter.is_some() => {
                req.filter = None;
                scan_request(&self.store, &self.snapshot, &self.table, &req).await
            }
            other => other,
        };
        let (schema, batches, stats) = read.map_err(|e| DataFusionError::External(Box::new(e)))?;
        self.add_stats(&stats);
        let exec = MemorySourceConfig::try_new_exec(&[batches], schema, None)?;
        Ok(exec)
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

impl Repo {
    /// Runs a read-only SQL query (see the module's docs for how tables and
    /// versions are named).
    pub async fn sql(&self, query: &str) -> Result<QueryResult> {
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
        let batches = df.collect().await.map_err(from_df)?;
        Ok(QueryResult {
            schema,
            batches,
            tables: tables
                .into_iter()
                .map(|(r, t)| QueriedTable {
                    name: r.to_string(),
                    version: t.version(),
                    stats: t.stats(),
                })
                .collect(),
        })
    }
}
