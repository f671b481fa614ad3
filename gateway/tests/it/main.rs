//! Integration tests that drive the real `gateway` binary over MCP with a scripted ChatGPT and the
//! real, pinned Claude Code CLI as the runner.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared setup: a gateway process with the real runner, work dirs, cleanup of session processes.
mod support;

// A whole read_only session end to end with the real runner.
mod e2e;
// The ledger chain of a real session verifies; edits of events and receipts are named.
mod ledger_verify;
// Bad input: each refusal with its specific code, state left consistent.
mod bad_input;
// Idempotency keys, reply ids, request ids; leases issued, renewed, checked, expired.
mod idempotency_lease;
// OAuth 2.1 for the connector: discovery, registration, consent with the owner's approval code,
// tokens, rotation, revocation, auth modes, and every refusal.
mod oauth;
// MCP protocol surface: auth, Host check, unknown methods and tools, handshake revisions.
mod protocol;
// HTTP conventions (401 challenge, bearer scheme, trailing slashes, parse errors) and the limits
// on slow, idle and too many connections.
mod http_conventions;
// No PID, path, token or secret in any public answer of a full session.
mod leak;
// One gateway per state dir: a second one exits, the first's sessions go on.
mod instance_lock;
// Gateway restarts, re-adoption, forged records, lease expiry, runner loss.
mod restart;
// The read tools across / with the real runner: bounded, sorted answers, protected paths refused.
mod reads;
// The runner's confinement probed from inside: only the broker's port, only its private dirs.
mod runner_confinement;
// RunCommand: the adversarial sandbox catalogue in process, and one session with the real runner.
mod run_command;
// The write tools end to end with the real runner: direct_write and worktree_write.
mod writes;
// Retention: `gatewayctl prune` removes ended sessions' files, keeps the ledger (issue 24).
mod prune;
// Recorded idempotent answers past a full state budget: bounded per session, freed by prune.
mod answers_budget;
// Floods of recovers and stops on ended sessions store nothing and never lock the owner out.
mod ended_flood;
// Concurrent worktree_write starts go one at a time through the budget check and checkout.
mod worktree_budget;
// Auto-run places: writes that would run by themselves later are refused, per-class opt-in.
mod autorun;
mod autorun_env;
// The one protected set through the public surface: start, reads, commands, writes, listings.
mod protected;
// The gateway's own Git and executable: repository config that would run programs, the pinned
// helper, command limits and the live-session cap.
mod exec_hardening;
// Crashes of the broker and the gateway at every step of the durable write protocol.
mod write_crashes;
// Read, Edit and RunCommand written only from the tools/list schemas run on the first try.
mod discoverable_tools;
// Every stable error code with its message, snapshotted.
mod error_messages;
// Skill contexts: frozen at start, in every prompt turn and runner generation, nowhere else.
mod skills;
// DeepSeek explicit sub-sessions: the real runner against a scripted fake DeepSeek.
mod deepseek;
// DeepSeek answers from a hostile endpoint (issue 23/6): each fails once, specifically.
mod deepseek_hostile;
