//! Property tests of the path policy's lexical check and canonicalisation: no panic on any path
//! bytes, every refusal a typed `PathRefusal` with a stable code, what is accepted is absolute and
//! free of `.`/`..`/NUL, and nothing under a protected location (the state dir, `~/.ssh`, any
//! `.git`) is ever accepted, however it is spelled. `PROPTEST_CASES` sets the number of cases.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sandbox::path_policy::PathPolicy;

const HOME: &str = "/home/owner";
const STATE: &str = "/home/owner/.local/state/native-gateway";

/// Built once: building a policy looks up the protected set's identities, which costs far more
/// than a check.
fn policy() -> &'static PathPolicy {
    static POLICY: std::sync::LazyLock<PathPolicy> = std::sync::LazyLock::new(|| {
        PathPolicy::new(PathBuf::from(HOME), PathBuf::from(STATE), Vec::new())
    });
    &POLICY
}

/// One path segment: ordinary names, the tricky ones, and any bytes.
fn segment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[a-zA-Z0-9_.-]{1,12}".prop_map(String::into_bytes),
        Just(b".".to_vec()),
        Just(b"..".to_vec()),
        Just(Vec::new()),
        Just(b".git".to_vec()),
        Just(b".GIT".to_vec()),
        Just(b".ssh".to_vec()),
        Just(b".SSH".to_vec()),
        prop::collection::vec(any::<u8>(), 0..8),
        Just(vec![b'a'; 300]),
    ]
}

/// A path: an optional root or protected prefix, then segments joined by `/`.
fn path() -> impl Strategy<Value = Vec<u8>> {
    let prefix = prop_oneof![
        Just(b"/".to_vec()),
        Just(Vec::new()),
        Just(format!("{HOME}/").into_bytes()),
        Just(format!("{HOME}/.ssh/").into_bytes()),
        Just(format!("{STATE}/").into_bytes()),
        Just(b"/tmp/repo/.git/".to_vec()),
        Just(b"/proc/self/".to_vec()),
    ];
    (
        prefix,
        prop::collection::vec(segment(), 0..6),
        any::<bool>(),
    )
        .prop_map(|(mut out, segments, trailing)| {
            for (i, s) in segments.iter().enumerate() {
                if i > 0 {
                    out.push(b'/');
                }
                out.extend_from_slice(s);
            }
            if trailing {
                out.push(b'/');
            }
            out
        })
}

proptest! {
    /// Any path: accepted, or a refusal with a stable code. Accepted paths are absolute, with no
    /// NUL, no `.` or `..` component and no empty component inside.
    #[test]
    fn check_never_panics_and_accepts_only_clean_paths(bytes in path()) {
        let policy = policy();
        let path = Path::new(OsStr::from_bytes(&bytes));
        match policy.check(path) {
            Ok(()) => {
                prop_assert!(bytes.starts_with(b"/"));
                prop_assert!(!bytes.contains(&0));
                let inner = bytes.strip_suffix(b"/").unwrap_or(&bytes);
                for segment in inner.split(|b| *b == b'/').skip(1) {
                    prop_assert!(segment != b"." && segment != b".." && !segment.is_empty());
                }
                prop_assert!(!policy.is_protected(path));
            }
            Err(refusal) => {
                prop_assert!(!refusal.code().as_str().is_empty());
                prop_assert!(!refusal.to_string().is_empty());
            }
        }
    }

    /// Anything under the state dir, `~/.ssh` or a `.git` directory is refused, whatever follows.
    #[test]
    fn protected_locations_are_never_accepted(
        base in prop_oneof![
            Just(STATE.to_string()),
            Just(format!("{HOME}/.ssh")),
            Just("/tmp/repo/.git".to_string()),
        ],
        rest in prop::collection::vec("[a-zA-Z0-9_.-]{1,12}", 0..4),
    ) {
        let mut text = base;
        for segment in rest {
            text.push('/');
            text.push_str(&segment);
        }
        prop_assert!(policy().check(Path::new(&text)).is_err(), "{} accepted", text);
    }

    /// Resolving a working directory that does not exist (any spelling): a typed refusal.
    #[test]
    fn working_directory_resolution_never_panics(bytes in path()) {
        let mut full = b"/nonexistent-ngw-props/".to_vec();
        full.extend_from_slice(&bytes);
        let given = Path::new(OsStr::from_bytes(&full));
        if let Err(refusal) = policy().resolve_working_directory(given) {
            prop_assert!(!refusal.code().as_str().is_empty());
        }
    }
}
