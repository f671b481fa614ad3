//! In-process tests of the session core: the real store, leases, idempotency, turn hand-off,
//! runner generations, stops, expiry, recovery, write settlement and skill contexts, against [`fake_host`]'s
//! brokers instead of processes and Claude Code. The real runner's end-to-end tests are in
//! `gateway/tests/it`.

mod adoption;
mod answers;
mod deepseek;
mod ended;
mod fake_host;
mod hand_off;
mod harness;
mod keyed;
mod ledger_records;
mod lifecycle;
mod owners;
mod recovery;
mod retention;
mod skills;
mod state_budget;
mod subsessions;
mod transitions;
mod turns;
mod uncovered;
