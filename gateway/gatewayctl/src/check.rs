//! One `doctor` check: its name, verdict, detail and the fix to try. Every topic's checks
//! (`doctor`, `autorun`, `oauth`, `service_file`) build them with `ok`, `warn` and `fail`.

use serde::Serialize;

/// Verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
}

pub(crate) fn ok(name: &str, detail: impl Into<String>) -> Check {
    Check {
        name: name.to_string(),
        status: Status::Ok,
        detail: detail.into(),
        fix: None,
    }
}

pub(crate) fn warn(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name: name.to_string(),
        status: Status::Warn,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

pub(crate) fn fail(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name: name.to_string(),
        status: Status::Fail,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}
