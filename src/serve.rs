//! `twinlog serve`: a single-node cluster (broker and controller in one process).
//!
//! Start-up: read the config, start the controller (which replays the metadata log and
//! publishes the first image), then one pinned glommio executor per configured core.
//! Each shard opens the partitions it owns (recovering them if needed), binds the
//! listener with SO_REUSEPORT and serves. SIGTERM/SIGINT: every shard stops accepting
//! and lets its connections finish the request in hand; once all have, every shard
//! closes its logs cleanly (flush, producer snapshots, clean-shutdown marker).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use dataplane::controller::{AdminRequest, AdminResponse, NewTopic};
use dataplane::group::runtime::{GroupRuntime, OFFSETS_TOPIC};
use dataplane::group::GroupConfig;
use dataplane::metadata::{MetadataCell, MetadataImage};
use dataplane::shard::{ShardCtx, ShardRouter, ShardSettings};
use dataplane::txn::runtime::{TxnRuntime, TxnRuntimeConfig};
use dataplane::txn::{TransactionConfig, TRANSACTION_STATE_TOPIC};
use glommio::{LocalExecutorBuilder, Placement};

use crate::config::{BrokerConfig, ConfigError};

/// Jobs a shard's queue holds before senders wait.
const SHARD_QUEUE_MAX: usize = 1024;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TOML config file (Kafka-style keys; see config/twinlog.example.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory holding the partition logs and metadata (log.dirs).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Listener address (listeners), e.g. 127.0.0.1:9092.
    #[arg(long)]
    listen: Option<SocketAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{path}: {source}")]
    ConfigFile { path: PathBuf, source: ConfigError },
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot install signal handler: {0}")]
    Signal(std::io::Error),
    #[error("controller: {0}")]
    Controller(String),
    #[error("cannot start shard on core {core}: {message}")]
    Executor { core: usize, message: String },
    #[error("shard on core {core} failed to start: {message}")]
    ShardStart { core: usize, message: String },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("metrics endpoint (metrics.listen): {0}")]
    Metrics(#[from] controlplane::metrics_http::MetricsHttpError),
}

/// Mirroring and Fetch allocate and free buffers of 1 to 4 MiB many times a second
/// (responses, read windows, append copies). glibc's default serves each with a fresh
/// mmap and unmaps it when freed, so every one is page-faulted and zeroed again; it was
/// about a fifth of a mirror catch-up's CPU (perf/RESULTS.md). The broker keeps them in
/// the heap instead: allocations up to 16 MiB come from the heap, and up to 64 MiB of
/// free heap is kept before trimming. `MALLOC_MMAP_THRESHOLD_` and
/// `MALLOC_TRIM_THRESHOLD_` in the environment still win. The one `unsafe` block in the
/// project (ARCHITECTURE.md): a foreign call with two integer arguments.
#[allow(unsafe_code)]
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const MMAP_THRESHOLD: libc::c_int = 16 << 20;
        const TRIM_THRESHOLD: libc::c_int = 64 << 20;
        for (env, param, value) in [
            (
                "MALLOC_MMAP_THRESHOLD_",
                libc::M_MMAP_THRESHOLD,
                MMAP_THRESHOLD,
            ),
            (
                "MALLOC_TRIM_THRESHOLD_",
                libc::M_TRIM_THRESHOLD,
                TRIM_THRESHOLD,
            ),
        ] {
            if std::env::var_os(env).is_some() {
                continue;
            }
            // SAFETY: mallopt only sets one of glibc's allocator thresholds (it takes
            // the allocator's own lock); no memory is touched and no pointer is passed.
            if unsafe { libc::mallopt(param, value) } != 1 {
                tracing::warn!(param = env, value, "mallopt refused an allocator setting");
            }
        }
    }
}

pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    tune_allocator();
    let mut config = match &args.config {
        Some(path) => BrokerConfig::load(path).map_err(|e| match e {
            ConfigError::Io { .. } | ConfigError::Syntax { .. } => ServeError::Config(e),
            other => ServeError::ConfigFile {
                path: path.clone(),
                source: other,
            },
        })?,
        None => BrokerConfig::default(),
    };
    config.apply_overrides(args.data_dir, args.listen);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    config.resolve_shards(cores)?;
    if !config.roles.broker {
        // A controller holds no replicas: one shard runs its (empty) data plane.
        config.shards.truncate(1);
    }
    std::fs::create_dir_all(&config.data_dir).map_err(|source| ServeError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    let data_dir = std::path::absolute(&config.data_dir).map_err(|source| ServeError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    check_memlock(&config);
    raise_open_file_limit();
    // Shards bind with SO_REUSEPORT, which would also let a second broker process share
    // the port and split its clients between two clusters. Refuse when something already
    // accepts connections there. (A plain bind would also refuse a restart right after a
    // crash: the dead process's connections linger in FIN-WAIT-2 on the port.)
    let probe = match config.listen.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            std::net::SocketAddr::from(([127, 0, 0, 1], config.listen.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, config.listen.port()))
        }
        _ => config.listen,
    };
    // A broker killed a moment ago can still accept for a few milliseconds (its
    // io_uring is torn down asynchronously): only a listener that keeps accepting for
    // two seconds counts.
    let listening =
        || std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(300)).is_ok();
    let probe_started = std::time::Instant::now();
    let mut taken = config.roles.broker && listening();
    while taken && probe_started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        taken = listening();
    }
    if taken {
        return Err(ServeError::Listen {
            addr: config.listen,
            source: std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process already accepts connections on this address",
            ),
        });
    }

    let stop_flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop_flag)).map_err(ServeError::Signal)?;
    }

    dataplane::client::security::set_inter_broker(config.inter_broker_security.clone());
    if config.listeners[config.inter_broker].protocol.uses_sasl()
        && config.inter_broker_security.sasl.is_none()
    {
        tracing::warn!(
            listener = %config.listeners[config.inter_broker].name,
            "the inter-broker listener needs SASL but sasl.mechanism.inter.broker.protocol is not set: this broker's requests to itself (a mirror's group offsets) are refused until it is"
        );
    }
    let shards = config.shards.len();
    let (router, receivers) = ShardRouter::new(shards, SHARD_QUEUE_MAX);
    let _metrics = config
        .metrics_listen
        .map(|addr| controlplane::metrics_http::start(addr, router.clone()))
        .transpose()?;
    let advertised = config.advertised();
    let metadata = Arc::new(MetadataCell::new(MetadataImage::empty(
        String::new(),
        config.node_id,
        advertised,
    )));
    let (controller, controller_thread) = controlplane::spawn_controller(
        &controlplane::ControllerConfig {
            data_dir: data_dir.clone(),
            node_id: config.node_id,
            advertised,
            default_log_config: config.log.clone(),
            num_partitions: config.num_partitions,
            queue_max: controlplane::ControllerConfig::DEFAULT_QUEUE_MAX,
            mirror_state_partitions: config.mirror_state_topic_num_partitions,
            cluster: controlplane::controller::ClusterSettings {
                broker: config.roles.broker,
                rack: config.broker_rack.clone(),
                default_replication_factor: config.default_replication_factor,
                internal_replication_factor: config.offsets_topic_replication_factor,
                session_timeout_ms: config.broker_session_timeout_ms,
                expected_brokers: config.quorum_voters.len().max(1),
                auto_leader_rebalance: config.auto_leader_rebalance,
                leader_imbalance_check_ms: config
                    .leader_imbalance_check_interval_seconds
                    .saturating_mul(1000),
                leader_imbalance_percentage: config.leader_imbalance_per_broker_percentage,
                listeners: config
                    .client_listeners()
                    .iter()
                    .map(|l| (l.name.clone(), l.advertised()))
                    .collect(),
            },
            quorum: quorum_membership(&config)?,
        },
        Arc::clone(&metadata),
        router.clone(),
    )
    .map_err(|e| ServeError::Controller(e.to_string()))?;
    let image = metadata.load();
    tracing::info!(
        cluster_id = %image.cluster_id, node_id = config.node_id, listen = %config.listen,
        advertised = %advertised, data_dir = %data_dir.display(), shards,
        cores = ?config.shards.iter().map(|s| s.core).collect::<Vec<_>>(),
        topics = image.topics.len(), "twinlog starting"
    );

    let client_listeners = config.client_listeners();
    let settings = Arc::new(ShardSettings {
        data_dir,
        socket_request_max_bytes: config.socket_request_max_bytes,
        in_flight_requests_max: config
            .shards
            .first()
            .map_or(64, |s| s.in_flight_requests_max),
        auto_create_topics_enable: config.auto_create_topics_enable,
        num_partitions: config.num_partitions,
        log_retention_check_interval_ms: config.log_retention_check_interval_ms,
        default_log_config: config.log.clone(),
        replication: config.replication.clone(),
        cleaner: config.cleaner.clone(),
        internal_segment_bytes: (
            config.offsets_topic_segment_bytes,
            config.transaction_state_log_segment_bytes,
        ),
        static_configs: {
            let mut c = config.file_keys.clone();
            let listed = |addr: fn(&dataplane::net::ListenerConfig) -> SocketAddr| {
                client_listeners
                    .iter()
                    .map(|l| format!("{}://{}", l.name, addr(l)))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            c.insert("listeners".into(), listed(|l| l.bind));
            c.insert(
                "advertised.listeners".into(),
                listed(dataplane::net::ListenerConfig::advertised),
            );
            c.insert(
                "inter.broker.listener.name".into(),
                client_listeners[config.inter_broker].name.clone(),
            );
            c
        },
        listeners: client_listeners.clone(),
        authorizer: config.authorizer.clone(),
    });
    // The group coordinators follow the partition count `__consumer_offsets` already has.
    let offsets_partitions = metadata
        .load()
        .topics
        .get(OFFSETS_TOPIC)
        .map_or(config.offsets_topic_num_partitions, |t| {
            t.partitions.len() as i32
        });
    let group_config = GroupConfig {
        min_session_timeout_ms: config.group_min_session_timeout_ms,
        max_session_timeout_ms: config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
        offsets_retention_ms: config.offsets_retention_minutes * 60 * 1000,
        offsets_topic_partitions: offsets_partitions,
        ..GroupConfig::default()
    };
    // Likewise the transaction coordinators and `__transaction_state`.
    let txn_config = TxnRuntimeConfig {
        coordinator: TransactionConfig {
            transaction_max_timeout_ms: config.transaction_max_timeout_ms,
        },
        state_topic_partitions: metadata
            .load()
            .topics
            .get(TRANSACTION_STATE_TOPIC)
            .map_or(config.transaction_state_log_num_partitions, |t| {
                t.partitions.len() as i32
            }),
        cleanup_interval_ms: config
            .transaction_abort_timed_out_transaction_cleanup_interval_ms
            .max(1) as u64,
    };
    // The mirror thread's queue exists before the shards so they can hold its handle;
    // the thread itself starts once the shards serve (it drives them).
    let (mirror_client, mirror_receiver) = controlplane::mirror::service::mirror_channel();
    // Shutdown happens in two phases across all shards: stop serving, then close logs.
    let (stop_tx, stop_rx) = async_channel::bounded::<()>(1);
    let stopped_serving = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<usize, (usize, String)>>();
    let mut handles = Vec::with_capacity(shards);
    for (id, (shard_cfg, jobs)) in config.shards.iter().cloned().zip(receivers).enumerate() {
        let ctx_parts = (
            router.clone(),
            Arc::clone(&metadata),
            (Arc::clone(&controller), Arc::clone(&mirror_client)),
            Arc::clone(&settings),
            stop_rx.clone(),
            Arc::clone(&stopped_serving),
            ready_tx.clone(),
            (group_config.clone(), txn_config.clone()),
        );
        let listen = config.roles.broker.then_some((
            settings.listeners.clone(),
            config.listener_cpu_steering.then_some(shard_cfg.core),
        ));
        let inline_write_max = shard_cfg.inline_write_max_bytes;
        let mut builder = LocalExecutorBuilder::new(Placement::Fixed(shard_cfg.core))
            .name(&format!("shard-{id}"))
            .io_memory(shard_cfg.io_memory_bytes);
        if shard_cfg.spin_before_park_us > 0 {
            builder = builder.spin_before_park(std::time::Duration::from_micros(
                shard_cfg.spin_before_park_us,
            ));
        }
        let handle = builder
            .spawn(move || async move {
                dataplane::log::fs::set_inline_write_max(id, inline_write_max);
                let (router, metadata, controller, settings, stop, stopped, ready, groups) =
                    ctx_parts;
                run_shard(
                    id, shards, listen, router, metadata, controller, settings, jobs, stop,
                    stopped, ready, groups,
                )
                .await;
            })
            .map_err(|e| ServeError::Executor {
                core: shard_cfg.core,
                message: e.to_string(),
            })?;
        handles.push(handle);
    }
    drop(ready_tx);
    let mut failure = None;
    for _ in 0..shards {
        match ready_rx.recv() {
            Ok(Ok(_)) => {}
            Ok(Err((id, message))) => {
                failure.get_or_insert(ServeError::ShardStart {
                    core: config.shards[id].core,
                    message,
                });
            }
            Err(_) => {
                failure.get_or_insert(ServeError::ShardStart {
                    core: 0,
                    message: "shard exited".into(),
                });
            }
        }
    }
    let mut mirror_thread = None;
    if failure.is_none() {
        match controlplane::mirror::service::spawn_mirror_thread(
            mirror_receiver,
            router.clone(),
            Arc::clone(&metadata),
            Arc::clone(&controller),
            controlplane::mirror::manager::MirrorManagerConfig {
                retry_initial_backoff_ms: config.mirror_failed_retry_initial_backoff_ms.max(1)
                    as u64,
                retry_max_backoff_ms: config.mirror_failed_retry_max_backoff_ms.max(1) as u64,
                retry_max_attempts: config.mirror_failed_retry_max_attempts,
            },
            controlplane::mirror::sync::MirrorSyncConfig {
                refresh_interval_ms: config.mirror_metadata_refresh_interval_ms.max(1) as u64,
            },
        ) {
            Ok(h) => mirror_thread = Some(h),
            Err(e) => {
                failure.get_or_insert(ServeError::Controller(format!(
                    "cannot start the mirror thread: {e}"
                )));
            }
        }
    }
    if failure.is_none() {
        tracing::info!(listen = %config.listen, "twinlog ready");
        while !stop_flag.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::info!("shutting down");
        let in_quorum = !config.quorum_voters.is_empty() || !config.quorum_bootstrap.is_empty();
        if in_quorum && config.roles.broker {
            controlled_shutdown(controller.as_ref(), &metadata, CONTROLLED_SHUTDOWN_MAX);
        }
    }
    let watch = ShutdownWatch::start();
    stop_tx.close();
    mirror_client.close();
    watch.step("the shard threads end");
    for h in handles {
        if let Err(e) = h.join() {
            tracing::error!(error = %e, "shard ended with an error");
        }
    }
    router.close();
    watch.step("the mirror thread ends");
    if let Some(h) = mirror_thread {
        let _ = h.join();
    }
    watch.step("the controller thread ends");
    if let Err(e) = controller_thread.shutdown() {
        tracing::error!(error = %e, "controller shutdown");
    }
    watch.finish();
    match failure {
        Some(e) => Err(e),
        None => {
            tracing::info!("twinlog stopped");
            Ok(())
        }
    }
}

