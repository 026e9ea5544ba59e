//! `twinlog`: the broker and its admin/debug commands. This file is the composition
//! root only: it parses the command line and wires the planes together.

mod cli;
mod config;
mod dump_log;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "twinlog",
    version,
    about = "Kafka-compatible broker with native cluster mirroring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker (single node: broker and controller in one process).
    Serve(serve::ServeArgs),
    /// Manage cluster mirrors on a destination cluster (like kafka-cluster-mirrors.sh).
    Mirror(cli::mirror::MirrorArgs),
    /// Create, list, describe and delete topics (like kafka-topics.sh).
    Topic(cli::topic::TopicArgs),
    /// Prepare a data directory (like kafka-storage format): write meta.properties with
    /// the cluster id and this node's id.
    Format {
        /// The data directory (default: the config's log.dirs, else ./data).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// The cluster id (`twinlog random-uuid` makes one).
        #[arg(long, short = 't', value_name = "ID")]
        cluster_id: String,
        /// This node's id (default: the config's node.id, else 0).
        #[arg(long)]
        node_id: Option<i32>,
        /// The broker config file (TOML), for log.dirs and node.id.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<PathBuf>,
        /// Leave a directory that is already formatted as it is, instead of failing.
        #[arg(long, short = 'g')]
        ignore_formatted: bool,
        /// Start a dynamic quorum (controller.quorum.bootstrap.servers) with this
        /// controller as its only voter, at the config's CONTROLLER:// listener (Kafka's
        /// kafka-storage format --standalone).
        #[arg(
            long,
            short = 's',
            requires = "config",
            conflicts_with = "no_initial_controllers"
        )]
        standalone: bool,
        /// This controller joins an existing dynamic quorum as an observer, to be added
        /// with kafka-metadata-quorum add-controller (the default; Kafka's flag).
        #[arg(long, short = 'N')]
        no_initial_controllers: bool,
    },
    /// Print a new random cluster id (like kafka-storage random-uuid).
    RandomUuid,
    /// Print log segments, indexes, producer snapshots and epoch checkpoints like
    /// kafka-dump-log.sh.
    DumpLog {
        /// Files to print (.log, .index, .timeindex, .txnindex, .snapshot,
        /// leader-epoch-checkpoint, partition.metadata).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also print every record (Kafka's --print-data-log).
        #[arg(long, alias = "print-data-log")]
        records: bool,
        /// Decode every record as a __mirror_state key and value (Kafka's
        /// --mirror-state-decoder); implies --records.
        #[arg(long, alias = "mirror-state-decoder")]
        mirror_state: bool,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Mirror(args) => cli::mirror::run(args),
        Command::Topic(args) => cli::topic::run(args),
        Command::Serve(args) => match serve::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("twinlog serve: {e}");
                ExitCode::FAILURE
            }
        },
        Command::RandomUuid => {
            println!(
                "{}",
                controlplane::meta_properties::new_cluster_id(uuid::Uuid::new_v4)
            );
            ExitCode::SUCCESS
        }
        Command::Format {
            data_dir,
            cluster_id,
            node_id,
            config,
            ignore_formatted,
            standalone,
            no_initial_controllers: _,
        } => format(
            data_dir,
            &cluster_id,
            node_id,
            config,
            (ignore_formatted, standalone),
        ),
        Command::DumpLog {
            files,
            records,
            mirror_state,
        } => {
            let mut out = std::io::stdout().lock();
            let options = dump_log::DumpOptions {
                records,
                mirror_state,
            };
            match dump_log::dump_files(&files, options, &mut out) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(2),
                Err(e) => {
                    eprintln!("twinlog dump-log: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `twinlog format`: the directory and node id from the flags, else the config file,
/// else the defaults a bare `twinlog serve` uses.
fn format(
    data_dir: Option<PathBuf>,
    cluster_id: &str,
    node_id: Option<i32>,
    config: Option<PathBuf>,
    (ignore_formatted, standalone): (bool, bool),
) -> ExitCode {
    let file = match config
        .as_deref()
        .map(config::BrokerConfig::load)
        .transpose()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("twinlog format: {e}");
            return ExitCode::FAILURE;
        }
    };
    let defaults = config::BrokerConfig::default();
    let base = file.as_ref().unwrap_or(&defaults);
    let dir = data_dir.unwrap_or_else(|| base.data_dir.clone());
    let node = node_id.unwrap_or(base.node_id);
    let controller = if standalone {
        match base.controller_listen.filter(|a| !a.ip().is_unspecified()) {
            Some(addr) if base.roles.controller => Some(addr),
            _ => {
                eprintln!("twinlog format: --standalone needs a controller (process.roles) with a CONTROLLER://host:port listener at a concrete address in its config");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    match controlplane::meta_properties::format(&dir, cluster_id, node, ignore_formatted) {
        Ok(controlplane::meta_properties::Formatted::Now(id)) => {
            println!(
                "Formatting {} with cluster.id {id} and node.id {node}",
                dir.display()
            );
            if let Some(addr) = controller {
                let endpoint = controlplane::metadata_log::MetadataRecord::VoterEndpoint {
                    node_id: node,
                    directory_id: controlplane::meta_properties::directory_id(&dir)
                        .unwrap_or_default(),
                    host: addr.ip().to_string(),
                    port: i32::from(addr.port()),
                };
                if let Err(e) =
                    controlplane::quorum::MetadataJournal::format_standalone(&dir, node, endpoint)
                {
                    eprintln!("twinlog format: {e}");
                    return ExitCode::FAILURE;
                }
                println!("Node {node} is the only voter of a new dynamic quorum, at {addr}");
            }
            ExitCode::SUCCESS
        }
        Ok(controlplane::meta_properties::Formatted::Already(id)) => {
            println!(
                "{} is already formatted (cluster.id {id}): left as it is",
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("twinlog format: {e}");
            ExitCode::FAILURE
        }
    }
}
