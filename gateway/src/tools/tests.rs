//! The tool listing as clients read it: snapshots of the schemas and descriptions, and the
//! rules every advertised schema follows (annotations, closed inputs, described parameters,
//! standard keywords, the size budget).

use serde_json::Value;

use super::listing as tools;

/// The tool list is what ChatGPT caches: any change to it must be deliberate.
#[test]
fn tool_list_snapshot() {
    let tools = serde_json::to_value(tools()).unwrap();
    insta::assert_json_snapshot!(tools);
}

#[test]
fn every_tool_has_all_four_annotations_and_closed_input() {
    for tool in tools() {
        let value = serde_json::to_value(&tool).unwrap();
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(
                value["annotations"][hint].is_boolean(),
                "{} lacks {hint}",
                tool.name
            );
        }
        assert_eq!(value["inputSchema"]["additionalProperties"], false);
        let view = &value["outputSchema"]["anyOf"][0];
        assert!(view["required"].as_array().unwrap().len() > 10);
        assert_eq!(value["outputSchema"]["type"], "object");
    }
}

/// Standard JSON Schema only, everywhere in the listing: no boolean sub-schemas (strict
/// clients reject the list), no custom `format` (the Inspector warns on each).
#[test]
fn every_schema_in_the_listing_is_clean() {
    for tool in tools() {
        let value = serde_json::to_value(&tool).unwrap();
        for which in ["inputSchema", "outputSchema"] {
            let found = common::schema::hygiene_violations(&value[which]);
            assert!(found.is_empty(), "{} {which}: {found:#?}", tool.name);
        }
    }
}

/// Every property of every input schema, the logical tools' arguments included, says what
/// it is (a constant says it by itself).
#[test]
fn every_input_parameter_is_described() {
    fn walk(schema: &Value, at: &str, missing: &mut Vec<String>, total: &mut usize) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                let here = format!("{at}.{name}");
                *total += 1;
                let described = prop
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| d.len() >= 8);
                // A constant says what it is; a tool call's `arguments` are described by
                // the call's alternative (checked as an item below).
                if !described && prop.get("const").is_none() && name != "arguments" {
                    missing.push(here.clone());
                }
                walk(prop, &here, missing, total);
            }
        }
        for key in ["items", "anyOf", "oneOf"] {
            match schema.get(key) {
                Some(Value::Array(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        if item.get("properties").is_some() && item.get("description").is_none() {
                            missing.push(format!("{at}[{i}]"));
                        }
                        walk(item, &format!("{at}[{i}]"), missing, total);
                    }
                }
                Some(item @ Value::Object(_)) => walk(item, &format!("{at}[]"), missing, total),
                _ => {}
            }
        }
    }
    let (mut missing, mut total) = (Vec::new(), 0);
    for tool in tools() {
        let value = serde_json::to_value(&tool).unwrap();
        walk(&value["inputSchema"], &tool.name, &mut missing, &mut total);
    }
    assert!(
        total > 60,
        "only {total} parameters found: the walk is broken"
    );
    assert!(missing.is_empty(), "undescribed: {missing:#?}");
}

/// The listing goes into every ChatGPT conversation: keep it within budget. It was 36.7 KB
/// with four untyped fields, 16 undescribed parameters and no logical tool schemas; with
/// those, 49.6 KB before the outputSchema was compacted, 44.5 KB after; 46.1 KB with
/// `pending_turn.skill_contexts` (about 215 bytes in each of the six outputSchemas); 49.5 KB
/// with the three DeepSeek sub-session controls in `tool_calls` and their summary in the
/// outputSchemas; 52.5 KB with `conversation_restarted`, `pending_turn.notice` and
/// `workspace_changed` in the outputSchemas and the design's guidance back in the descriptions
/// (profiles, protected places, what recover does when it fails, stopping a sub-session); 53.0
/// KB with `storage_full` and RunCommand's layer (`fresh_layer`).
#[test]
fn the_listing_stays_compact() {
    let listing = serde_json::json!({"tools": tools()});
    let bytes = serde_json::to_vec(&listing).unwrap().len();
    assert!(bytes <= LISTING_BUDGET_BYTES, "tools/list is {bytes} bytes");
}
const LISTING_BUDGET_BYTES: usize = 54_000;

/// The descriptions as ChatGPT reads them, one per line: any change is deliberate.
#[test]
fn tool_descriptions_snapshot() {
    fn params(schema: &Value, at: &str, out: &mut String) {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                let mark = if required.contains(&name.as_str()) {
                    ""
                } else {
                    "?"
                };
                let text = prop["description"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| prop.get("const").map(|c| format!("= {c}")))
                    .unwrap_or_default();
                out.push_str(&format!("  {at}{name}{mark}: {text}\n"));
                if name == "tool_calls" {
                    for alt in prop["items"]["anyOf"].as_array().into_iter().flatten() {
                        let tool = alt["properties"]["name"]["const"].as_str().unwrap_or("?");
                        out.push_str(&format!(
                            "    [{tool}] {}\n",
                            alt["description"].as_str().unwrap_or("")
                        ));
                        params(&alt["properties"]["arguments"], "      ", out);
                    }
                }
            }
        }
    }
    let mut out = String::new();
    for tool in tools() {
        let value = serde_json::to_value(&tool).unwrap();
        out.push_str(&format!(
            "{} ({})\n  {}\n",
            tool.name,
            value["title"].as_str().unwrap_or(""),
            tool.description.as_deref().unwrap_or("")
        ));
        params(&value["inputSchema"], "", &mut out);
        out.push('\n');
    }
    insta::assert_snapshot!(out);
}
