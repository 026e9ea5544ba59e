//! The broker against real Kafka clients: confluent-kafka (the current wheel in the
//! project's `.venv`, and Debian's python3-confluent-kafka on its old librdkafka),
//! kafka-python, kcat, restarts (SIGTERM and SIGKILL) under load and garbage frames.
//!
//! `scripts/test.sh` installs the clients (apt: kcat, python3-confluent-kafka,
//! python3-kafka; pip into `.venv`: confluent-kafka, kafka-python). A test whose client
//! is missing prints why and is skipped. The client scripts live in `tests/clients`.
//!
//! Run alone: `cargo test -p twinlog --test broker_clients -- --nocapture --test-threads=1`.
//! `TWINLOG_KEEP_TEST_DIRS=1` keeps a failed test's broker directory (logs, data).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use support::{
    assert_success, debian_python, metadata_roundtrip, missing_program, missing_python_modules,
    request_frame_v1, run_command, run_python, skip_if, spawn_python, venv_python, wait_child,
    Broker, Rng,
};

fn s(x: impl ToString) -> String {
    x.to_string()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// 1. confluent-kafka (current wheel): 100,000 idempotent lz4 records with keys, values,
///    headers and timestamps over 8 partitions, read back exactly once and in order;
///    offsets_for_times (ListOffsets by timestamp) finds the expected offsets.
#[test]
fn confluent_kafka_current_100k_idempotent_lz4() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "confluent_kafka_current",
    ) {
        return;
    }
    // CreateTopics asks for 8 partitions; if the broker does not serve it yet, the
    // producer's metadata request auto-creates the topic with num.partitions.
    let broker = Broker::start("\"num.partitions\" = 8\n");
    let a = [
        s("--bootstrap"),
        broker.bootstrap(),
        s("--topic"),
        s("bulk-lz4"),
        s("--count"),
        s("100000"),
        s("--partitions"),
        s("8"),
        s("--create"),
        s("--compression"),
        s("lz4"),
        s("--idempotent"),
        s("--check-times"),
        s("--timeout"),
        s("200"),
    ];
    let out = run_python(&py, "ck_roundtrip.py", &args(&a), Duration::from_secs(230));
    assert_success(&out, &broker);
    // The records must really have travelled as idempotent lz4 batches: librdkafka
    // silently sends uncompressed batches when it believes the broker lacks LZ4, which
    // it infers from ApiVersions (FindCoordinator must be listed).
    let log = support::dump_log_summary(&broker.data_dir(), "bulk-lz4", 0);
    eprintln!("[confluent] bulk-lz4-0 on disk: {log:?}");
    assert_eq!(
        log.without_producer_id, 0,
        "batches without a producer id: the producer was not idempotent ({log:?})"
    );
    // librdkafka keeps a batch uncompressed when lz4 would not make it smaller (a tiny
    // batch under load), so a few `none` batches are legitimate; LZ4 being disabled
    // makes them all `none`.
    let lz4 = log.codecs.get("lz4").copied().unwrap_or(0);
    let none = log.codecs.get("none").copied().unwrap_or(0);
    assert!(
        lz4 + none == log.batches && lz4 * 10 >= log.batches * 9,
        "the producer asked for lz4 but the log holds {:?}. librdkafka disables LZ4 \
         (\"Broker does not support compression type lz4: not compressing batch\") when \
         ApiVersions does not list FindCoordinator, its proxy for the LZ4 feature",
        log.codecs
    );
    assert_no_panic(&broker);
}

