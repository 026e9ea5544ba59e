//! The controller's thread: admin requests from every shard queue up on one bounded
//! channel and are applied one at a time on a plain OS thread (never a shard), so the
//! metadata log's blocking writes and fsyncs never stall the data plane.

use std::sync::Arc;
use std::thread::JoinHandle;

use dataplane::controller::{AdminRequest, AdminResponse, ControllerHandle};
use dataplane::metadata::MetadataCell;
use dataplane::shard::ShardRouter;
use futures::channel::oneshot;
use kafka_protocol::ResponseError;

use crate::controller::{Controller, ControllerConfig, ControllerError, PartitionOps};

type Envelope = (AdminRequest, oneshot::Sender<AdminResponse>);

/// What the controller thread is woken for: a request, or (in a quorum) a tick to apply
/// what the other controllers committed.
enum Wake {
    Request(Envelope),
    Tick,
}

/// A request the controller thread spends longer on is logged (it holds up the queue).
const SLOW_REQUEST: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a quorum member's controller applies what others committed.
const CATCH_UP_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// The data plane's way in: a [`ControllerHandle`] that queues requests for the
/// controller thread. It never blocks: a full or closed queue is answered at once.
#[derive(Debug, Clone)]
pub struct ControllerClient {
    sender: async_channel::Sender<Wake>,
}

impl ControllerHandle for ControllerClient {
    fn submit(&self, request: AdminRequest) -> oneshot::Receiver<AdminResponse> {
        let (tx, rx) = oneshot::channel();
        if let Err(e) = self.sender.try_send(Wake::Request((request, tx))) {
            let (error_code, message) = match &e {
                async_channel::TrySendError::Full(_) => (
                    ResponseError::RequestTimedOut.code(),
                    "the controller queue is full".to_string(),
                ),
                async_channel::TrySendError::Closed(_) => (
                    ResponseError::BrokerNotAvailable.code(),
                    "the controller is shutting down".to_string(),
                ),
            };
            if let Wake::Request((_, tx)) = e.into_inner() {
                let _ = tx.send(AdminResponse::Failed {
                    error_code,
                    message,
                });
            }
        }
        rx
    }
}

/// The running controller thread.
#[derive(Debug)]
pub struct ControllerThread {
    sender: async_channel::Sender<Wake>,
    join: JoinHandle<()>,
}

impl ControllerThread {
    /// Stops taking requests, refuses those still queued (BROKER_NOT_AVAILABLE), and
    /// waits for the thread to finish the one it is on.
    pub fn shutdown(self) -> Result<(), ControllerError> {
        self.sender.close();
        self.join.join().map_err(|_| ControllerError::Panicked)
    }
}

/// Opens the metadata log, replays it and publishes the image to `metadata` before
/// returning (so shards start from the committed state), then starts the controller
/// thread. Partition logs of new topics are created on the shards of `router`.
pub fn spawn_controller(
    config: &ControllerConfig,
    metadata: Arc<MetadataCell>,
    router: ShardRouter,
) -> Result<(Arc<dyn ControllerHandle>, ControllerThread), ControllerError> {
    let (client, thread) = spawn_controller_with(config, metadata, router)?;
    Ok((Arc::new(client), thread))
}

/// [`spawn_controller`] with any [`PartitionOps`] (tests run it without shards).
pub fn spawn_controller_with<P: PartitionOps + 'static>(
    config: &ControllerConfig,
    metadata: Arc<MetadataCell>,
    ops: P,
) -> Result<(ControllerClient, ControllerThread), ControllerError> {
    let controller = match &config.quorum {
        Some(membership) => Controller::open_in_quorum(config, metadata, ops, membership)?,
        None => Controller::open(config, metadata, ops)?,
    };
    let (sender, receiver) = async_channel::bounded::<Wake>(config.queue_max.max(1));
    if config.quorum.is_some() {
        let ticks = sender.clone();
        std::thread::Builder::new()
            .name("twinlog-controller-tick".to_string())
            .spawn(move || loop {
                std::thread::sleep(CATCH_UP_EVERY);
                match ticks.try_send(Wake::Tick) {
                    Ok(()) | Err(async_channel::TrySendError::Full(_)) => {}
                    Err(async_channel::TrySendError::Closed(_)) => return,
                }
            })
            .map_err(ControllerError::Spawn)?;
    }
    let join = std::thread::Builder::new()
        .name("twinlog-controller".to_string())
        .spawn(move || run(controller, receiver))
        .map_err(ControllerError::Spawn)?;
    Ok((
        ControllerClient {
            sender: sender.clone(),
        },
        ControllerThread { sender, join },
    ))
}

