//! A JSON document as the console shows it (the detailed health report,
//! the rate limiter's state and configuration): a table per part, where a
//! part made of like records (the projections, the endpoints' quotas) is a
//! table of one row per record and a column per field, rather than a row
//! per leaf named `projections.7.checkpoint_position`. An admin reads
//! across a row; the browser lays out and paints a third of the text.

use serde_json::{Map, Value};

/// One part of a document, under its own heading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The part's field, as a heading ("Event bus"); empty for the
    /// document's own scalar fields, which come first.
    pub title: String,
    pub table: Table,
}

/// A table: the column headings (the row headers' first), then each row's
/// header and cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
}

impl Section {
    /// Name and value rows without a heading: the document's own fields, or
    /// a document of them alone.
    pub fn facts(rows: Vec<(String, String)>) -> Self {
        Self {
            title: String::new(),
            table: Table::facts(rows),
        }
    }
}

impl Table {
    /// Name and value, a row each.
    pub fn facts(rows: Vec<(String, String)>) -> Self {
        Self {
            columns: vec!["Name".to_owned(), "Value".to_owned()],
            rows: rows.into_iter().map(|(k, v)| (k, vec![v])).collect(),
        }
    }
}

/// A JSON value as a report shows it: strings bare, `null` as "none".
pub fn leaf(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "none".to_owned(),
        other => other.to_string(),
    }
}

/// `value`'s sections: its scalar fields together, then a section per
/// object or list field, in document order. A document of scalars alone is
/// one untitled section.
pub fn sections(value: &Value) -> Vec<Section> {
    let Value::Object(fields) = value else {
        return vec![Section::facts(flatten(value))];
    };
    let (mut scalars, mut parts) = (Vec::new(), Vec::new());
    for (name, field) in fields {
        if is_compound(field) {
            parts.push(Section {
                title: heading(name),
                table: records(field).unwrap_or_else(|| Table::facts(flatten(field))),
            });
        } else {
            scalars.push((name.clone(), flat_leaf(field)));
        }
    }
    if !scalars.is_empty() || parts.is_empty() {
        parts.insert(0, Section::facts(scalars));
    }
    parts
}

/// An object or a list holding objects or lists: a part of its own.
fn is_compound(value: &Value) -> bool {
    match value {
        Value::Object(map) => !map.is_empty(),
        Value::Array(list) => list.iter().any(|v| v.is_object() || v.is_array()),
        _ => false,
    }
}

/// A scalar, or a list of scalars joined; an empty list or object is "none".
fn flat_leaf(value: &Value) -> String {
    match value {
        Value::Array(list) if list.is_empty() => "none".to_owned(),
        Value::Object(map) if map.is_empty() => "none".to_owned(),
        Value::Array(list) => list.iter().map(leaf).collect::<Vec<_>>().join(", "),
        other => leaf(other),
    }
}

/// A record and what heads its row.
type Record<'a> = (String, &'a Map<String, Value>);

/// Like records as a table: an object whose fields, or a list whose items,
/// are all objects with the same leaves. An object's records are headed by
/// their field names; a list's by their `name`, `path` or `id` when each
/// has one, by their place otherwise.
fn records(value: &Value) -> Option<Table> {
    fn record(key: String, value: &Value) -> Option<Record<'_>> {
        Some((key, value.as_object()?))
    }
    let (named, items): (bool, Vec<Record<'_>>) = match value {
        Value::Object(map) => (
            true,
            map.iter()
                .map(|(k, v)| record(k.clone(), v))
                .collect::<Option<_>>()?,
        ),
        Value::Array(list) => (
            false,
            list.iter()
                .enumerate()
                .map(|(i, v)| record((i + 1).to_string(), v))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    };
    let rows: Vec<(String, Vec<(String, String)>)> = items
        .iter()
        .map(|(key, item)| {
            let mut leaves = Vec::new();
            item.iter().for_each(|(k, v)| walk(k, v, &mut leaves));
            (key.clone(), leaves)
        })
        .collect();
    let columns: Vec<&str> = rows.first()?.1.iter().map(|(k, _)| k.as_str()).collect();
    let alike = |leaves: &Vec<(String, String)>| {
        leaves
            .iter()
            .map(|(k, _)| k.as_str())
            .eq(columns.iter().copied())
    };
    if columns.is_empty() || !rows.iter().all(|(_, leaves)| alike(leaves)) {
        return None;
    }
    let by = if named {
        None
    } else {
        ["name", "path", "id"].into_iter().find(|field| {
            items
                .iter()
                .all(|(_, item)| item.get(*field).is_some_and(Value::is_string))
        })
    };
    let first = by.unwrap_or(if named { "Name" } else { "#" });
    let mut table = Table {
        columns: std::iter::once(first)
            .chain(columns.into_iter().filter(|c| Some(*c) != by))
            .map(str::to_owned)
            .collect(),
        rows: Vec::with_capacity(rows.len()),
    };
    for (key, leaves) in rows {
        let head = by
            .and_then(|field| leaves.iter().find(|(k, _)| k == field))
            .map_or(key, |(_, v)| v.clone());
        let cells = leaves
            .into_iter()
            .filter(|(k, _)| Some(k.as_str()) != by)
            .map(|(_, v)| v)
            .collect();
        table.rows.push((head, cells));
    }
    Some(table)
}