/// How this node takes part in a quorum of controllers, if it does. Any voter set, even
/// this node's alone, runs the quorum over TCP, so brokers can join it as learners.
fn quorum_membership(
    config: &BrokerConfig,
) -> Result<Option<controlplane::controller::QuorumMembership>, ServeError> {
    use controlplane::quorum::{journal::raft_id, QuorumTiming, QuorumTls, Transport};
    let tls = config
        .controller_tls
        .as_ref()
        .map(|(server, client)| {
            Ok::<_, String>(QuorumTls {
                server: server.load().map_err(|e| e.to_string())?,
                client: client.load()?,
            })
        })
        .transpose()
        .map_err(|e| ServeError::Controller(format!("the controller listener's TLS: {e}")))?;
    if tls.is_some() {
        tracing::info!("the metadata quorum's links are TLS, client certificates required");
    }
    let transport = if !config.quorum_bootstrap.is_empty() {
        // A dynamic quorum: the voters are in the metadata log (`twinlog format
        // --standalone` made the first one).
        Transport {
            listen: config.controller_listen.filter(|_| config.roles.controller),
            bootstrap: config.quorum_bootstrap.clone(),
            ..Transport::default()
        }
    } else if !config.quorum_voters.is_empty() {
        let voters = config
            .quorum_voters
            .iter()
            .map(|(id, addr)| (raft_id(*id), *addr))
            .collect();
        Transport::static_quorum(raft_id(config.node_id), voters, config.roles.controller)
    } else {
        return Ok(None);
    };
    Ok(Some(controlplane::controller::QuorumMembership {
        transport: Transport { tls, ..transport },
        timing: QuorumTiming::default(),
    }))
}

