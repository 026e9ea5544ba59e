//! The mirror reconciler's brain: a pure decision table from (desired state, stored
//! state, what the owning shard actually does, time) to the next action
//! (`DECISIONS.md`, "Partition states"; reference §4). [`MirrorManager`] gathers the
//! inputs on every tick and carries the action out; nothing here does I/O or reads a
//! clock, so every row is unit-tested below.
//!
//! The table is level-triggered: it compares what should be with what is, not with
//! what the manager last did, so a lost fetcher event or a failed shard call is
//! repaired by the next tick (audit B-15).
//!
//! [`MirrorManager`]: super::manager::MirrorManager

use std::time::{Duration, Instant};

use dataplane::fetcher::MirrorFetchConfig;
use dataplane::wire::mirror::{DesiredMirrorState, MirrorPartitionState, MirrorStateEntry};

/// Settings of the manager (broker configs, reference §3.4).
#[derive(Debug, Clone)]
pub struct MirrorManagerConfig {
    pub retry_initial_backoff_ms: u64,
    pub retry_max_backoff_ms: u64,
    /// 0: never retry automatically.
    pub retry_max_attempts: i32,
}

impl Default for MirrorManagerConfig {
    fn default() -> Self {
        MirrorManagerConfig {
            retry_initial_backoff_ms: 1000,
            retry_max_backoff_ms: 300_000,
            retry_max_attempts: 100,
        }
    }
}

/// What the shard that owns a mirror partition actually does, as it reported on this
/// tick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The state its read-only gate holds (None: never set since the shard started).
    pub gate: Option<MirrorPartitionState>,
    /// The config of the fetcher that holds the partition, if one does.
    pub fetching_with: Option<MirrorFetchConfig>,
    /// That fetcher has fetched from the source without error since it last started.
    pub fetch_healthy: bool,
}

/// The next step for one mirror partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    /// PREPARING: LME look-up, truncation, then MIRRORING.
    Prepare,
    /// MIRRORING with a (re)started fetcher.
    Resume,
    Pause,
    /// The STOPPING steps, then STOPPED.
    Stop,
    /// The stored state is right; only the shard's gate lags behind.
    MarkStopped,
    MarkPaused,
    MarkFailed,
    /// A retried partition fetches again: its retry counter goes back to 0.
    ClearRetry,
}

/// One partition's inputs to [`decide`].
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub desired: DesiredMirrorState,
    pub stored: &'a MirrorStateEntry,
    pub observed: &'a Observed,
    /// The mirror's fetch config now (None: the mirror is gone).
    pub config: Option<&'a MirrorFetchConfig>,
    /// FAILED or a failed STOPPING: not again before this.
    pub retry_at: Option<Instant>,
    pub now: Instant,
}

fn stored_state(entry: &MirrorStateEntry) -> MirrorPartitionState {
    MirrorPartitionState::from_code(entry.state).unwrap_or(MirrorPartitionState::Unknown)
}

/// Retries are used up (or disabled, or the failure is not retryable): the partition
/// stays FAILED until an operator recovers it.
pub fn retries_exhausted(config: &MirrorManagerConfig, retry_attempt: i16) -> bool {
    let max = config.retry_max_attempts;
    retry_attempt < 0 || max <= 0 || i32::from(retry_attempt) >= max
}

/// The decision table.
pub fn decide(config: &MirrorManagerConfig, input: Inputs<'_>) -> Action {
    use DesiredMirrorState as D;
    use MirrorPartitionState as S;
    let state = stored_state(input.stored);
    let gate_is = |s: S| input.observed.gate == Some(s);
    let waiting = input.retry_at.is_some_and(|at| at > input.now);
    match (input.desired, state) {
        (D::Stopped, S::Stopped) if gate_is(S::Stopped) => Action::None,
        (D::Stopped, S::Stopped) => Action::MarkStopped,
        // A failed STOPPING is retried with backoff (audit B-13), whatever the retry
        // budget: stopping must end, and its steps are local.
        (D::Stopped, S::Failed) if waiting => Action::None,
        (D::Stopped, _) => Action::Stop,
        (D::Paused, S::Paused) if gate_is(S::Paused) => Action::None,
        (D::Paused, S::Paused) => Action::MarkPaused,
        // Never prepared: stays as it is until resumed.
        (D::Paused, S::Unknown | S::Stopped) => Action::None,
        (D::Paused, _) => Action::Pause,
        (D::Mirroring, S::Failed) => {
            if retries_exhausted(config, input.stored.retry_attempt) {
                return if gate_is(S::Failed) && input.observed.fetching_with.is_none() {
                    Action::None
                } else {
                    Action::MarkFailed
                };
            }
            if waiting {
                return if input.observed.fetching_with.is_some() {
                    Action::MarkFailed
                } else {
                    Action::None
                };
            }
            match S::from_code(input.stored.previous_state) {
                Some(S::Mirroring | S::Paused | S::Pausing) => Action::Resume,
                _ => Action::Prepare,
            }
        }
        (D::Mirroring, S::Unknown | S::Stopped | S::Preparing) => Action::Prepare,
        (D::Mirroring, S::Stopping) => Action::Stop,
        (D::Mirroring, S::Paused | S::Pausing) => Action::Resume,
        (D::Mirroring, S::Mirroring) => {
            let Some(config) = input.config else {
                return Action::None;
            };
            if !gate_is(S::Mirroring) || input.observed.fetching_with.as_ref() != Some(config) {
                // No fetcher (a lost failure event, a restart) or a changed config.
                Action::Resume
            } else if input.stored.retry_attempt > 0 && input.observed.fetch_healthy {
                Action::ClearRetry
            } else {
                Action::None
            }
        }
    }
}