/// `value`'s leaves as `(dotted.path, text)`, in document order.
fn flatten(value: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

/// Appends the leaves under `prefix` to `out`.
fn walk(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    let name = |key: &str| {
        if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            map.iter().for_each(|(k, v)| walk(&name(k), v, out));
        }
        Value::Array(list) if list.iter().any(|v| v.is_object() || v.is_array()) => list
            .iter()
            .enumerate()
            .for_each(|(i, v)| walk(&name(&i.to_string()), v, out)),
        leaf_value => out.push((prefix.to_owned(), flat_leaf(leaf_value))),
    }
}

/// A field's name as a heading: `event_bus` as "Event bus", `per_ip` as
/// "Per IP".
fn heading(name: &str) -> String {
    let words: Vec<String> = name
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| match w {
            "ip" | "id" | "ws" | "url" | "api" => w.to_uppercase(),
            _ => w.to_owned(),
        })
        .collect();
    let text = words.join(" ");
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn like_records_become_rows_and_the_rest_dotted_facts() {
        let value = serde_json::json!({
            "status": "healthy",
            "tags": ["a", "b"],
            "empty": [],
            "nothing": {},
            "database": {"backend": "sqlite", "pool": {"size": 4}, "replicas": {}},
            "projections": [
                {"name": "debates", "behind": false, "stalled": null},
                {"name": "accounts", "behind": true, "stalled": "12 s"},
            ],
            "tiers": {"free": {"burst": 60, "per_minute": 10}, "pro": {"burst": 400, "per_minute": 200}},
            "endpoints": [{"quota": {"burst": 2}}, {"quota": {"burst": 4}}],
            "mixed": [{"a": 1}, {"b": 2}],
            "per_ip": {"burst": 2},
        });
        let got = sections(&value);
        let titles: Vec<&str> = got.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "",
                "Database",
                "Endpoints",
                "Mixed",
                "Per IP",
                "Projections",
                "Tiers"
            ]
        );
        assert_eq!(
            got[0].table,
            Table::facts(vec![
                ("empty".to_owned(), "none".to_owned()),
                ("nothing".to_owned(), "none".to_owned()),
                ("status".to_owned(), "healthy".to_owned()),
                ("tags".to_owned(), "a, b".to_owned()),
            ])
        );
        assert_eq!(
            got[1].table,
            Table::facts(vec![
                ("backend".to_owned(), "sqlite".to_owned()),
                ("pool.size".to_owned(), "4".to_owned()),
                ("replicas".to_owned(), "none".to_owned()),
            ])
        );
        // Records without a naming field are numbered from 1.
        assert_eq!(got[2].table.columns, strings(&["#", "quota.burst"]));
        assert_eq!(got[2].table.rows[1], ("2".to_owned(), strings(&["4"])));
        // Unlike records stay facts.
        assert_eq!(got[3].table.rows[0], ("0.a".to_owned(), strings(&["1"])));
        assert_eq!(
            got[5].table.columns,
            strings(&["name", "behind", "stalled"])
        );
        assert_eq!(
            got[5].table.rows,
            [
                ("debates".to_owned(), strings(&["false", "none"])),
                ("accounts".to_owned(), strings(&["true", "12 s"])),
            ]
        );
        assert_eq!(
            got[6].table.columns,
            strings(&["Name", "burst", "per_minute"])
        );
        assert_eq!(
            got[6].table.rows[1],
            ("pro".to_owned(), strings(&["400", "200"]))
        );
    }

    #[test]
    fn a_document_of_scalars_is_one_untitled_table() {
        let got = sections(&serde_json::json!({"backend": "memory", "checks": 3}));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].title, "");
        assert_eq!(got[0].table.rows.len(), 2);
        assert_eq!(sections(&serde_json::json!({})).len(), 1);
    }
}
