//! A YAML text as [`Node`]s, from yaml-rust2's events: scalars decoded (escapes, folding),
//! aliases resolved to a copy of their anchor's node, duplicate keys all kept (a tool may take
//! either), and a bound on the nodes aliases copy so an alias bomb is no YAML this reads.

use std::collections::HashMap;

use yaml_rust2::Event;
use yaml_rust2::parser::Parser;
use yaml_rust2::scanner::TScalarStyle;

use super::Node;

/// The nodes a text may build, copies for aliases and anchors included; past it the text
/// counts as unparseable (and is looked at word by word), never as parsed in part.
const MAX_NODES: usize = 100_000;

/// How deep collections may nest: the walks of [`Node`] recurse.
const MAX_DEPTH: usize = super::MAX_DEPTH;

/// A collection being read: a sequence's items, or a mapping's entries and its key waiting
/// for a value.
enum Open {
    List(Vec<Node>),
    Map(Vec<(Node, Node)>, Option<Node>),
}

/// The documents of `text`, or `None` when it is no YAML this parser reads.
pub(super) fn documents(text: &str) -> Option<Vec<Node>> {
    let mut parser = Parser::new_from_str(text);
    let mut docs = Vec::new();
    let mut open: Vec<(Open, usize)> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut budget = MAX_NODES;
    loop {
        let (event, _) = parser.next_token().ok()?;
        let (node, anchor) = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
            Event::Alias(id) => {
                let node = anchors.get(&id)?.clone();
                budget = budget.checked_sub(size(&node))?;
                (node, 0)
            }
            Event::Scalar(value, style, anchor, _) => {
                budget = budget.checked_sub(1)?;
                (scalar(value, style), anchor)
            }
            Event::SequenceStart(_, _) | Event::MappingStart(_, _) if open.len() >= MAX_DEPTH => {
                return None;
            }
            Event::SequenceStart(anchor, _) => {
                open.push((Open::List(Vec::new()), anchor));
                continue;
            }
            Event::MappingStart(anchor, _) => {
                open.push((Open::Map(Vec::new(), None), anchor));
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                budget = budget.checked_sub(1)?;
                let (collection, anchor) = open.pop()?;
                let node = match collection {
                    Open::List(items) => Node::List(items),
                    Open::Map(entries, _) => Node::Map(entries),
                };
                (node, anchor)
            }
        };
        if anchor != 0 {
            // The copy kept for later aliases counts against the bound too.
            budget = budget.checked_sub(size(&node))?;
            anchors.insert(anchor, node.clone());
        }
        match open.last_mut() {
            None => docs.push(node),
            Some((Open::List(items), _)) => items.push(node),
            Some((Open::Map(entries, key), _)) => match key.take() {
                None => *key = Some(node),
                Some(key) => entries.push((key, node)),
            },
        }
    }
    Some(docs)
}

/// A scalar's node: a plain null (`~`, `null`, nothing) names nothing; every other scalar is
/// its decoded text, numbers and booleans included (none of them is a path).
fn scalar(value: String, style: TScalarStyle) -> Node {
    let null = matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL");
    if style == TScalarStyle::Plain && null {
        Node::Other
    } else {
        Node::Str(value)
    }
}

/// How many nodes `node` holds.
fn size(node: &Node) -> usize {
    match node {
        Node::Str(_) | Node::Other => 1,
        Node::List(items) => 1 + items.iter().map(size).sum::<usize>(),
        Node::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| size(k) + size(v))
                .sum::<usize>()
        }
    }
}
