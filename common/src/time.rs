//! Wall-clock timestamps in the RFC 3339 UTC form used everywhere in public output.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// Milliseconds since the Unix epoch, now.
pub fn now_unix_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// RFC 3339 UTC text for a Unix time in milliseconds, e.g. `2026-11-29T18:00:00.123Z`.
pub fn rfc3339_ms(unix_ms: i64) -> String {
    let nanos = i128::from(unix_ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

/// RFC 3339 UTC text for now.
pub fn now_rfc3339() -> String {
    rfc3339_ms(now_unix_ms())
}
