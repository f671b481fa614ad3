//! The logical tools are discoverable: a scripted ChatGPT that knows only what `tools/list` says
//! writes a Read, an Edit and a RunCommand from the schema of `tool_calls` (one alternative per
//! logical tool) and `pending_turn.allowed_tools`, and all three are accepted and run on the
//! first try with the real runner.

use serde_json::{Map, Value, json};

use crate::support::*;
use crate::writes::{reply_calls, start_profile};

/// The `tool_calls` alternative advertised for the logical tool `name`.
fn alternative<'a>(reply_schema: &'a Value, name: &str) -> &'a Value {
    reply_schema["properties"]["tool_calls"]["items"]["anyOf"]
        .as_array()
        .expect("tool_calls items are one alternative per logical tool")
        .iter()
        .find(|alt| alt["properties"]["name"]["const"] == name)
        .unwrap_or_else(|| panic!("no tool_calls alternative for {name}"))
}

/// Whether `value` has the JSON type `schema` declares.
fn has_type(schema: &Value, value: &Value) -> bool {
    let fits = |t: &str| match t {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "array" => value
            .as_array()
            .is_some_and(|items| items.iter().all(|item| has_type(&schema["items"], item))),
        "object" => value.is_object(),
        _ => false,
    };
    match &schema["type"] {
        Value::String(t) => fits(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(fits),
        _ => schema.get("enum").is_some() || schema.get("const").is_some(),
    }
}

/// Write one call the way a model does from a schema: fill every required argument the
/// alternative declares with what it means to say, by the argument's advertised name, and
/// nothing the schema does not declare.
fn write_call(reply_schema: &Value, name: &str, meaning: &Map<String, Value>) -> Value {
    let alt = alternative(reply_schema, name);
    assert!(
        alt["description"].as_str().is_some_and(|d| d.len() > 40),
        "{name} has no usable description: {alt}"
    );
    let args_schema = &alt["properties"]["arguments"];
    let props = args_schema["properties"].as_object().unwrap();
    let mut arguments = Map::new();
    for required in args_schema["required"].as_array().unwrap() {
        let key = required.as_str().unwrap();
        let prop = &props[key];
        assert!(
            prop["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{name}.{key} is not described"
        );
        let value = meaning.get(key).unwrap_or_else(|| {
            panic!(
                "the model cannot tell what {name}.{key} means: {}",
                prop["description"]
            )
        });
        assert!(
            has_type(prop, value),
            "{name}.{key}: {value} does not fit {prop}"
        );
        arguments.insert(key.to_string(), value.clone());
    }
    for key in meaning.keys() {
        assert!(
            props.contains_key(key),
            "{name} declares no argument {key}: the model would not send it"
        );
    }
    json!({"name": name, "arguments": arguments})
}

#[tokio::test(flavor = "multi_thread")]
async fn read_edit_and_run_command_written_from_the_listing_run_first_time() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let file = root.join("notes.txt");
    std::fs::write(&file, "alpha\nneedle here\ngamma\n").unwrap();
    let path = file.to_string_lossy().to_string();

    // All ChatGPT knows: the listing.
    let client = tests::McpClient::connect(&gw.url(), gw.token())
        .await
        .unwrap();
    let listing = client.list_tools().await.unwrap();
    let reply_schema = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "native_session_reply_and_wait")
        .unwrap()["inputSchema"]
        .clone();

    let v = start_profile(&chat, &root, "direct_write", "disc-1").await;
    let allowed: Vec<&str> = v["pending_turn"]["allowed_tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in ["Read", "Edit", "RunCommand"] {
        assert!(allowed.contains(&name), "{name} not offered: {allowed:?}");
    }
    let meaning = |pairs: Value| pairs.as_object().unwrap().clone();
    let calls = json!([
        write_call(&reply_schema, "Read", &meaning(json!({"file_path": path}))),
        write_call(
            &reply_schema,
            "Edit",
            &meaning(
                json!({"file_path": path, "old_string": "needle here", "new_string": "thread here"})
            )
        ),
        write_call(
            &reply_schema,
            "RunCommand",
            &meaning(json!({"argv": ["cat", path]}))
        ),
    ]);

    let next = reply_calls(&chat, &v, "disc-r1", calls).await;
    let results = next["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{next}");
    for (result, name) in results.iter().zip(["Read", "Edit", "RunCommand"]) {
        assert_eq!(result["name"], name, "{result}");
        assert_eq!(result["status"], "ok", "{name} refused: {result}");
    }
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("needle here")
    );
    assert!(
        results[2]["output"]
            .as_str()
            .unwrap()
            .contains("thread here")
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nthread here\ngamma\n"
    );
    chat.stop(&session_id(&v), &lease_id(&v), "disc-stop", None)
        .await
        .unwrap();
}
