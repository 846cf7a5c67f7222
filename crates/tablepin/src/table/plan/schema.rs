//! Schema rules: how an input's schema may differ from the table's, and
//! the input conformed to the table's schema and key.

use super::*;

/// How the input's columns may differ from the table's.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SchemaRules {
    /// Accept any change (the table is rewritten; overwrite only).
    pub(crate) allow_change: bool,
    /// Cast input columns to the table's types when no value changes.
    pub(crate) cast: bool,
}

/// The schema the table has after this commit, whether it moved, and
/// whether the old files must be dropped (an incompatible change that
/// `--allow-schema-change` accepted). Physical variants of the table's
/// types and narrower numbers are read as the table's types, a wider
/// number widens a column that is not a key, and a new nullable column is
/// added, in any mode (see `types::Fit`).
pub(crate) fn resolve_schema(
    table: &str,
    parent: Option<&Schema>,
    input: &Schema,
    rules: SchemaRules,
    mode: Mode,
    key: &[String],
) -> Result<(SchemaRef, bool, bool)> {
    let Some(parent) = parent else {
        return Ok((Arc::new(Schema::new(input.fields().clone())), true, false));
    };
    let mut problem: Option<String> = None;
    let mut cast_to = None;
    let mut fields: Vec<Field> = Vec::new();
    let mut moved = false;
    for pf in parent.fields() {
        let Ok(inf) = input.field_with_name(pf.name()) else {
            problem.get_or_insert(format!("column '{}' is missing from the input", pf.name()));
            continue;
        };
        let change = || {
            format!(
                "column '{}' would change type from {} to {}",
                pf.name(),
                pf.data_type(),
                inf.data_type()
            )
        };
        let is_key = key.iter().any(|k| k == pf.name());
        let data_type = match types::fit(pf.data_type(), inf.data_type()) {
            Fit::Same | Fit::Conform => pf.data_type().clone(),
            Fit::Widen if !is_key => {
                moved = true;
                inf.data_type().clone()
            }
            Fit::Widen | Fit::Cast if rules.cast => pf.data_type().clone(),
            Fit::Widen | Fit::Cast => {
                if problem.is_none() {
                    let why = if is_key {
                        " (a key column's type does not widen)"
                    } else {
                        ""
                    };
                    problem = Some(format!("{}{why}", change()));
                    cast_to = Some((pf.name().clone(), pf.data_type().to_string()));
                }
                continue;
            }
            Fit::Change => {
                problem.get_or_insert(change());
                continue;
            }
        };
        let nullable = pf.is_nullable() || inf.is_nullable();
        moved |= nullable != pf.is_nullable();
        fields.push(
            pf.as_ref()
                .clone()
                .with_nullable(nullable)
                .with_data_type(data_type),
        );
    }
    for inf in input.fields() {
        if parent.field_with_name(inf.name()).is_err() {
            if !inf.is_nullable() {
                problem.get_or_insert(format!(
                    "new column '{}' is not nullable, so old rows would have no value for it",
                    inf.name()
                ));
            }
            moved = true;
            fields.push(inf.as_ref().clone().with_nullable(true));
        }
    }
    match problem {
        None => Ok((Arc::new(Schema::new(fields)), moved, false)),
        Some(detail) if !rules.allow_change => Err(Error::SchemaChange {
            table: table.to_string(),
            detail,
            cast_to,
        }),
        Some(detail) if mode != Mode::Overwrite => Err(Error::RewriteNeedsOverwrite {
            table: table.to_string(),
            detail,
        }),
        Some(_) => Ok((Arc::new(Schema::new(input.fields().clone())), true, true)),
    }
}

/// The key a commit's table has: the parent's, or the one given (which may
/// not change a table's key).
pub(crate) fn table_key(
    table: &str,
    parent: Option<&TableSnapshot>,
    given: &Option<Vec<String>>,
    mode: Mode,
) -> Result<Vec<String>> {
    let key: Vec<String> = match (parent, given) {
        (Some(par), Some(k)) if par.key != *k && !(par.key.is_empty() && par.files.is_empty()) => {
            return Err(Error::KeyChange {
                table: table.to_string(),
                old: par.key.clone(),
                new: k.clone(),
            })
        }
        (_, Some(k)) => k.clone(),
        (Some(par), None) => par.key.clone(),
        (None, None) => Vec::new(),
    };
    if key.is_empty() && matches!(mode, Mode::Upsert | Mode::Delete) {
        return Err(Error::NoKey {
            table: table.to_string(),
            mode,
        });
    }
    Ok(key)
}

/// The input's rows in `schema`'s columns and types (`types::conform_rows`),
/// a value that would change named as the table's error.
pub(crate) fn conform_input(
    table: &str,
    input: &RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    types::conform_rows(input, schema).map_err(|e| match e {
        types::Unfit::Lossy {
            column,
            to,
            row,
            held,
            becomes,
        } => Error::LossyValue {
            table: table.to_string(),
            column,
            to,
            row,
            change: format!("holds {held} and would become {becomes}"),
        },
        other => Error::InvalidArgument(format!("the input of table '{table}': {other}")),
    })
}

/// The key columns of `input` in the types `schema` (the table's) gives
/// them, where they fit without changing a value: the keys a delete
/// looks up, and their schema.
pub(crate) fn conform_keys(
    table: &str,
    schema: &SchemaRef,
    input: &RecordBatch,
    key: &[String],
) -> Result<(RecordBatch, SchemaRef)> {
    let key_idx = keys::key_indices(table, schema, key)?;
    let in_idx = keys::key_indices(table, &input.schema(), key)?;
    let in_keys = input
        .project(&in_idx)
        .map_err(Error::arrow("reading keys"))?;
    let kschema = keys::key_schema(schema, &key_idx);
    for (f_in, f_t) in in_keys.schema().fields().iter().zip(kschema.fields()) {
        if !matches!(
            types::fit(f_t.data_type(), f_in.data_type()),
            Fit::Same | Fit::Conform
        ) {
            return Err(Error::SchemaChange {
                table: table.to_string(),
                detail: format!(
                    "key column '{}' is {} in the input but {} in the table",
                    f_t.name(),
                    f_in.data_type(),
                    f_t.data_type()
                ),
                cast_to: None,
            });
        }
    }
    let in_keys = types::conform(&in_keys, &kschema).map_err(|message| Error::Input {
        path: table.to_string(),
        message,
    })?;
    Ok((in_keys, kschema))
}
