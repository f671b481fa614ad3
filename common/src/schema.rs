//! How every JSON Schema of the public contract is generated: draft 2020-12, standard keywords
//! only (no custom `format` such as `uint32`: unsigned integers carry `minimum: 0` instead), no
//! boolean sub-schemas, self-contained and compact (tool listings repeat them).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use schemars::transform::RestrictFormats;
use serde_json::{Map, Value};

/// Which side of the wire a schema describes: what is accepted (inputs) or what is sent
/// (outputs; fields skipped when empty are then optional).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// Optional fields are advertised as their type alone (omit them rather than send null).
    Input,
    /// Fields that may be null say so.
    Output,
}

/// The JSON Schema of `T` as the public contract advertises it: self-contained (no `$defs`:
/// each shape is inlined where it is used, which is once for nearly all of them), without
/// `default: null`, with one-line descriptions, and without `type` beside an `enum`/`const`.
pub fn schema_for<T: JsonSchema>(contract: Contract) -> Value {
    let mut restrict = RestrictFormats::default();
    // Keep no `format` at all: the standard ones would make strict clients validate them, and
    // the schemars integer formats (`uint32`, `int64`…) are not standard.
    restrict.infer_from_meta_schema = false;
    let settings = SchemaSettings::draft2020_12().with_transform(restrict);
    let settings = match contract {
        Contract::Input => settings.for_deserialize(),
        Contract::Output => settings.for_serialize(),
    };
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    let defs = match value.as_object_mut() {
        Some(map) => {
            map.remove("$schema");
            map.remove("title");
            match map.remove("$defs") {
                Some(Value::Object(defs)) => defs,
                _ => Map::new(),
            }
        }
        None => Map::new(),
    };
    compact(value, &defs, contract)
}

fn compact(node: Value, defs: &Map<String, Value>, contract: Contract) -> Value {
    let Value::Object(mut map) = node else {
        return node;
    };
    // `{"$ref": X, ...}` → X, the referring schema's own keywords (its description) winning.
    if let Some(Value::String(reference)) = map.remove("$ref") {
        let target = reference
            .rsplit('/')
            .next()
            .and_then(|key| defs.get(key))
            .cloned()
            .unwrap_or(Value::Object(Map::new()));
        if let Value::Object(target) = compact(target, defs, contract) {
            for (key, value) in target {
                map.entry(key).or_insert(value);
            }
        }
    }
    // `{"anyOf": [X, {"type": "null"}]}` → X (inputs), or X admitting null (outputs).
    let nullable = map
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|alts| alts.len() == 2 && alts[1] == serde_json::json!({"type": "null"}));
    if nullable
        && let Some(Value::Array(mut alts)) = map.remove("anyOf")
        && let Value::Object(inner) = compact(alts.swap_remove(0), defs, contract)
    {
        for (key, value) in inner {
            map.entry(key).or_insert(value);
        }
        if contract == Contract::Output {
            admit_null(&mut map);
        }
    }
    if contract == Contract::Input
        && let Some(Value::Array(types)) = map.get_mut("type")
    {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    if let Some(Value::String(text)) = map.get_mut("description") {
        *text = one_line(text);
    }
    if (map.contains_key("enum") || map.contains_key("const"))
        && map.get("type") == Some(&"string".into())
    {
        map.remove("type");
    }
    map.into_iter()
        .map(|(key, value)| {
            let value = match key.as_str() {
                "properties" => match value {
                    Value::Object(props) => Value::Object(
                        props
                            .into_iter()
                            .map(|(k, v)| (k, compact(v, defs, contract)))
                            .collect(),
                    ),
                    other => other,
                },
                "items" | "additionalProperties" => compact(value, defs, contract),
                "anyOf" | "oneOf" | "allOf" => match value {
                    Value::Array(alts) => Value::Array(
                        alts.into_iter()
                            .map(|alt| compact(alt, defs, contract))
                            .collect(),
                    ),
                    other => other,
                },
                _ => value,
            };
            (key, value)
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// A doc comment's lines as one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Make a schema also accept `null`.
fn admit_null(map: &mut Map<String, Value>) {
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), serde_json::json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.contains(&Value::from("null")) {
                types.push(Value::from("null"));
            }
        }
        _ => match map.get_mut("enum") {
            Some(Value::Array(values)) => values.push(Value::Null),
            _ => {
                let inner = Value::Object(std::mem::take(map));
                map.insert("anyOf".into(), serde_json::json!([inner, {"type": "null"}]));
            }
        },
    }
}

/// Where a schema breaks the contract's hygiene rules: a boolean sub-schema (other than
/// `additionalProperties: false`, which closes an object) or a `format` keyword. Each finding is
/// the JSON pointer of the offending place.
pub fn hygiene_violations(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_schema(schema, "", &mut found);
    found
}

/// Keywords whose value is one sub-schema.
const SINGLE_SUBSCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
/// Keywords whose value is an array of sub-schemas.
const SUBSCHEMA_ARRAYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to sub-schemas.
const SUBSCHEMA_MAPS: &[&str] = &[
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];

fn walk_schema(schema: &Value, at: &str, found: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        found.push(format!("{at}: boolean or non-object schema {schema}"));
        return;
    };
    if map.contains_key("format") {
        found.push(format!("{at}/format: {}", map["format"]));
    }
    for (key, value) in map {
        let here = format!("{at}/{key}");
        if SINGLE_SUBSCHEMA.contains(&key.as_str()) {
            if key == "additionalProperties" && value == &Value::Bool(false) {
                continue;
            }
            walk_schema(value, &here, found);
        } else if SUBSCHEMA_ARRAYS.contains(&key.as_str()) {
            for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                walk_schema(item, &format!("{here}/{i}"), found);
            }
        } else if SUBSCHEMA_MAPS.contains(&key.as_str()) {
            for (name, item) in value.as_object().into_iter().flatten() {
                walk_schema(item, &format!("{here}/{name}"), found);
            }
        }
    }
}

#[cfg(test)]
mod tests;