#[allow(clippy::too_many_arguments)]
async fn run_shard(
    id: usize,
    shards: usize,
    listen: Option<(Vec<dataplane::net::ListenerConfig>, Option<usize>)>,
    router: ShardRouter,
    metadata: Arc<MetadataCell>,
    (controller, mirror): (
        Arc<dyn dataplane::controller::ControllerHandle>,
        Arc<controlplane::mirror::service::MirrorClient>,
    ),
    settings: Arc<ShardSettings>,
    jobs: async_channel::Receiver<dataplane::shard::Job>,
    stop: async_channel::Receiver<()>,
    stopped_serving: Arc<AtomicUsize>,
    ready: mpsc::Sender<Result<usize, (usize, String)>>,
    (group_config, txn_config): (GroupConfig, TxnRuntimeConfig),
) {
    let ctx = ShardCtx::new(
        id,
        router,
        Arc::clone(&metadata),
        controller,
        Arc::clone(&settings),
    );
    ctx.set_mirror_handle(mirror);
    let offsets_partitions = group_config.offsets_topic_partitions;
    let group_runtime = GroupRuntime::new(group_config);
    ctx.set_group_runtime(Rc::clone(&group_runtime));
    let txn_partitions = txn_config.state_topic_partitions;
    let txn_runtime = TxnRuntime::new(txn_config);
    ctx.set_txn_runtime(Rc::clone(&txn_runtime));
    dataplane::reactor::spawn_tick();
    glommio::spawn_local(Rc::clone(&ctx).run_jobs(jobs)).detach();
    glommio::spawn_local(dataplane::metrics::run_shard_sampler(Rc::clone(&ctx))).detach();
    // Open the partitions this shard owns.
    let mut opened = 0usize;
    for p in controlplane::topics_to_open(&metadata.load())
        .into_iter()
        .filter(|p| p.shard == id)
    {
        let tp = p.tp.clone();
        match ctx
            .open_partition(p.tp, p.topic_id, p.config, p.leadership)
            .await
        {
            Ok(()) => opened += 1,
            Err(e) => tracing::error!(%tp, error = %e, "cannot open partition log"),
        }
    }
    // A controller-only node serves no clients.
    let mut listeners = Vec::new();
    let (configs, cpu) = listen.unwrap_or_default();
    for config in configs {
        let bound = dataplane::net::bind(config.bind, cpu)
            .map_err(|e| format!("cannot listen on {} ({}): {e}", config.bind, config.name))
            .and_then(|l| {
                let name = config.name.clone();
                dataplane::net::ShardListener::new(config)
                    .map(|spec| (l, Rc::new(spec)))
                    .map_err(|e| format!("listener {name}: {e}"))
            });
        match bound {
            Ok(l) => listeners.push(l),
            Err(e) => {
                let _ = ready.send(Err((id, e)));
                ctx.close_all().await;
                return;
            }
        }
    }
    tracing::info!(shard = id, partitions = opened, "shard serving");
    let _ = ready.send(Ok(id));
    let gate = glommio::sync::Gate::new();
    let serving: Vec<_> = listeners
        .into_iter()
        .map(|(listener, spec)| {
            let ctx = Rc::clone(&ctx);
            let stop = stop.clone();
            let gate = gate.clone();
            glommio::spawn_local(async move {
                dataplane::net::run_listener(ctx, listener, spec, stop, gate).await
            })
        })
        .collect();
    let isr = glommio::spawn_local(dataplane::fetcher::replica::maintain_isr(Rc::clone(&ctx)));
    let cleaner = glommio::spawn_local(dataplane::log::cleaner::task::run(
        Rc::clone(&ctx),
        settings.cleaner.clone(),
    ));
    let housekeeping = {
        let ctx = Rc::clone(&ctx);
        let every = Duration::from_millis(settings.log_retention_check_interval_ms.max(1000));
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(every).await;
                ctx.housekeeping().await;
            }
        })
    };
    if id == 0 && !metadata.load().topics.contains_key(OFFSETS_TOPIC) {
        glommio::spawn_local(create_offsets_topic(Rc::clone(&ctx), offsets_partitions)).detach();
    }
    if id == 0 && !metadata.load().topics.contains_key(TRANSACTION_STATE_TOPIC) {
        glommio::spawn_local(create_compacted_topic(
            Rc::clone(&ctx),
            TRANSACTION_STATE_TOPIC,
            txn_partitions,
            settings.internal_segment_bytes.1,
        ))
        .detach();
    }
    // Loads the owned `__consumer_offsets` partitions, then drives the group timers.
    let groups = glommio::spawn_local(Rc::clone(&group_runtime).run(Rc::clone(&ctx)));
    // Loads the owned `__transaction_state` partitions, then aborts timed-out transactions.
    let txns = glommio::spawn_local(Rc::clone(&txn_runtime).run(Rc::clone(&ctx)));
    let _ = stop.recv().await;
    for serving in serving {
        shutdown_step(id, "the listener stops", serving).await;
    }
    // A JoinGroup parked for a rebalance must not hold the connection open.
    group_runtime.shutdown();
    txn_runtime.shutdown();
    // Connections finish the request in hand, then close; mirror fetchers stop.
    ctx.mirror_fetchers.shutdown();
    ctx.replica_fetchers.shutdown();
    shutdown_step(id, "the ISR task stops", isr.cancel()).await;
    let _ = shutdown_step(id, "connections finish their requests", gate.close()).await;
    shutdown_step(id, "housekeeping stops", housekeeping.cancel()).await;
    shutdown_step(id, "the cleaner stops", cleaner.cancel()).await;
    shutdown_step(id, "the group runtime stops", groups.cancel()).await;
    shutdown_step(id, "the transaction runtime stops", txns.cancel()).await;
    // Phase two once every shard has stopped serving: requests from other shards' connections
    // may still need this shard's partitions until then.
    stopped_serving.fetch_add(1, Ordering::SeqCst);
    let others = async {
        while stopped_serving.load(Ordering::SeqCst) < shards {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
    };
    shutdown_step(id, "the other shards stop serving", others).await;
    shutdown_step(id, "the partitions close", ctx.close_all()).await;
    tracing::info!(shard = id, "shard stopped");
}