/// 2a. Debian's python3-confluent-kafka (librdkafka 2.0.x): plain gzip and idempotent
///     zstd round trips of a few thousand records.
#[test]
fn confluent_kafka_debian_roundtrip() {
    let py = debian_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "confluent_kafka_debian",
    ) {
        return;
    }
    let broker = Broker::start("\"num.partitions\" = 3\n");
    for (topic, extra) in [
        // No null header values: confluent-kafka 1.7.0 drops a reference to None for
        // each one it reads and the interpreter aborts (none_dealloc) at exit.
        (
            "deb-gzip",
            &["--compression", "gzip", "--acks", "1", "--no-null-headers"][..],
        ),
        (
            "deb-zstd-idem",
            &[
                "--compression",
                "zstd",
                "--idempotent",
                "--no-null-headers",
                "--check-times",
            ][..],
        ),
    ] {
        let mut a = vec![
            s("--bootstrap"),
            broker.bootstrap(),
            s("--topic"),
            s(topic),
            s("--count"),
            s("4000"),
            s("--partitions"),
            s("3"),
            s("--timeout"),
            s("90"),
        ];
        a.extend(extra.iter().map(s));
        let out = run_python(&py, "ck_roundtrip.py", &args(&a), Duration::from_secs(110));
        assert_success(&out, &broker);
    }
    assert_no_panic(&broker);
}

/// 2b. kafka-python (venv): gzip round trip with group_id=None consumption.
#[test]
fn kafka_python_venv_roundtrip() {
    let py = venv_python();
    if skip_if(missing_python_modules(&py, &["kafka"]), "kafka_python_venv") {
        return;
    }
    kafka_python_roundtrip(&py, "kp-venv", 4000, Some("gzip"));
}

/// 2c. Debian's python3-kafka (kafka-python 2.0.x): plain round trip.
#[test]
fn kafka_python_debian_roundtrip() {
    let py = debian_python();
    if skip_if(
        missing_python_modules(&py, &["kafka"]),
        "kafka_python_debian",
    ) {
        return;
    }
    kafka_python_roundtrip(&py, "kp-deb", 2000, None);
}

fn kafka_python_roundtrip(py: &Path, topic: &str, count: u32, compression: Option<&str>) {
    let broker = Broker::start("\"num.partitions\" = 3\n");
    let mut a = vec![
        s("--bootstrap"),
        broker.bootstrap(),
        s("--topic"),
        s(topic),
        s("--count"),
        s(count),
        s("--partitions"),
        s("3"),
        s("--timeout"),
        s("90"),
    ];
    if let Some(c) = compression {
        a.extend([s("--compression"), s(c)]);
    }
    let out = run_python(py, "kp_roundtrip.py", &args(&a), Duration::from_secs(110));
    assert_success(&out, &broker);
    assert_no_panic(&broker);
}

/// 3. kcat: produce lines (plain and keyed) to partition 0, list metadata, consume
///    exactly those lines back with their offsets.
#[test]
fn kcat_produce_list_consume() {
    if skip_if(missing_program("kcat"), "kcat") {
        return;
    }
    let broker = Broker::start("");
    let b = broker.bootstrap();
    let topic = "kcat-lines";
    let t = Duration::from_secs(60);

    let plain: String = (0..300)
        .map(|i| format!("line {i} of kcat, plain\n"))
        .collect();
    let out = run_command(
        Command::new("kcat").args(["-b", &b, "-P", "-t", topic, "-p", "0"]),
        Some(plain.as_bytes()),
        t,
    );
    assert_success(&out, &broker);
    let keyed: String = (0..200).map(|i| format!("key-{i}:value {i}\n")).collect();
    let out = run_command(
        Command::new("kcat").args(["-b", &b, "-P", "-t", topic, "-p", "0", "-K", ":"]),
        Some(keyed.as_bytes()),
        t,
    );
    assert_success(&out, &broker);

    let out = run_command(Command::new("kcat").args(["-b", &b, "-L"]), None, t);
    assert_success(&out, &broker);
    assert!(
        out.stdout
            .contains(&format!("topic \"{topic}\" with 1 partitions"))
            && out.stdout.contains("partition 0, leader 0"),
        "kcat -L does not list {topic} with partition 0 led by broker 0:\n{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("at 127.0.0.1:{}", broker.port)),
        "kcat -L does not show the broker at 127.0.0.1:{}:\n{}",
        broker.port,
        out.stdout
    );

    let out = run_command(
        Command::new("kcat").args([
            "-b",
            &b,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o|%k|%s\n",
        ]),
        None,
        t,
    );
    assert_success(&out, &broker);
    let mut want = String::new();
    for i in 0..300 {
        want.push_str(&format!("{i}||line {i} of kcat, plain\n"));
    }
    for i in 0..200 {
        want.push_str(&format!("{}|key-{i}|value {i}\n", 300 + i));
    }
    if out.stdout != want {
        let got: Vec<&str> = out.stdout.lines().collect();
        let exp: Vec<&str> = want.lines().collect();
        let first = got.iter().zip(&exp).position(|(g, e)| g != e);
        panic!(
            "kcat -C output differs: {} lines, expected {}; first difference at line {:?}: \
             got {:?}, expected {:?}\nstderr:\n{}",
            got.len(),
            exp.len(),
            first,
            first.and_then(|i| got.get(i)),
            first.and_then(|i| exp.get(i)),
            out.stderr
        );
    }
    eprintln!("[kcat] 500 lines produced and consumed back exactly");
    assert_no_panic(&broker);
}

