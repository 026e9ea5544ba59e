//! `twinlog-perf ceilings`: the physical limits of this machine that a broker's numbers
//! are compared with. A produce path cannot checksum faster than CRC32C runs, copy faster
//! than memcpy, persist faster than the disk takes sequential direct writes, or serve
//! faster than loopback TCP carries bytes.

use std::fmt::Write as _;
use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const CRC_BUFFER_BYTES: usize = MIB;
const CRC_DURATION: Duration = Duration::from_secs(3);
const MEMCPY_BUFFER_BYTES: usize = 64 * MIB;
const MEMCPY_DURATION: Duration = Duration::from_secs(3);
const DD_BLOCK_COUNT: u32 = 1024;
const TCP_WRITE_BYTES: usize = MIB;
const TCP_DURATION: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub struct CeilingsArgs {
    /// Directory for the sequential write test (a 1 GiB file, removed afterwards).
    /// Point it at the disk the broker's log directory lives on.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum CeilingsError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("dd failed ({status}): {stderr}")]
    Dd { status: String, stderr: String },
    #[error("cannot read dd's summary line from: {stderr}")]
    DdSummary { stderr: String },
    #[error("the loopback sender thread panicked")]
    SenderPanicked,
    #[error("{failed} of the measurements failed (see the table)")]
    SomeFailed { failed: usize },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CeilingsError {
    let what = what.into();
    move |source| CeilingsError::Io { what, source }
}

/// One measured ceiling.
#[derive(Debug)]
struct Ceiling {
    /// Stable key for JSON consumers.
    key: &'static str,
    name: &'static str,
    unit: &'static str,
    method: String,
    value: Result<f64, CeilingsError>,
}

pub fn run(args: &CeilingsArgs) -> Result<(), CeilingsError> {
    let machine = Machine::describe();
    let ceilings = [
        Ceiling {
            key: "crc32c_gb_s",
            name: "CRC32C",
            unit: "GB/s",
            method: format!(
                "crc32c crate over a 1 MiB buffer for {} s",
                CRC_DURATION.as_secs()
            ),
            value: Ok(crc32c_gb_s()),
        },
        Ceiling {
            key: "memcpy_gb_s",
            name: "memcpy",
            unit: "GB/s",
            method: format!(
                "copy_from_slice between two 64 MiB buffers for {} s",
                MEMCPY_DURATION.as_secs()
            ),
            value: Ok(memcpy_gb_s()),
        },
        Ceiling {
            key: "seq_write_mb_s",
            name: "sequential write",
            unit: "MB/s",
            method: format!(
                "dd if=/dev/zero of={}/ddtest bs=1M count={DD_BLOCK_COUNT} oflag=direct",
                args.dir.display()
            ),
            value: seq_write_mb_s(&args.dir),
        },
        Ceiling {
            key: "loopback_tcp_gb_s",
            name: "loopback TCP",
            unit: "GB/s",
            method: format!(
                "one connection on 127.0.0.1, 1 MiB writes for {} s",
                TCP_DURATION.as_secs()
            ),
            value: loopback_tcp_gb_s(),
        },
    ];

    print!("{}", markdown(&machine, &ceilings));
    if let Some(path) = &args.json {
        std::fs::write(path, json(&machine, &ceilings))
            .map_err(io(format!("writing {}", path.display())))?;
    }
    let failed = ceilings.iter().filter(|c| c.value.is_err()).count();
    if failed > 0 {
        return Err(CeilingsError::SomeFailed { failed });
    }
    Ok(())
}

/// What the numbers were measured on.
#[derive(Debug)]
pub(crate) struct Machine {
    pub(crate) cpu_model: String,
    pub(crate) cpus: usize,
    pub(crate) kernel: String,
}

impl Machine {
    pub(crate) fn describe() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        Machine {
            cpu_model,
            cpus,
            kernel,
        }
    }
}

/// Bytes that are not all zero, so no layer can take a shortcut on them.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn gb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e9
}

fn crc32c_gb_s() -> f64 {
    let buf = pattern(CRC_BUFFER_BYTES);
    let mut crc = 0u32;
    let mut bytes = 0u64;
    let start = Instant::now();
    while start.elapsed() < CRC_DURATION {
        for _ in 0..64 {
            crc = crc32c::crc32c_append(crc, black_box(&buf));
            bytes += buf.len() as u64;
        }
    }
    let elapsed = start.elapsed();
    black_box(crc);
    gb_per_s(bytes, elapsed)
}

fn memcpy_gb_s() -> f64 {
    let src = pattern(MEMCPY_BUFFER_BYTES);
    // Written once before timing so that page faults are not measured.
    let mut dst = vec![1u8; MEMCPY_BUFFER_BYTES];
    dst.copy_from_slice(&src);
    let mut bytes = 0u64;
    let start = Instant::now();
    while start.elapsed() < MEMCPY_DURATION {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
        bytes += MEMCPY_BUFFER_BYTES as u64;
    }
    gb_per_s(bytes, start.elapsed())
}