fn run<P: PartitionOps>(mut controller: Controller<P>, receiver: async_channel::Receiver<Wake>) {
    while let Ok(wake) = receiver.recv_blocking() {
        match wake {
            // Shutdown closed the queue once the shards and their connections ended:
            // no one waits for what is still queued, and a forwarded change could hold
            // the thread for seconds. It is refused as the closed queue would.
            Wake::Request((_, reply)) if receiver.is_closed() => {
                let _ = reply.send(AdminResponse::Failed {
                    error_code: ResponseError::BrokerNotAvailable.code(),
                    message: "the controller is shutting down".to_string(),
                });
            }
            Wake::Tick if receiver.is_closed() => {}
            Wake::Request((request, reply)) => {
                let started = std::time::Instant::now();
                let response = controller.handle(&request);
                if started.elapsed() >= SLOW_REQUEST {
                    let what = format!("{request:?}");
                    tracing::warn!(
                        took_ms = started.elapsed().as_millis() as u64,
                        request = %what.chars().take(200).collect::<String>(),
                        "slow controller request"
                    );
                }
                // The asker may have gone away (connection closed); nothing to do then.
                let _ = reply.send(response);
            }
            Wake::Tick => {
                controller.catch_up();
            }
        }
        // Snapshots wait for a moment with nothing queued (answers first).
        if receiver.is_empty() && !receiver.is_closed() {
            controller.snapshot_if_due();
        }
    }
    tracing::info!("controller stopped");
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use dataplane::controller::NewTopic;
    use dataplane::log::LogConfig;
    use dataplane::metadata::MetadataImage;

    use super::*;
    use crate::state::PartitionAction;

    #[derive(Debug, Default)]
    struct CountingOps(Arc<AtomicUsize>);

    impl PartitionOps for CountingOps {
        fn shard_count(&self) -> usize {
            2
        }

        fn execute(&self, actions: &[PartitionAction]) -> Vec<Result<(), String>> {
            self.0.fetch_add(actions.len(), Ordering::SeqCst);
            actions.iter().map(|_| Ok(())).collect()
        }
    }

    /// Ops whose first `execute` waits for `release` (it holds the controller thread).
    #[derive(Debug)]
    struct HeldOps {
        entered: std::sync::mpsc::Sender<()>,
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl PartitionOps for HeldOps {
        fn shard_count(&self) -> usize {
            1
        }

        fn execute(&self, actions: &[PartitionAction]) -> Vec<Result<(), String>> {
            let _ = self.entered.send(());
            let _ = self.release.lock().expect("lock").recv();
            actions.iter().map(|_| Ok(())).collect()
        }
    }

    fn config(dir: &std::path::Path) -> ControllerConfig {
        ControllerConfig {
            data_dir: dir.to_path_buf(),
            node_id: 0,
            advertised: "127.0.0.1:9092".parse().expect("addr"),
            default_log_config: LogConfig::default(),
            num_partitions: 1,
            queue_max: 4,
            mirror_state_partitions: 3,
            quorum: None,
            cluster: Default::default(),
        }
    }

    fn new_topic(name: &str) -> AdminRequest {
        AdminRequest::CreateTopics {
            topics: vec![NewTopic {
                name: name.into(),
                num_partitions: 1,
                replication_factor: 1,
                assignments: Vec::new(),
                configs: vec![],
            }],
            validate_only: false,
        }
    }

    #[test]
    fn a_request_still_queued_at_shutdown_is_refused_not_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (entered, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release) = std::sync::mpsc::channel();
        let ops = HeldOps {
            entered,
            release: std::sync::Mutex::new(release),
        };
        let cell = Arc::new(MetadataCell::new(MetadataImage::empty(
            String::new(),
            0,
            "127.0.0.1:9092".parse().expect("addr"),
        )));
        let (client, thread) =
            spawn_controller_with(&config(dir.path()), Arc::clone(&cell), ops).expect("spawn");
        let running = client.submit(new_topic("running"));
        entered_rx.recv().expect("the first request runs");
        let queued = client.submit(new_topic("queued"));
        let stopping = std::thread::spawn(move || thread.shutdown());
        while !client.sender.is_closed() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        release_tx.send(()).expect("release");
        // A second release, so that a queued request that ran would answer (and fail
        // the test) rather than block; the thread may have ended and dropped the end.
        let _ = release_tx.send(());
        let first = futures::executor::block_on(running).expect("answer");
        assert_eq!(
            first,
            AdminResponse::Results(vec![dataplane::controller::AdminResult::ok("running")])
        );
        match futures::executor::block_on(queued).expect("answer") {
            AdminResponse::Failed {
                error_code,
                message,
            } => {
                assert_eq!(error_code, ResponseError::BrokerNotAvailable.code());
                assert!(message.contains("shutting down"), "{message}");
            }
            other => panic!("the queued request ran: {other:?}"),
        }
        stopping.join().expect("join").expect("shutdown");
        assert!(cell.load().topic("queued").is_none());
    }

    #[test]
    fn requests_are_answered_and_shutdown_closes_the_queue() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        let cell = Arc::new(MetadataCell::new(MetadataImage::empty(
            String::new(),
            0,
            config.advertised,
        )));
        let opened = Arc::new(AtomicUsize::new(0));
        let (client, thread) =
            spawn_controller_with(&config, Arc::clone(&cell), CountingOps(Arc::clone(&opened)))
                .expect("spawn");
        // Published before the thread serves anything.
        assert_eq!(cell.load().cluster_id.len(), 22);
        let handle: Arc<dyn ControllerHandle> = Arc::new(client);
        let rx = handle.submit(AdminRequest::CreateTopics {
            topics: vec![NewTopic {
                name: "t".into(),
                num_partitions: 3,
                replication_factor: 1,
                assignments: Vec::new(),
                configs: vec![],
            }],
            validate_only: false,
        });
        let response = futures::executor::block_on(rx).expect("answer");
        assert_eq!(
            response,
            AdminResponse::Results(vec![dataplane::controller::AdminResult::ok("t")])
        );
        assert_eq!(opened.load(Ordering::SeqCst), 3);
        assert_eq!(cell.load().topic("t").expect("t").partitions.len(), 3);
        thread.shutdown().expect("shutdown");
        let rx = handle.submit(AdminRequest::AllocateProducerIds { count: 1 });
        match futures::executor::block_on(rx).expect("answer") {
            AdminResponse::Failed { error_code, .. } => {
                assert_eq!(error_code, ResponseError::BrokerNotAvailable.code())
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
