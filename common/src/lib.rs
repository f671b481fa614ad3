//! Shared vocabulary of Native Gateway: the gateway↔broker wire protocol, its codec, hashing and ids,
//! the logical tools and capability profiles, and the public result shapes both sides produce.
//!
//! Layout:
//! - `protocol`: one message enum per direction (`GatewayToBroker`, `BrokerToGateway`) and payloads.
//! - `codec`: the only place that turns wire messages into bytes and back.
//! - `tools`: logical tool names, capability profiles, argument types and their schemas.
//! - `outcome`: the stable codes of tool outcomes and refusals (`OutcomeCode`).
//! - `schema`: how the public JSON Schemas are generated, and their hygiene rules.
//! - `skills`: skill ids, the normalisation and pin of a SKILL.md, its instruction body.
//! - `hash`: SHA-256, canonical JSON, HMAC proofs and secret generation.
//! - `time`: RFC 3339 timestamps.
//! - `display`: the one display sanitiser (what never reaches a terminal raw).
//! - `state_schema`: the SQL of the gateway's state database.
//! - `ledger_chain`: the ledger's hash chain, its signed head, and their check.
//! - `admin`: the owner's admin socket protocol (gatewayctl ↔ the running gateway).
//!
//! Architecture invariant: this crate depends on no other workspace crate, starts no runtime and
//! spawns no process.

pub mod admin;
pub mod codec;
pub mod display;
pub mod hash;
pub mod ledger_chain;
pub mod outcome;
pub mod protocol;
pub mod schema;
pub mod skills;
pub mod state_schema;
pub mod time;
pub mod tools;
