//! `cargo run -p twinlog-codegen`: regenerates the mirror RPC codecs
//! (`dataplane/src/wire/mirror/generated.rs`) from `dataplane/messages/*.json`.
//! `--check` only reports whether the committed file is current.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let check = std::env::args().skip(1).any(|a| a == "--check");
    let schemas = match codegen::read_schemas(&root.join(codegen::SCHEMA_DIR)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("twinlog-codegen: reading {}: {e}", codegen::SCHEMA_DIR);
            return ExitCode::FAILURE;
        }
    };
    let code = match codegen::generate(&schemas) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("twinlog-codegen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out: PathBuf = root.join(codegen::OUTPUT_FILE);
    let current = std::fs::read_to_string(&out).unwrap_or_default();
    if check {
        if current == code {
            return ExitCode::SUCCESS;
        }
        eprintln!("twinlog-codegen: {} is stale", codegen::OUTPUT_FILE);
        return ExitCode::FAILURE;
    }
    if current != code {
        if let Err(e) = std::fs::write(&out, code) {
            eprintln!("twinlog-codegen: writing {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", codegen::OUTPUT_FILE);
    }
    ExitCode::SUCCESS
}
