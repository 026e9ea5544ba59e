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
