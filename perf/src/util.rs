//! Small helpers shared by the workloads: durations on the command line, wall-clock
//! time, Kafka error names, number formatting and connecting for one API.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dataplane::client::{ClientError, ConnectionConfig, KafkaConnection};
use kafka_protocol::protocol::Request;

/// A client connection to `addr` and the version of `R` it speaks, the highest both
/// sides know within `ours`.
pub async fn connect_for<R: Request>(
    addr: &str,
    config: &ConnectionConfig,
    ours: (i16, i16),
) -> Result<(KafkaConnection, i16), ClientError> {
    let conn = KafkaConnection::connect_with(addr, config).await?;
    let version = conn
        .pick_version(R::KEY, ours.0, ours.1)
        .ok_or(ClientError::Unsupported {
            api_key: R::KEY,
            version: ours.1,
            broker_range: conn.api_range(R::KEY),
        })?;
    Ok((conn, version))
}

/// Parses `30s`, `500ms`, `2m`, `1h` or a bare number of seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit_s) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (examples: 30s, 500ms, 2m)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{s:?} is not a positive duration"));
    }
    Ok(Duration::from_secs_f64(value * unit_s))
}

/// Microseconds since the Unix epoch now.
pub fn wall_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// `2026-11-29T12:34:56Z` for the current time (UTC).
pub fn utc_now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The name of a Kafka (or mirror) error code, for messages and error tallies.
pub fn error_name(code: i16) -> String {
    if let Some(name) = dataplane::wire::mirror::errors::name(code) {
        return name.to_string();
    }
    match kafka_protocol::ResponseError::try_from_code(code) {
        Some(kafka_protocol::ResponseError::Unknown(_)) | None => format!("error code {code}"),
        Some(e) => format!("{e:?}"),
    }
}

/// MB (10^6 bytes) per second.
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    per_s(bytes, elapsed) / 1e6
}

pub fn per_s(count: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        count as f64 / s
    } else {
        0.0
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The command line this process was started with, for reports.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(utc_now_rfc3339().len(), 20);
    }

    #[test]
    fn formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(error_name(6), "NotLeaderOrFollower");
        assert_eq!(error_name(136), "CLUSTER_MIRROR_ALREADY_EXISTS");
        assert_eq!(error_name(-77), "error code -77");
        assert!((mb_per_s(2_000_000, Duration::from_secs(2)) - 1.0).abs() < 1e-9);
        assert_eq!(per_s(5, Duration::ZERO), 0.0);
    }
}
