//! Policy and OS enforcement shared by the executor and (later) the command sandbox: which paths
//! are protected, and how to open them without following symlinks.
//!
//! Architecture invariant: knows nothing of sessions, MCP or sockets; depends on no workspace crate.

pub mod path_policy;