/// One step of a shard's shutdown; a slow one is logged, so a broker that takes long to
/// stop says where it waited.
async fn shutdown_step<F: std::future::Future>(shard: usize, what: &str, step: F) -> F::Output {
    let started = std::time::Instant::now();
    let out = step.await;
    let took = started.elapsed();
    if took >= Duration::from_secs(1) {
        tracing::warn!(
            shard,
            took_ms = took.as_millis() as u64,
            "slow shutdown: {what}"
        );
    } else {
        tracing::debug!(shard, took_us = took.as_micros() as u64, "shutdown: {what}");
    }
    out
}

/// The process-wide part of a shutdown (threads ending): a watchdog thread logs the step
/// still waited on every few seconds, and `finish` logs a step that took a second or more.
struct ShutdownWatch {
    step: Arc<std::sync::Mutex<(&'static str, std::time::Instant)>>,
    done: mpsc::Sender<()>,
}

impl ShutdownWatch {
    const REPORT_EVERY: Duration = Duration::from_secs(5);

    fn start() -> ShutdownWatch {
        let step = Arc::new(std::sync::Mutex::new((
            "the shards stop",
            std::time::Instant::now(),
        )));
        let (done, wait) = mpsc::channel::<()>();
        let seen = Arc::clone(&step);
        let started = std::time::Instant::now();
        let spawned = std::thread::Builder::new()
            .name("twinlog-shutdown-watch".to_string())
            .spawn(move || {
                let mut reports = 0;
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    wait.recv_timeout(Self::REPORT_EVERY)
                {
                    let (what, since) = *seen.lock().unwrap_or_else(|e| e.into_inner());
                    // The first report names every thread and where the kernel holds it.
                    let threads = if reports == 0 {
                        thread_states()
                    } else {
                        String::new()
                    };
                    reports += 1;
                    tracing::warn!(
                        waited_ms = since.elapsed().as_millis() as u64,
                        shutdown_ms = started.elapsed().as_millis() as u64,
                        threads,
                        "shutdown still waiting: {what}"
                    );
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no shutdown watchdog");
        }
        ShutdownWatch { step, done }
    }

    /// The previous step is over; `next` begins.
    fn step(&self, next: &'static str) {
        let mut step = self.step.lock().unwrap_or_else(|e| e.into_inner());
        let (what, since) = *step;
        if since.elapsed() >= Duration::from_secs(1) {
            tracing::warn!(
                took_ms = since.elapsed().as_millis() as u64,
                "slow shutdown: {what}"
            );
        }
        *step = (next, std::time::Instant::now());
    }

    fn finish(self) {
        self.step("done");
        let _ = self.done.send(());
    }
}

/// This process's threads as `name(state wchan syscall)`, read from `/proc/self/task`.
fn thread_states() -> String {
    let read = |path: std::path::PathBuf| {
        std::fs::read_to_string(path).map_or_else(|_| "?".to_string(), |s| s.trim().to_string())
    };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return "unknown (no /proc/self/task)".to_string();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let dir = task.path();
        let stat = read(dir.join("stat"));
        // The state follows the parenthesised name (which may hold spaces).
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        let syscall = read(dir.join("syscall"));
        let syscall = syscall.split_whitespace().next().unwrap_or("?");
        out.push(format!(
            "{}({state} {} {syscall})",
            read(dir.join("comm")),
            read(dir.join("wchan"))
        ));
    }
    out.sort();
    out.join(" ")
}

/// Creates `__consumer_offsets` (compacted) through the controller.
async fn create_offsets_topic(ctx: Rc<ShardCtx>, partitions: i32) {
    let segment_bytes = ctx.settings.internal_segment_bytes.0;
    create_compacted_topic(ctx, OFFSETS_TOPIC, partitions, segment_bytes).await
}

/// Creates an internal compacted topic through the controller.
async fn create_compacted_topic(
    ctx: Rc<ShardCtx>,
    name: &'static str,
    partitions: i32,
    segment_bytes: u64,
) {
    // Every node tries until the topic exists: in a quorum only the active controller
    // creates it, once enough brokers registered for its replication factor.
    let mut attempt = 0u32;
    while !ctx.metadata.load().topics.contains_key(name) {
        if attempt > 0 {
            glommio::timer::sleep(Duration::from_secs(1)).await;
        }
        attempt += 1;
        if create_internal_topic(&ctx, name, partitions, segment_bytes, attempt).await {
            return;
        }
    }
}

/// One CreateTopics of an internal topic; true when it exists now.
async fn create_internal_topic(
    ctx: &ShardCtx,
    name: &'static str,
    partitions: i32,
    segment_bytes: u64,
    attempt: u32,
) -> bool {
    let rx = ctx.controller.submit(AdminRequest::CreateTopics {
        topics: vec![NewTopic {
            name: name.to_string(),
            num_partitions: partitions,
            // `offsets.topic.replication.factor`, capped at the cluster's size.
            replication_factor: -1,
            assignments: Vec::new(),
            // `offsets.topic.segment.bytes` / `transaction.state.log.segment.bytes`, as
            // Kafka: segments small enough for the cleaner, which never touches the
            // active one.
            configs: vec![
                ("cleanup.policy".to_string(), Some("compact".to_string())),
                ("segment.bytes".to_string(), Some(segment_bytes.to_string())),
            ],
        }],
        validate_only: false,
    });
    match rx.await {
        Ok(AdminResponse::Results(results))
            if results
                .iter()
                .all(|r| r.error_code == 0 || r.error_code == 36) =>
        {
            tracing::info!(partitions, "{name} created");
            true
        }
        // In a quorum, only the active controller creates it; the others are told so.
        Ok(AdminResponse::Failed { error_code, .. })
            if error_code == kafka_protocol::ResponseError::NotController.code() =>
        {
            false
        }
        other => {
            // Not enough brokers yet, most likely: said once, then every 30 tries.
            if attempt == 1 || attempt.is_multiple_of(30) {
                tracing::info!(answer = ?other, "{name} not created yet");
            }
            false
        }
    }
}

/// How long a broker waits for its leaderships to move before it exits anyway.
const CONTROLLED_SHUTDOWN_MAX: Duration = Duration::from_secs(15);

/// Kafka's controlled shutdown: the broker tells the controller it is going, the
/// controller moves every leadership another in-sync replica can take, and the broker
/// exits once the image shows it leads none of those (or `max` passed).
fn controlled_shutdown(
    controller: &dyn dataplane::controller::ControllerHandle,
    metadata: &MetadataCell,
    max: Duration,
) {
    let started = std::time::Instant::now();
    let mut asked: Option<std::time::Instant> = None;
    loop {
        let image = metadata.load();
        let me = image.node_id;
        let movable = image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader == me && p.isr.iter().any(|r| *r != me && image.is_live(*r)))
            .count();
        if movable == 0 {
            tracing::info!(
                waited_ms = started.elapsed().as_millis() as u64,
                "controlled shutdown: no leadership left to move"
            );
            return;
        }
        if started.elapsed() >= max {
            tracing::warn!(
                partitions = movable,
                "controlled shutdown timed out; exiting with leaderships in place"
            );
            return;
        }
        // Asked again now and then: a forwarded request lost in a leader change is not
        // answered.
        if asked.is_none_or(|at| at.elapsed() >= Duration::from_secs(2)) {
            drop(controller.submit(AdminRequest::ControlledShutdown));
            asked = Some(std::time::Instant::now());
            tracing::info!(
                partitions = movable,
                "controlled shutdown: moving leaderships away"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every partition holds a descriptor per segment file and every connection one more,
/// so a node of many partitions needs more than the usual soft limit of 1,024: the soft
/// limit is raised to the hard one at start (what `ulimit -n` or systemd's
/// `LimitNOFILE` allows; the README says what to give bare metal).
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    let (soft, hard) = (limit.current, limit.maximum);
    if soft == hard {
        tracing::info!(open_files = ?soft, "open file limit");
        return;
    }
    let raised = rustix::process::Rlimit {
        current: hard,
        maximum: hard,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(from = ?soft, to = ?hard, "open file limit raised to the hard limit")
        }
        Err(e) => {
            tracing::warn!(soft = ?soft, hard = ?hard, error = %e, "cannot raise the open file limit")
        }
    }
}

/// glommio registers io memory in three rings per executor; unprivileged users are
/// capped by RLIMIT_MEMLOCK (8 MiB on these machines). Warn when the config exceeds it.
fn check_memlock(config: &BrokerConfig) {
    let needed = config.memlock_bytes_needed();
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max locked memory"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        });
    match limit.as_deref().and_then(|v| v.parse::<usize>().ok()) {
        Some(limit) if needed > limit => tracing::warn!(
            needed, limit,
            "io memory of all shards exceeds RLIMIT_MEMLOCK; glommio falls back to unregistered buffers unless running as root (raise `ulimit -l` or lower io.memory.bytes)"
        ),
        _ => tracing::debug!(needed, "io memory fits RLIMIT_MEMLOCK"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_states_name_each_thread_and_where_it_waits() {
        let (tx, rx) = mpsc::channel::<()>();
        let parked = std::thread::Builder::new()
            .name("parked-here".to_string())
            .spawn(move || rx.recv())
            .expect("spawn");
        // The thread names itself once it runs; then it blocks on a futex.
        let started = std::time::Instant::now();
        let mut states = thread_states();
        while !states.contains("parked-here(S ") && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
            states = thread_states();
        }
        assert!(states.contains("parked-here(S "), "{states}");
        tx.send(()).expect("send");
        parked.join().expect("join").expect("recv");
    }
}
