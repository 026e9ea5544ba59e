//! The control plane's mirror thread: a glommio executor (not a shard, not pinned) that
//! runs the [`MirrorStateCoordinator`], the [`MirrorManager`] and the [`MirrorSync`],
//! and serves the [`MirrorHandle`] through which shards forward ReadMirrorStates,
//! WriteMirrorStates and DescribeMirrors (whose answers carry the sync's status).

use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;

use dataplane::controller::{ControllerHandle, MirrorHandle};
use dataplane::fetcher::MirrorEvent;
use dataplane::metadata::MetadataCell;
use dataplane::shard::{ShardRequest, ShardRouter};
use dataplane::wire::mirror::{MirrorRequest, MirrorResponse};
use futures::channel::oneshot;
use glommio::{LocalExecutorBuilder, Placement};

use super::coordinator::MirrorStateCoordinator;
use super::manager::{MirrorManager, MirrorManagerConfig};
use super::sync::{MirrorSync, MirrorSyncConfig};

type Envelope = (MirrorRequest, oneshot::Sender<MirrorResponse>);

/// Requests waiting for the mirror thread; more are refused at once.
pub const MIRROR_QUEUE_MAX: usize = 1024;
/// Fetcher events waiting for the manager.
pub const MIRROR_EVENTS_MAX: usize = 4096;
/// io_uring buffer memory of the mirror thread's executor (it does little I/O itself).
pub const MIRROR_IO_MEMORY_BYTES: usize = 128 * 1024;

/// The shards' way to the mirror thread. Never blocks.
#[derive(Debug, Clone)]
pub struct MirrorClient {
    sender: async_channel::Sender<Envelope>,
}

impl MirrorHandle for MirrorClient {
    fn submit(&self, request: MirrorRequest) -> oneshot::Receiver<MirrorResponse> {
        let (tx, rx) = oneshot::channel();
        if let Err(e) = self.sender.try_send((request, tx)) {
            let ((request, tx), message) = match e {
                async_channel::TrySendError::Full(v) => (v, "the mirror manager queue is full"),
                async_channel::TrySendError::Closed(v) => (v, "the mirror manager is not running"),
            };
            let _ = tx.send(dataplane::api::mirror::error_response(
                &request,
                kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
                message,
            ));
        }
        rx
    }
}

/// The receiving end, handed to [`spawn_mirror_thread`].
#[derive(Debug)]
pub struct MirrorReceiver(async_channel::Receiver<Envelope>);

/// A client for the shards and the receiver for the thread, created before either runs.
pub fn mirror_channel() -> (Arc<MirrorClient>, MirrorReceiver) {
    let (sender, receiver) = async_channel::bounded(MIRROR_QUEUE_MAX);
    (Arc::new(MirrorClient { sender }), MirrorReceiver(receiver))
}

/// Starts the mirror thread. It stops when every [`MirrorClient`] is dropped or
/// [`MirrorClient::close`] is called.
pub fn spawn_mirror_thread(
    receiver: MirrorReceiver,
    router: ShardRouter,
    metadata: Arc<MetadataCell>,
    controller: Arc<dyn ControllerHandle>,
    config: MirrorManagerConfig,
    sync_config: MirrorSyncConfig,
) -> std::io::Result<JoinHandle<()>> {
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .name("twinlog-mirror")
        .io_memory(MIRROR_IO_MEMORY_BYTES)
        .spawn(move || async move {
            dataplane::reactor::spawn_tick();
            let (events_tx, events_rx) = async_channel::bounded::<MirrorEvent>(MIRROR_EVENTS_MAX);
            for shard in 0..router.shard_count() {
                let tx = events_tx.clone();
                let _ = router
                    .request(shard, ShardRequest::SetMirrorEvents(tx))
                    .await;
            }
            let coordinator = MirrorStateCoordinator::new(router.clone(), Arc::clone(&metadata));
            let manager = MirrorManager::new(
                router,
                Arc::clone(&metadata),
                Arc::clone(&controller),
                coordinator,
                config,
            );
            glommio::spawn_local(Rc::clone(&manager).run(events_rx)).detach();
            let sync = MirrorSync::new(metadata, controller, Rc::clone(&manager), sync_config);
            glommio::spawn_local(Rc::clone(&sync).run()).detach();
            while let Ok((request, reply)) = receiver.0.recv().await {
                let manager = Rc::clone(&manager);
                let sync = Rc::clone(&sync);
                glommio::spawn_local(async move {
                    let mut response = manager.serve(request).await;
                    sync.annotate(&mut response);
                    let _ = reply.send(response);
                })
                .detach();
            }
            tracing::info!("mirror manager stopped");
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // The executor's JoinHandle is glommio's; wrap it in a std thread-like handle.
    Ok(std::thread::spawn(move || {
        let _ = handle.join();
    }))
}

impl MirrorClient {
    /// Stops taking requests; the mirror thread ends.
    pub fn close(&self) {
        self.sender.close();
    }
}
