//! Test-only fail points: named places where a test can stop the broker on the spot, so
//! that crash recovery between two steps is tested at that exact step instead of by a
//! timed SIGKILL that lands somewhere near it.
//!
//! `TWINLOG_FAIL_POINTS=name[,name=hang...]` (read once at start) arms them. An armed
//! point logs one ERROR line naming itself and aborts the process (no destructors, no
//! flush: what a SIGKILL or a power cut leaves); `name=hang` instead never lets the task
//! that reaches it go on (a step that stalls, while the rest of the broker serves).
//! Unset, a point costs one lookup in an empty map; they sit on control-plane steps,
//! never on the per-batch path.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The environment variable that arms fail points.
pub const FAIL_POINTS_ENV: &str = "TWINLOG_FAIL_POINTS";

/// What an armed point does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arming {
    Abort,
    Hang,
}

fn armed() -> &'static HashMap<String, Arming> {
    static ARMED: OnceLock<HashMap<String, Arming>> = OnceLock::new();
    ARMED.get_or_init(|| {
        std::env::var(FAIL_POINTS_ENV)
            .map(|v| parse(&v))
            .unwrap_or_default()
    })
}

fn parse(value: &str) -> HashMap<String, Arming> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_suffix("=hang") {
            Some(name) => (name.to_string(), Arming::Hang),
            None => (s.trim_end_matches("=abort").to_string(), Arming::Abort),
        })
        .collect()
}

/// Aborts the process here if `name` is armed (or never returns, if armed to hang).
pub async fn fail_point(name: &str) {
    match armed().get(name) {
        None => {}
        Some(Arming::Abort) => {
            tracing::error!(
                fail_point = name,
                "fail point reached: aborting the process"
            );
            eprintln!("twinlog: fail point {name} reached: aborting");
            std::process::abort();
        }
        Some(Arming::Hang) => {
            tracing::error!(fail_point = name, "fail point reached: this task hangs");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_a_comma_separated_list() {
        let set = parse(" stopping.after_bump ,,mirror.delete.before_tombstones=hang,x=abort");
        assert_eq!(set.len(), 3);
        assert_eq!(set.get("stopping.after_bump"), Some(&Arming::Abort));
        assert_eq!(
            set.get("mirror.delete.before_tombstones"),
            Some(&Arming::Hang)
        );
        assert_eq!(set.get("x"), Some(&Arming::Abort));
        assert!(parse("").is_empty());
    }

    #[test]
    fn an_unarmed_point_does_nothing() {
        futures::executor::block_on(fail_point("no.such.point"));
    }
}