/// The retry attempt a failure of this partition records: one more than the stored
/// counter, which a retry carries through PREPARING and MIRRORING until the fetcher is
/// healthy again (audit B-9); -1 when retrying cannot help.
pub fn next_attempt(stored: &MirrorStateEntry, retryable: bool) -> i16 {
    if retryable {
        stored.retry_attempt.max(0).saturating_add(1)
    } else {
        -1
    }
}

/// Exponential backoff for FAILED retries (reference §4.5): `initial * 2^(attempt-1)`,
/// capped at the maximum, times `jitter` (0.8..1.2 in production). Not retryable: an
/// hour (only a STOPPING retry uses it).
pub fn retry_backoff(config: &MirrorManagerConfig, attempt: i16, jitter: f64) -> Duration {
    if attempt < 0 {
        return Duration::from_secs(3600);
    }
    let exp = u32::try_from(attempt.max(1) - 1).unwrap_or(0).min(30);
    let base = config
        .retry_initial_backoff_ms
        .saturating_mul(1u64 << exp)
        .min(config.retry_max_backoff_ms.max(1));
    Duration::from_millis((base as f64 * jitter.clamp(0.0, 2.0)) as u64)
}

/// ±20% jitter from the clock's sub-second nanos (no RNG dependency for this).
pub fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    0.8 + 0.4 * (f64::from(nanos % 1000) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use DesiredMirrorState as D;
    use MirrorPartitionState as S;

    fn fetch_config(mirror: &str) -> MirrorFetchConfig {
        MirrorFetchConfig {
            mirror: mirror.to_string(),
            bootstrap_servers: "127.0.0.1:9092".to_string(),
            source_cluster_id: "src".to_string(),
            client_id: "c".to_string(),
            fetch_wait_max_ms: 500,
            fetch_min_bytes: 1,
            fetch_response_max_bytes: 1 << 20,
            fetch_max_bytes: 1 << 20,
            fetch_backoff_ms: 100,
            request_timeout_ms: 30_000,
            connect_timeout_ms: 10_000,
            fetch_connections: 1,
            security: Ok(Default::default()),
        }
    }

    fn entry(state: S, previous: S, retry_attempt: i16) -> MirrorStateEntry {
        MirrorStateEntry {
            state: state.code(),
            previous_state: previous.code(),
            retry_attempt,
            ..MirrorStateEntry::default()
        }
    }

    struct Case {
        desired: D,
        stored: MirrorStateEntry,
        observed: Observed,
        config: Option<MirrorFetchConfig>,
        retry_in: Option<i64>,
    }

    impl Case {
        fn new(desired: D, stored: MirrorStateEntry) -> Self {
            Case {
                desired,
                stored,
                observed: Observed::default(),
                config: Some(fetch_config("m")),
                retry_in: None,
            }
        }
        fn gate(mut self, s: S) -> Self {
            self.observed.gate = Some(s);
            self
        }
        fn fetching(mut self, config: MirrorFetchConfig, healthy: bool) -> Self {
            self.observed.fetching_with = Some(config);
            self.observed.fetch_healthy = healthy;
            self
        }
        /// The retry time, in ms from now (negative: passed).
        fn retry_in(mut self, ms: i64) -> Self {
            self.retry_in = Some(ms);
            self
        }
        fn decide_with(&self, config: &MirrorManagerConfig) -> Action {
            let now = Instant::now() + Duration::from_secs(10);
            let retry_at = self.retry_in.map(|ms| {
                if ms >= 0 {
                    now + Duration::from_millis(ms as u64)
                } else {
                    now - Duration::from_millis(ms.unsigned_abs())
                }
            });
            decide(
                config,
                Inputs {
                    desired: self.desired,
                    stored: &self.stored,
                    observed: &self.observed,
                    config: self.config.as_ref(),
                    retry_at,
                    now,
                },
            )
        }
        fn decide(&self) -> Action {
            self.decide_with(&MirrorManagerConfig::default())
        }
    }

    #[test]
    fn stopped_partitions_only_need_their_gate_set() {
        let stopped = entry(S::Stopped, S::Stopping, 0);
        assert_eq!(
            Case::new(D::Stopped, stopped.clone()).decide(),
            Action::MarkStopped
        );
        assert_eq!(
            Case::new(D::Stopped, stopped).gate(S::Stopped).decide(),
            Action::None
        );
    }

    #[test]
    fn every_state_but_stopped_stops_when_stop_is_desired() {
        for s in S::ALL {
            if s == S::Stopped {
                continue;
            }
            let case = Case::new(D::Stopped, entry(s, S::Mirroring, 0)).gate(s);
            assert_eq!(case.decide(), Action::Stop, "{s}");
        }
    }

    #[test]
    fn a_failed_stop_is_retried_after_its_backoff_only() {
        let failed = entry(S::Failed, S::Stopping, 3);
        let case = Case::new(D::Stopped, failed.clone()).gate(S::Failed);
        assert_eq!(case.retry_in(500).decide(), Action::None);
        let case = Case::new(D::Stopped, failed.clone()).gate(S::Failed);
        assert_eq!(case.retry_in(-1).decide(), Action::Stop);
        // Even with the retry budget used up: stopping must finish.
        let spent = entry(S::Failed, S::Stopping, 100);
        assert_eq!(Case::new(D::Stopped, spent).decide(), Action::Stop);
    }

    #[test]
    fn pause_rows() {
        assert_eq!(
            Case::new(D::Paused, entry(S::Paused, S::Pausing, 0)).decide(),
            Action::MarkPaused
        );
        assert_eq!(
            Case::new(D::Paused, entry(S::Paused, S::Pausing, 0))
                .gate(S::Paused)
                .decide(),
            Action::None
        );
        for s in [S::Unknown, S::Stopped] {
            assert_eq!(
                Case::new(D::Paused, entry(s, S::Unknown, 0)).decide(),
                Action::None
            );
        }
        for s in [
            S::Preparing,
            S::Mirroring,
            S::Pausing,
            S::Stopping,
            S::Failed,
        ] {
            assert_eq!(
                Case::new(D::Paused, entry(s, S::Mirroring, 0)).decide(),
                Action::Pause,
                "{s}"
            );
        }
    }

    #[test]
    fn mirroring_starts_with_preparing_from_nothing_stopped_or_an_interrupted_prepare() {
        for s in [S::Unknown, S::Stopped, S::Preparing] {
            assert_eq!(
                Case::new(D::Mirroring, entry(s, S::Unknown, 0)).decide(),
                Action::Prepare,
                "{s}"
            );
        }
        assert_eq!(
            Case::new(D::Mirroring, entry(S::Stopping, S::Mirroring, 0)).decide(),
            Action::Stop
        );
        for s in [S::Paused, S::Pausing] {
            assert_eq!(
                Case::new(D::Mirroring, entry(s, S::Mirroring, 0)).decide(),
                Action::Resume
            );
        }
    }

    #[test]
    fn a_mirroring_partition_without_a_fetcher_gets_one() {
        let mirroring = entry(S::Mirroring, S::Preparing, 0);
        // The shard restarted, or a failure event was lost: no fetcher holds it.
        let case = Case::new(D::Mirroring, mirroring.clone()).gate(S::Mirroring);
        assert_eq!(case.decide(), Action::Resume);
        let case = Case::new(D::Mirroring, mirroring.clone());
        assert_eq!(case.decide(), Action::Resume);
        let case = Case::new(D::Mirroring, mirroring.clone())
            .gate(S::Mirroring)
            .fetching(fetch_config("m"), false);
        assert_eq!(case.decide(), Action::None);
        // A changed mirror config restarts the fetcher.
        let mut other = fetch_config("m");
        other.fetch_wait_max_ms = 100;
        let case = Case::new(D::Mirroring, mirroring.clone())
            .gate(S::Mirroring)
            .fetching(other, true);
        assert_eq!(case.decide(), Action::Resume);
        // The mirror is gone: nothing to start.
        let mut case = Case::new(D::Mirroring, mirroring).gate(S::Mirroring);
        case.config = None;
        assert_eq!(case.decide(), Action::None);
    }

    #[test]
    fn a_retried_partition_clears_its_counter_once_it_fetches() {
        let retried = entry(S::Mirroring, S::Failed, 4);
        let fetching = Case::new(D::Mirroring, retried.clone())
            .gate(S::Mirroring)
            .fetching(fetch_config("m"), false);
        assert_eq!(fetching.decide(), Action::None);
        let healthy = Case::new(D::Mirroring, retried)
            .gate(S::Mirroring)
            .fetching(fetch_config("m"), true);
        assert_eq!(healthy.decide(), Action::ClearRetry);
    }

    #[test]
    fn failed_retries_wait_for_their_backoff_then_go_back_to_what_failed() {
        let after_fetch = entry(S::Failed, S::Mirroring, 2);
        let case = Case::new(D::Mirroring, after_fetch.clone()).gate(S::Failed);
        assert_eq!(case.retry_in(1000).decide(), Action::None);
        let case = Case::new(D::Mirroring, after_fetch).gate(S::Failed);
        assert_eq!(case.retry_in(-1).decide(), Action::Resume);
        for previous in [S::Paused, S::Pausing] {
            let case = Case::new(D::Mirroring, entry(S::Failed, previous, 1));
            assert_eq!(case.decide(), Action::Resume);
        }
        for previous in [S::Preparing, S::Unknown, S::Stopped] {
            let case = Case::new(D::Mirroring, entry(S::Failed, previous, 1));
            assert_eq!(case.decide(), Action::Prepare, "{previous}");
        }
        // A fetcher that still holds a FAILED partition is removed while it waits.
        let case = Case::new(D::Mirroring, entry(S::Failed, S::Mirroring, 1))
            .gate(S::Failed)
            .fetching(fetch_config("m"), true)
            .retry_in(1000);
        assert_eq!(case.decide(), Action::MarkFailed);
    }

    #[test]
    fn exhausted_or_non_retryable_failures_stay_failed_until_recovered() {
        let config = MirrorManagerConfig {
            retry_max_attempts: 3,
            ..MirrorManagerConfig::default()
        };
        for attempt in [3, 7, -1] {
            let case = Case::new(D::Mirroring, entry(S::Failed, S::Mirroring, attempt));
            assert_eq!(case.decide_with(&config), Action::MarkFailed, "{attempt}");
            let case =
                Case::new(D::Mirroring, entry(S::Failed, S::Mirroring, attempt)).gate(S::Failed);
            assert_eq!(case.decide_with(&config), Action::None, "{attempt}");
        }
        let case = Case::new(D::Mirroring, entry(S::Failed, S::Mirroring, 2)).gate(S::Failed);
        assert_eq!(case.decide_with(&config), Action::Resume);
        // 0 disables automatic retries.
        let never = MirrorManagerConfig {
            retry_max_attempts: 0,
            ..MirrorManagerConfig::default()
        };
        let case = Case::new(D::Mirroring, entry(S::Failed, S::Mirroring, 0)).gate(S::Failed);
        assert_eq!(case.decide_with(&never), Action::None);
    }

    #[test]
    fn the_retry_counter_survives_the_states_a_retry_passes_through() {
        // A retry of attempt 2 stored PREPARING (or MIRRORING) with the counter 2; its
        // failure is attempt 3, not 1.
        for s in [S::Preparing, S::Mirroring, S::Failed] {
            assert_eq!(next_attempt(&entry(s, S::Failed, 2), true), 3, "{s}");
        }
        assert_eq!(next_attempt(&entry(S::Mirroring, S::Preparing, 0), true), 1);
        assert_eq!(
            next_attempt(&entry(S::Mirroring, S::Preparing, 5), false),
            -1
        );
        assert_eq!(next_attempt(&entry(S::Failed, S::Mirroring, -1), true), 1);
    }

    #[test]
    fn backoff_doubles_up_to_its_maximum() {
        let config = MirrorManagerConfig {
            retry_initial_backoff_ms: 1000,
            retry_max_backoff_ms: 10_000,
            retry_max_attempts: 100,
        };
        let ms = |a| retry_backoff(&config, a, 1.0).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(5), ms(50)],
            [1000, 2000, 4000, 8000, 10_000, 10_000]
        );
        assert_eq!(ms(0), 1000);
        assert_eq!(retry_backoff(&config, 2, 0.8).as_millis(), 1600);
        assert_eq!(retry_backoff(&config, -1, 1.0), Duration::from_secs(3600));
        let j = jitter();
        assert!((0.8..=1.2).contains(&j), "{j}");
    }
}
