//! Row predicates: an SQL boolean expression (`Country = 'France' AND
//! Quantity < 0`) parsed and type-checked by DataFusion against a table's
//! schema, then evaluated batch by batch. Erasure selects the rows to
//! remove with one; reads keep only the rows one matches.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::types::conform;
use crate::error::{Error, Result};

/// A compiled predicate.
pub(crate) struct Predicate {
    expr: Arc<dyn PhysicalExpr>,
    schema: SchemaRef,
    text: String,
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_string()
}

/// DataFusion's error as a sentence: the parser's message without the
/// Rust debug text around it (`SQL error: ParserError("…")`), and without
/// the category prefixes.
pub(crate) fn df_message(e: &datafusion::error::DataFusionError) -> String {
    let s = first_line(&e.to_string());
    if let Some((_, inner)) = s.split_once("Error(\"") {
        let inner = inner.strip_suffix("\")").unwrap_or(inner);
        return format!("SQL syntax error: {}", inner.replace("\\\"", "\""));
    }
    let mut s = s.as_str();
    for prefix in [
        "Error during planning: ",
        "Schema error: ",
        "Optimizer rule",
    ] {
        s = s.strip_prefix(prefix).unwrap_or(s);
    }
    s.to_string()
}

/// True when DataFusion refused an expression for naming a column the
/// schema lacks.
fn is_missing_field(e: &datafusion::error::DataFusionError) -> bool {
    use datafusion::common::SchemaError;
    use datafusion::error::DataFusionError as D;
    match e {
        D::SchemaError(inner, _) => matches!(**inner, SchemaError::FieldNotFound { .. }),
        D::Context(_, inner) => is_missing_field(inner),
        D::Diagnostic(_, inner) => is_missing_field(inner),
        _ => false,
    }
}

/// The error of a predicate that does not fit a table.
fn bad<'a>(table: &'a str, text: &'a str) -> impl Fn(String) -> Error + 'a {
    move |why| {
        Error::Query(format!(
            "predicate \"{text}\" does not fit table '{table}': {why}"
        ))
    }
}

/// A DataFusion context that keeps column names as written (`Country`, not
/// `country`).
fn context() -> SessionContext {
    let config =
        SessionConfig::new().set_bool("datafusion.sql_parser.enable_ident_normalization", false);
    SessionContext::new_with_config(config)
}

impl Predicate {
    /// Parses and type-checks an SQL boolean expression over `schema` with
    /// DataFusion.
    pub(crate) fn compile(table: &str, text: &str, schema: &SchemaRef) -> Result<Self> {
        let bad = bad(table, text);
        let df_schema =
            DFSchema::try_from(schema.as_ref().clone()).map_err(|e| bad(df_message(&e)))?;
        let expr = context()
            .parse_sql_expr(text, &df_schema)
            .map_err(|e| bad(df_message(&e)))?;
        Self::build(table, text, expr, schema)
    }

    /// [`Predicate::compile`] over a schema that may lack the columns the
    /// predicate names (an old version's, before a column was added, or
    /// after it was dropped): `None` then, as no row of that schema can
    /// match. Other errors stay errors.
    pub(crate) fn compile_if_applies(
        table: &str,
        text: &str,
        schema: &SchemaRef,
    ) -> Result<Option<Self>> {
        let df_schema = DFSchema::try_from(schema.as_ref().clone())
            .map_err(|e| bad(table, text)(df_message(&e)))?;
        match context().parse_sql_expr(text, &df_schema) {
            Err(e) if is_missing_field(&e) => Ok(None),
            Err(e) => Err(bad(table, text)(df_message(&e))),
            Ok(expr) => match Self::build(table, text, expr, schema) {
                Ok(p) => Ok(Some(p)),
                Err(e) => Err(e),
            },
        }
    }

    /// Type-checks a DataFusion expression over `schema` (its columns
    /// named without a table).
    pub(crate) fn compile_expr(table: &str, expr: Expr, schema: &SchemaRef) -> Result<Self> {
        let text = expr.to_string();
        Self::build(table, &text, expr, schema)
    }

    fn build(table: &str, text: &str, expr: Expr, schema: &SchemaRef) -> Result<Self> {
        let bad = bad(table, text);
        let df_schema =
            DFSchema::try_from(schema.as_ref().clone()).map_err(|e| bad(df_message(&e)))?;
        let expr = context()
            .create_physical_expr(expr, &df_schema)
            .map_err(|e| bad(df_message(&e)))?;
        let p = Self {
            expr,
            schema: schema.clone(),
            text: text.to_string(),
        };
        let rt = p.expr.data_type(schema).map_err(|e| bad(df_message(&e)))?;
        if rt != arrow::datatypes::DataType::Boolean {
            return Err(bad(format!("it is of type {rt}, not a boolean condition")));
        }
        // Then evaluate once on no rows: type errors (a text literal that
        // cannot become a number, say) surface now, not half-way through.
        let nulls = RecordBatch::new_empty(schema.clone());
        p.eval(&nulls).map_err(|e| match e {
            Error::Query(m) => Error::Query(m),
            other => bad(other.to_string()),
        })?;
        Ok(p)
    }

    /// The predicate as DataFusion evaluates it, over the schema it was
    /// compiled against.
    pub(crate) fn physical(&self) -> &Arc<dyn PhysicalExpr> {
        &self.expr
    }

    /// The columns the predicate reads, by name.
    pub(crate) fn columns(&self) -> BTreeSet<String> {
        datafusion::physical_expr::utils::collect_columns(&self.expr)
            .into_iter()
            .map(|c| c.name().to_string())
            .collect()
    }

    /// The rows of a batch (of any schema holding the columns) that match.
    pub(crate) fn eval(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let aligned = conform(batch, &self.schema).map_err(Error::Query)?;
        let v = self
            .expr
            .evaluate(&aligned)
            .and_then(|v| v.into_array(aligned.num_rows()))
            .map_err(|e| {
                Error::Query(format!(
                    "predicate \"{}\" failed: {}",
                    self.text,
                    first_line(&e.to_string())
                ))
            })?;
        let b = v.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
            Error::Query(format!(
                "predicate \"{}\" is not a boolean condition",
                self.text
            ))
        })?;
        // Null means "does not match".
        Ok(b.iter().map(|x| Some(x == Some(true))).collect())
    }
}
