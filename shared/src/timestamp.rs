//! Consensus timestamps and the date formats derived from them.
//!
//! The mirror node writes consensus time as `"seconds.nanoseconds"`. Every
//! time the project publishes (`Last-Modified`, `_created_at`, the stats
//! `timestamp`) is derived from one of these, never from the wall clock, so
//! the same sources always give the same bytes.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch. `u64` covers the years 1970 to 2554.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid consensus timestamp {0:?}: expected seconds.nanoseconds")]
pub struct InvalidTimestamp(pub String);

impl Timestamp {
    pub fn seconds(self) -> u64 {
        self.0 / 1_000_000_000
    }

    pub fn subsec_nanos(self) -> u32 {
        (self.0 % 1_000_000_000) as u32
    }

    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.0)
    }

    /// RFC 9110 HTTP-date, whole seconds (the format `Last-Modified` uses).
    pub fn http_date(self) -> String {
        httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(self.seconds()))
    }

    /// ISO 8601 in UTC with milliseconds, the form JavaScript's
    /// `Date.prototype.toISOString` prints: `2024-03-01T12:00:00.123Z`.
    pub fn iso8601(self) -> String {
        let secs = self.seconds();
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            (rem / 60) % 60,
            rem % 60,
            self.subsec_nanos() / 1_000_000
        )
    }
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl FromStr for Timestamp {
    type Err = InvalidTimestamp;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidTimestamp(text.to_string());
        let (secs, nanos) = text.split_once('.').unwrap_or((text, "0"));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(secs) || !digits(nanos) || nanos.len() > 9 {
            return Err(bad());
        }
        let secs: u64 = secs.parse().map_err(|_| bad())?;
        // "1.5" is half a second: right-pad the fraction to nine digits.
        let nanos: u64 = nanos.parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - nanos.len() as u32);
        secs.checked_mul(1_000_000_000).and_then(|n| n.checked_add(nanos)).map(Timestamp).ok_or_else(bad)
    }
}

impl fmt::Display for Timestamp {
    /// The mirror node's form, always with nine fraction digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}", self.seconds(), self.subsec_nanos())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mirror_form() {
        let cases = [
            ("1700000000.000000001", Some(1_700_000_000_000_000_001)),
            ("1700000000.5", Some(1_700_000_000_500_000_000)),
            ("1700000000", Some(1_700_000_000_000_000_000)),
            ("1700000000.1234567890", None),
            ("-1.0", None),
            ("1.x", None),
            ("", None),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<Timestamp>().ok().map(|t| t.0), expected, "{text:?}");
        }
        let t: Timestamp = "1700000000.000000001".parse().unwrap();
        assert_eq!(t.to_string(), "1700000000.000000001");
    }

    #[test]
    fn formats_iso_and_http_dates() {
        let cases = [
            ("0.0", "1970-01-01T00:00:00.000Z", "Thu, 01 Jan 1970 00:00:00 GMT"),
            ("951782400.25", "2000-02-29T00:00:00.250Z", "Tue, 29 Feb 2000 00:00:00 GMT"),
            ("1700000000.999999999", "2023-11-14T22:13:20.999Z", "Tue, 14 Nov 2023 22:13:20 GMT"),
            ("4102444799.0", "2099-12-31T23:59:59.000Z", "Thu, 31 Dec 2099 23:59:59 GMT"),
        ];
        for (text, iso, http) in cases {
            let t: Timestamp = text.parse().unwrap();
            assert_eq!(t.iso8601(), iso, "{text}");
            assert_eq!(t.http_date(), http, "{text}");
        }
    }
}