fn seq_write_mb_s(dir: &Path) -> Result<f64, CeilingsError> {
    let file = dir.join("ddtest");
    let output = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .arg("bs=1M")
        .arg(format!("count={DD_BLOCK_COUNT}"))
        .arg("oflag=direct")
        // dd's summary is localized; the parser reads the C locale's words.
        .env("LC_ALL", "C")
        .output()
        .map_err(io("running dd"));
    // Removed whatever happened: a failed run can still leave a partial file.
    let _ = std::fs::remove_file(&file);
    let output = output?;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if !output.status.success() {
        return Err(CeilingsError::Dd {
            status: output.status.to_string(),
            stderr,
        });
    }
    let (bytes, seconds) = parse_dd_summary(&stderr).ok_or_else(|| CeilingsError::DdSummary {
        stderr: stderr.clone(),
    })?;
    Ok(bytes as f64 / seconds / 1e6)
}

/// Reads bytes and seconds from dd's last line, e.g.
/// `1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.52 s, 706 MB/s`. The rate dd prints is
/// rounded to a few digits, so it is recomputed from the two exact numbers.
fn parse_dd_summary(stderr: &str) -> Option<(u64, f64)> {
    let line = stderr.lines().rev().find(|l| l.contains(" bytes"))?;
    let bytes = line.split_whitespace().next()?.parse::<u64>().ok()?;
    let seconds = line
        .split(", ")
        .filter_map(|part| part.trim().strip_suffix(" s"))
        .find_map(|s| s.trim().parse::<f64>().ok())?;
    (seconds > 0.0).then_some((bytes, seconds))
}

fn loopback_tcp_gb_s() -> Result<f64, CeilingsError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("binding 127.0.0.1:0"))?;
    let addr = listener
        .local_addr()
        .map_err(io("reading the listener address"))?;
    let sender = std::thread::spawn(move || -> Result<u64, CeilingsError> {
        let mut stream = TcpStream::connect(addr).map_err(io("connecting to the listener"))?;
        let chunk = pattern(TCP_WRITE_BYTES);
        let mut sent = 0u64;
        let start = Instant::now();
        while start.elapsed() < TCP_DURATION {
            stream.write_all(&chunk).map_err(io("sending"))?;
            sent += chunk.len() as u64;
        }
        stream
            .shutdown(Shutdown::Write)
            .map_err(io("closing the sender"))?;
        Ok(sent)
    });
    let (mut stream, _) = listener.accept().map_err(io("accepting"))?;
    let mut buf = vec![0u8; TCP_WRITE_BYTES];
    let mut received = 0u64;
    let mut start = None;
    loop {
        let n = stream.read(&mut buf).map_err(io("receiving"))?;
        if n == 0 {
            break;
        }
        start.get_or_insert_with(Instant::now);
        received += n as u64;
    }
    let elapsed = start.map_or(Duration::ZERO, |s| s.elapsed());
    let sent = sender.join().map_err(|_| CeilingsError::SenderPanicked)??;
    assert_eq!(sent, received, "loopback TCP lost or invented bytes");
    if elapsed.is_zero() {
        return Ok(0.0);
    }
    Ok(gb_per_s(received, elapsed))
}

fn markdown(machine: &Machine, ceilings: &[Ceiling]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Machine: {}, {} CPUs, Linux {}\n",
        machine.cpu_model, machine.cpus, machine.kernel
    );
    let _ = writeln!(out, "| ceiling | value | unit | method |");
    let _ = writeln!(out, "| --- | ---: | --- | --- |");
    for c in ceilings {
        let value = match &c.value {
            Ok(v) => format!("{v:.2}"),
            Err(e) => format!("failed: {e}"),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            c.name, value, c.unit, c.method
        );
    }
    out
}

fn json(machine: &Machine, ceilings: &[Ceiling]) -> String {
    let mut out = String::from("{\n");
    let _ = writeln!(
        out,
        "  \"machine\": {{\"cpu_model\": {}, \"cpus\": {}, \"kernel\": {}}},",
        json_string(&machine.cpu_model),
        machine.cpus,
        json_string(&machine.kernel)
    );
    let fields: Vec<String> = ceilings
        .iter()
        .map(|c| match &c.value {
            Ok(v) if v.is_finite() => format!("  \"{}\": {v:.3}", c.key),
            Ok(_) => format!("  \"{}\": null", c.key),
            Err(e) => format!(
                "  \"{}\": null,\n  \"{}_error\": {}",
                c.key,
                c.key,
                json_string(&e.to_string())
            ),
        })
        .collect();
    out.push_str(&fields.join(",\n"));
    out.push_str("\n}\n");
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gnu_dd_summary() {
        let stderr = "1024+0 records in\n1024+0 records out\n\
                      1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.52 s, 706 MB/s";
        assert_eq!(parse_dd_summary(stderr), Some((1_073_741_824, 1.52)));
        assert_eq!(parse_dd_summary("dd: failed to open 'x'"), None);
    }

    #[test]
    fn json_escapes_strings() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }

    #[test]
    fn json_reports_errors_as_null_plus_message() {
        let machine = Machine {
            cpu_model: "x".into(),
            cpus: 2,
            kernel: "6".into(),
        };
        let ceilings = [
            Ceiling {
                key: "a_gb_s",
                name: "a",
                unit: "GB/s",
                method: String::new(),
                value: Ok(1.5),
            },
            Ceiling {
                key: "b_mb_s",
                name: "b",
                unit: "MB/s",
                method: String::new(),
                value: Err(CeilingsError::SenderPanicked),
            },
        ];
        let text = json(&machine, &ceilings);
        assert!(text.contains("\"a_gb_s\": 1.500,"));
        assert!(text.contains("\"b_mb_s\": null,\n  \"b_mb_s_error\": \"the loopback"));
        assert!(text.trim_end().ends_with('}'));
    }
}