/// 4. Restarts: SIGTERM between two idempotent acks=all runs continues the offsets with
///    no gap or duplicate; SIGKILL during acks=all production loses no acknowledged
///    record and duplicates none.
#[test]
fn restart_sigterm_and_sigkill_keep_acknowledged_records() {
    let py = venv_python();
    if skip_if(missing_python_modules(&py, &["confluent_kafka"]), "restart") {
        return;
    }
    let mut broker = Broker::start("\"num.partitions\" = 4\n");
    let dir = broker.dir().to_path_buf();
    let ack = |name: &str| dir.join(name).display().to_string();
    let produce = |broker: &Broker, topic: &str, start: u32, count: u32, ack_file: &str| {
        let a = [
            s("--bootstrap"),
            broker.bootstrap(),
            s("--topic"),
            s(topic),
            s("--start"),
            s(start),
            s("--count"),
            s(count),
            s("--partitions"),
            s("4"),
            s("--ack-file"),
            s(ack_file),
            s("--compression"),
            s("lz4"),
            s("--timeout"),
            s("100"),
        ];
        run_python(&py, "ck_produce.py", &args(&a), Duration::from_secs(120))
    };

    // --- SIGTERM ---
    let topic = "restart-term";
    let out = produce(&broker, topic, 0, 20_000, &ack("term-1.acks"));
    assert_success(&out, &broker);
    broker.restart_term();
    let out = produce(&broker, topic, 20_000, 20_000, &ack("term-2.acks"));
    assert_success(&out, &broker);
    let a = [
        s("--bootstrap"),
        broker.bootstrap(),
        s("--topic"),
        s(topic),
        s("--partitions"),
        s("4"),
        s("--range"),
        s("0:40000"),
        s("--ack-file"),
        ack("term-1.acks"),
        s("--ack-file"),
        ack("term-2.acks"),
    ];
    let out = run_python(&py, "ck_check.py", &args(&a), Duration::from_secs(120));
    assert_success(&out, &broker);

    // --- SIGKILL during production ---
    let topic = "restart-kill";
    let total = 60_000u32;
    let acks1 = ack("kill-1.acks");
    let a = [
        s("--bootstrap"),
        broker.bootstrap(),
        s("--topic"),
        s(topic),
        s("--count"),
        s(total),
        s("--partitions"),
        s("4"),
        s("--ack-file"),
        acks1.clone(),
        s("--rate"),
        s("20000"),
        s("--timeout"),
        s("150"),
    ];
    let mut producer = spawn_python(&py, "ck_produce.py", &args(&a), &dir, "kill-producer");
    // Wait for the first acknowledgements, then kill the broker about 1 s later.
    let started = Instant::now();
    while std::fs::metadata(&acks1).map(|m| m.len()).unwrap_or(0) == 0 {
        if let Ok(Some(st)) = producer.try_wait() {
            panic!(
                "producer exited with {st} before any acknowledgement\n{}",
                read_logs(&dir, "kill-producer")
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no acknowledgement within 30 s\n{}\n{}",
            read_logs(&dir, "kill-producer"),
            broker.log_tail(30)
        );
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(1000));
    let before = count_lines(&acks1);
    broker.kill9();
    let at_kill = count_lines(&acks1);
    eprintln!("[restart] SIGKILL with {before}..{at_kill} of {total} records acknowledged");
    if at_kill as u32 >= total {
        eprintln!("[restart] note: the producer had finished before the SIGKILL");
    }
    thread::sleep(Duration::from_millis(300));
    broker.restart_after_stop();
    let status = wait_child(&mut producer, Duration::from_secs(170));
    let producer_logs = read_logs(&dir, "kill-producer");
    let acked = count_lines(&acks1);
    eprintln!("[restart] producer after restart: {status:?}, {acked} of {total} acknowledged");
    let producer_ok = status.map(|s| s.success()).unwrap_or(false);

    // A fresh idempotent producer must work after the crash in any case.
    let acks2 = ack("kill-2.acks");
    let out2 = produce(&broker, topic, total, 5_000, &acks2);
    let a = [
        s("--bootstrap"),
        broker.bootstrap(),
        s("--topic"),
        s(topic),
        s("--partitions"),
        s("4"),
        s("--allowed"),
        format!("0:{}", total + 5_000),
        s("--ack-file"),
        acks1.clone(),
        s("--ack-file"),
        acks2.clone(),
    ];
    let check = run_python(&py, "ck_check.py", &args(&a), Duration::from_secs(120));
    assert_success(&check, &broker);
    for p in 0..4 {
        let log = support::dump_log_summary(&broker.data_dir(), topic, p);
        assert_eq!(
            log.without_producer_id, 0,
            "{topic}-{p}: batches without a producer id: {log:?}"
        );
    }
    assert!(
        producer_ok,
        "the producer running across the SIGKILL did not get all {total} records \
         acknowledged ({acked} were; every acknowledged one is intact):\n{producer_logs}\n{}",
        broker.log_tail(40)
    );
    assert_success(&out2, &broker);
    if producer_ok {
        // Everything was acknowledged, so the whole range must be there, in order.
        let a = [
            s("--bootstrap"),
            broker.bootstrap(),
            s("--topic"),
            s(topic),
            s("--partitions"),
            s("4"),
            s("--range"),
            format!("0:{}", total + 5_000),
        ];
        let out = run_python(&py, "ck_check.py", &args(&a), Duration::from_secs(120));
        assert_success(&out, &broker);
    }
    assert_no_panic(&broker);
}

/// 5. Garbage on raw connections: random bytes, random and oversized length prefixes,
///    valid-looking headers with random bodies, truncated frames. The broker must stay
///    up and keep answering real clients.
#[test]
fn garbage_frames_do_not_hurt_the_broker() {
    let mut broker = Broker::start("");
    let addr = broker.addr();
    let seed = std::env::var("TWINLOG_GARBAGE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("[garbage] seed {seed} (TWINLOG_GARBAGE_SEED={seed} repeats it)");
    let mut rng = Rng::new(seed);
    let deadline = Instant::now() + Duration::from_secs(90);

    // Connections that announce a huge frame and then stall, held open throughout.
    let mut stalled = Vec::new();
    for _ in 0..16 {
        if let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            let mut f = (100 * 1024 * 1024 - 16i32).to_be_bytes().to_vec();
            f.extend(
                request_frame_v1(0, 9, 1, &rng.bytes(512))
                    .into_iter()
                    .skip(4),
            );
            let _ = c.write_all(&f);
            stalled.push(c);
        }
    }

    let mut frames = 0u32;
    let mut connections = 0u32;
    let mut answered = 0u32;
    let mut conn_errors = 0u32;
    for _ in 0..1200 {
        if Instant::now() > deadline {
            break;
        }
        let mut c = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    broker.is_alive(),
                    "the broker process died after {frames} garbage frames on {connections} \
                     connections (seed {seed}; connect: {e})\n{}",
                    broker.log_tail(30)
                );
                conn_errors += 1;
                assert!(
                    conn_errors < 20,
                    "cannot connect to the broker any more: {e}\n{}",
                    broker.log_tail(40)
                );
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        connections += 1;
        let _ = c.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = c.set_nodelay(true);
        // Sometimes start with a valid request and check its answer first.
        if rng.below(4) == 0 {
            let frame = request_frame_v1(18, 0, 9, &[]);
            if c.write_all(&frame).is_ok() {
                let mut len = [0u8; 4];
                if c.read_exact(&mut len).is_ok() {
                    let n = i32::from_be_bytes(len);
                    assert!(
                        (6..1 << 20).contains(&n),
                        "odd ApiVersions response length {n}"
                    );
                    let mut body = vec![0u8; n as usize];
                    c.read_exact(&mut body).expect("ApiVersions response body");
                    assert_eq!(&body[..4], &9i32.to_be_bytes(), "correlation id");
                    answered += 1;
                }
            }
        }
        let n = 1 + rng.below(4);
        for k in 0..n {
            let last = k + 1 == n;
            let frame = garbage_frame(&mut rng, last);
            frames += 1;
            if c.write_all(&frame).is_err() {
                break; // The broker closed the connection: fine.
            }
        }
        // Half the time close at once, otherwise give the broker a moment to answer.
        if rng.below(2) == 0 {
            let _ = c.set_read_timeout(Some(Duration::from_millis(20)));
            let mut sink = [0u8; 4096];
            let _ = c.read(&mut sink);
        }
        drop(c);
    }
    eprintln!(
        "[garbage] {frames} frames on {connections} connections ({answered} valid \
         ApiVersions answered in between, {conn_errors} connect errors)"
    );
    assert!(
        frames >= 1000,
        "only {frames} frames sent before the deadline"
    );
    assert!(broker.is_alive(), "broker died\n{}", broker.log_tail(60));

    // The stalled connections did not block anyone: a real client still gets answers.
    let brokers = metadata_roundtrip(addr, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("Metadata after garbage: {e}\n{}", broker.log_tail(40)));
    assert_eq!(brokers.len(), 1, "{brokers:?}");
    assert_eq!(brokers[0].2, i32::from(broker.port), "{brokers:?}");
    let (err, keys) = support::api_versions_roundtrip(addr, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("ApiVersions after garbage: {e}\n{}", broker.log_tail(40)));
    assert_eq!(err, 0, "ApiVersions error code");
    assert!(keys >= 5, "ApiVersions lists {keys} APIs");
    if missing_program("kcat").is_none() {
        let b = broker.bootstrap();
        let out = run_command(
            Command::new("kcat").args(["-b", &b, "-P", "-t", "after-garbage", "-p", "0"]),
            Some(b"still\nserving\n"),
            Duration::from_secs(60),
        );
        assert_success(&out, &broker);
        let out = run_command(
            Command::new("kcat").args([
                "-b",
                &b,
                "-C",
                "-t",
                "after-garbage",
                "-p",
                "0",
                "-o",
                "beginning",
                "-e",
            ]),
            None,
            Duration::from_secs(60),
        );
        assert_success(&out, &broker);
        assert_eq!(out.stdout, "still\nserving\n", "kcat after garbage");
        let out = run_command(
            Command::new("kcat").args(["-b", &b, "-L"]),
            None,
            Duration::from_secs(60),
        );
        assert_success(&out, &broker);
    }
    drop(stalled);
    thread::sleep(Duration::from_millis(200));
    assert!(broker.is_alive(), "broker died\n{}", broker.log_tail(60));
    assert_no_panic(&broker);
    let (warn, error, _) = broker.log_problems();
    let memory = broker
        .pid()
        .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .map(|st| {
            st.lines()
                .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    eprintln!("[garbage] broker logged {warn} WARN and {error} ERROR lines; memory: {memory}");
}

/// One malformed (or malformed-looking) request frame. `last`: it may be truncated.
fn garbage_frame(rng: &mut Rng, last: bool) -> Vec<u8> {
    const KEYS: [i16; 9] = [0, 1, 2, 3, 18, 19, 10, 22, 60];
    let random_key = |rng: &mut Rng| -> i16 {
        if rng.below(3) == 0 {
            rng.below(100) as i16 - 5
        } else {
            KEYS[rng.below(KEYS.len() as u64) as usize]
        }
    };
    match rng.below(if last { 10 } else { 8 }) {
        // Random bytes with no structure.
        0 => {
            let n = rng.below(300) as usize;
            rng.bytes(n)
        }
        // Random length prefix, a few random bytes.
        1 => {
            let mut f = (rng.next_u64() as i32).to_be_bytes().to_vec();
            let n = rng.below(64) as usize;
            f.extend(rng.bytes(n));
            f
        }
        // Valid v1 header of a (mostly) known API and version, random body.
        2 | 3 => {
            let key = random_key(rng);
            let version = rng.below(20) as i16 - 1;
            let n = rng.below(400) as usize;
            request_frame_v1(key, version, rng.next_u64() as i32, &rng.bytes(n))
        }
        // Flexible (v2) header: tagged fields after the client id, random body.
        4 => {
            let key = random_key(rng);
            let version = 9 + rng.below(8) as i16;
            let mut body = vec![rng.below(3) as u8]; // tagged field count
            let n = rng.below(300) as usize;
            body.extend(rng.bytes(n));
            request_frame_v1(key, version, rng.next_u64() as i32, &body)
        }
        // Header whose client id length lies.
        5 => {
            let mut payload = Vec::new();
            payload.extend(random_key(rng).to_be_bytes());
            payload.extend((rng.below(12) as i16).to_be_bytes());
            payload.extend(7i32.to_be_bytes());
            payload.extend([0x7f, 0xff]); // client id of 32767 bytes
            let n = rng.below(100) as usize;
            payload.extend(rng.bytes(n));
            let mut f = (payload.len() as i32).to_be_bytes().to_vec();
            f.extend(payload);
            f
        }
        // Zero, negative or just-too-short lengths.
        6 => {
            let len: i32 = [0, -1, i32::MIN, 1, 2, 3, 5][rng.below(7) as usize];
            let mut f = len.to_be_bytes().to_vec();
            let n = rng.below(8) as usize;
            f.extend(rng.bytes(n));
            f
        }
        // Oversized length (above socket.request.max.bytes) with a valid header.
        7 => {
            let len: i32 = [104_857_601, i32::MAX, 0x4000_0000][rng.below(3) as usize];
            let mut f = len.to_be_bytes().to_vec();
            f.extend(
                request_frame_v1(0, 9, 1, &rng.bytes(64))
                    .into_iter()
                    .skip(4),
            );
            f
        }
        // Truncated: a valid frame cut short (the connection closes after it).
        _ => {
            let key = random_key(rng);
            let n = 16 + rng.below(2000) as usize;
            let full = request_frame_v1(key, rng.below(12) as i16, 3, &rng.bytes(n));
            let cut = 1 + rng.below(full.len() as u64 - 1) as usize;
            full[..cut].to_vec()
        }
    }
}

fn count_lines(path: &str) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn read_logs(dir: &Path, name: &str) -> String {
    let out = std::fs::read_to_string(dir.join(format!("{name}.stdout"))).unwrap_or_default();
    let err = std::fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap_or_default();
    let err_lines: Vec<&str> = err.lines().collect();
    let from = err_lines.len().saturating_sub(60);
    format!(
        "----- {name} stdout -----\n{out}\n----- {name} stderr (last {} lines) -----\n{}",
        err_lines.len() - from,
        err_lines[from..].join("\n")
    )
}

fn assert_no_panic(broker: &Broker) {
    let (_, _, panicked) = broker.log_problems();
    assert!(
        !panicked,
        "the broker logged a panic\n{}",
        broker.log_tail(80)
    );
}
