//! `twinlog-perf`: load generators and reports for Twinlog.
//!
//! Every number it prints is meant to land in perf/RESULTS.md next to the command that
//! produced it and the machine it ran on, so each subcommand prints both.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod ceilings;

#[derive(Debug, Parser)]
#[command(name = "twinlog-perf", about = "Twinlog load generators and reports")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure this machine's physical ceilings (CRC32C, memcpy, sequential disk write,
    /// loopback TCP), the numbers a broker's throughput is judged against.
    Ceilings(ceilings::CeilingsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ceilings(args) => ceilings::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("twinlog-perf: {e}");
            ExitCode::FAILURE
        }
    }
}
