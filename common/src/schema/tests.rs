//! Unit tests of the schema generator: integer formats dropped (unsigned keep `minimum: 0`),
//! shapes inlined with one-line descriptions, and what `hygiene_violations` finds.

use super::*;
use serde_json::json;

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Sample {
    count: u32,
    big: Option<u64>,
    signed: i64,
    anything: Value,
}

#[test]
fn integer_formats_are_dropped_and_unsigned_keep_minimum() {
    let schema = schema_for::<Sample>(Contract::Input);
    let text = schema.to_string();
    assert!(!text.contains("format"), "{text}");
    assert_eq!(schema["properties"]["count"]["minimum"], json!(0));
    assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
    // An optional input is its type alone; an optional output admits null.
    assert_eq!(schema["properties"]["big"]["type"], json!("integer"));
    let output = schema_for::<Sample>(Contract::Output);
    assert_eq!(
        output["properties"]["big"]["type"],
        json!(["integer", "null"])
    );
}

/// Shapes are inlined where they are used, with the user's description winning.
#[test]
fn shapes_are_inlined_and_descriptions_are_one_line() {
    /// Kind of thing.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Kind {
        A,
        B,
    }
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        /// The kind, described
        /// on two lines.
        kind: Option<Kind>,
        plain: Kind,
    }
    let schema = schema_for::<Outer>(Contract::Output);
    assert!(schema.get("$defs").is_none(), "{schema}");
    assert_eq!(
        schema["properties"]["kind"],
        json!({"description": "The kind, described on two lines.", "enum": ["A", "B", null]})
    );
    assert_eq!(
        schema["properties"]["plain"],
        json!({"description": "Kind of thing.", "enum": ["A", "B"]})
    );
    let input = schema_for::<Outer>(Contract::Input);
    assert_eq!(input["properties"]["kind"]["enum"], json!(["A", "B"]));
}

#[test]
fn hygiene_finds_boolean_subschemas_and_formats_but_allows_closed_objects() {
    let schema = schema_for::<Sample>(Contract::Input);
    assert_eq!(
        hygiene_violations(&schema),
        vec!["/properties/anything: boolean or non-object schema true".to_string()]
    );
    let closed = json!({"type": "object", "additionalProperties": false,
        "properties": {"a": {"type": "array", "items": false}, "b": {"type": "string", "format": "uint8"}},
        "anyOf": [true]});
    let mut found = hygiene_violations(&closed);
    found.sort();
    assert_eq!(
        found,
        vec![
            "/anyOf/0: boolean or non-object schema true".to_string(),
            "/properties/a/items: boolean or non-object schema false".to_string(),
            "/properties/b/format: \"uint8\"".to_string(),
        ]
    );
}
