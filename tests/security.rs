//! Security against real clients: a SASL_PLAINTEXT listener with PLAIN (users from the
//! listener's JAAS config). kcat, confluent-kafka, kafka-python and Kafka's own Java
//! tools authenticate and produce and consume; a wrong password, no SASL at all and
//! requests before authentication are refused; DescribeConfigs never shows the JAAS
//! config's passwords.
//!
//! A test whose client is missing prints why and is skipped. Run alone:
//! `cargo test -p twinlog --test security -- --nocapture`.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{
    assert_success, missing_program, missing_python_modules, run_command, run_python, skip_if,
    venv_python, Broker,
};

const PASSWORD: &str = "alice-secret-0f3c";

fn sasl_config() -> String {
    format!(
        "\"listeners\" = \"SASL_PLAINTEXT://127.0.0.1:0\"\n\"sasl.enabled.mechanisms\" = \"PLAIN\"\n\"listener.name.sasl_plaintext.plain.sasl.jaas.config\" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"{PASSWORD}\" user_alice=\"{PASSWORD}\" user_bob=\"bob-pw\";'\n\"offsets.topic.num.partitions\" = 2\n\"transaction.state.log.num.partitions\" = 2\n\"group.initial.rebalance.delay.ms\" = 0\n"
    )
}

fn kcat(
    broker: &Broker,
    password: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> support::CmdOutput {
    let bootstrap = broker.bootstrap();
    let mut cmd = Command::new("kcat");
    cmd.args(["-b", &bootstrap])
        .args(["-X", "security.protocol=SASL_PLAINTEXT"])
        .args(["-X", "sasl.mechanisms=PLAIN"])
        .args(["-X", "sasl.username=alice"])
        .args(["-X", &format!("sasl.password={password}")])
        .args(args);
    run_command(&mut cmd, stdin, Duration::from_secs(30))
}

/// Every record of `plain`-0, read by kcat as alice.
fn read_plain(broker: &Broker) -> support::CmdOutput {
    let args = [
        "-C",
        "-t",
        "plain",
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
        "-q",
    ];
    kcat(broker, PASSWORD, &args, None)
}

#[test]
fn sasl_plain_authenticates_kcat_and_refuses_the_rest() {
    if skip_if(missing_program("kcat"), "sasl_plain_kcat") {
        return;
    }
    let broker = Broker::start(&sasl_config());
    let out = kcat(
        &broker,
        PASSWORD,
        &["-P", "-t", "plain", "-p", "0", "-X", "acks=all"],
        Some(b"one\ntwo\nthree\n"),
    );
    assert_success(&out, &broker);
    let out = read_plain(&broker);
    assert_success(&out, &broker);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["one", "two", "three"]
    );

    // A wrong password: refused with Kafka's authentication error, nothing listed.
    let out = kcat(&broker, "wrong", &["-L", "-m", "5"], None);
    assert!(
        !out.success(),
        "a wrong password listed metadata: {}",
        out.describe()
    );
    assert!(
        out.stderr.contains("Authentication failed"),
        "{}",
        out.describe()
    );
    // No SASL at all: the connection is closed before Metadata is answered.
    let out = run_command(
        Command::new("kcat").args(["-b", &broker.bootstrap(), "-L", "-m", "5"]),
        None,
        Duration::from_secs(30),
    );
    assert!(
        !out.success(),
        "a client without SASL listed metadata: {}",
        out.describe()
    );
    assert!(
        broker
            .log()
            .contains("Metadata request before SASL authentication"),
        "{}",
        broker.log_tail(20)
    );
    // Before authentication a frame may not exceed a SASL token's 512 KiB: a 10 MB
    // length prefix closes the connection at once.
    {
        use std::io::{Read, Write};
        let mut raw = std::net::TcpStream::connect(broker.addr()).expect("connect");
        raw.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        raw.write_all(&(10_000_000i32).to_be_bytes())
            .expect("write");
        let mut buf = [0u8; 16];
        assert_eq!(raw.read(&mut buf).expect("closed, not timed out"), 0);
    }
    // Nothing of the refused clients reached the log.
    let out = read_plain(&broker);
    assert_eq!(out.stdout.lines().count(), 3, "{}", out.describe());
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "{}", broker.log_tail(40));
}

#[test]
fn sasl_plain_serves_confluent_kafka_kafka_python_and_the_java_tools() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka", "kafka"]),
        "sasl_plain_clients",
    ) {
        return;
    }
    let broker = Broker::start(&sasl_config());
    let bootstrap = broker.bootstrap();
    let common = ["--bootstrap", &bootstrap, "--user", "alice"];
    let mut args = vec!["roundtrip"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--password", PASSWORD]);
    let out = run_python(&py, "sasl_clients.py", &args, Duration::from_secs(120));
    assert_success(&out, &broker);
    let mut args = vec!["refused"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--password", PASSWORD]);
    let out = run_python(&py, "sasl_clients.py", &args, Duration::from_secs(120));
    assert_success(&out, &broker);
    assert!(
        out.stderr.contains(
            "SASL authentication error: Authentication failed: Invalid username or password"
        ),
        "{}",
        out.describe()
    );

    if skip_if(support::kafka::missing_kafka(), "sasl_plain_java_tools") {
        return;
    }
    // The Java AdminClient of Kafka's tools, with the client settings of a command
    // config file.
    let client = broker.dir().join("client.properties");
    std::fs::write(
        &client,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"bob\" password=\"bob-pw\";\n",
    )
    .expect("client.properties");
    let client = client.display().to_string();
    let tool = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "--bootstrap-server",
            &bootstrap,
            "--command-config",
            &client,
        ];
        args.extend_from_slice(extra);
        support::kafka::run_tool(name, &args, None, Duration::from_secs(60))
    };
    let out = tool(
        "kafka-topics",
        &["--create", "--topic", "java-made", "--partitions", "3"],
    );
    support::kafka::expect_ok(&out, "kafka-topics --create over SASL/PLAIN");
    let out = tool("kafka-topics", &["--describe", "--topic", "java-made"]);
    support::kafka::expect_ok(&out, "kafka-topics --describe over SASL/PLAIN");
    let described = out.stdout;
    assert!(described.contains("PartitionCount: 3"), "{described}");
    // The JAAS config is a secret: listed, but never its passwords.
    let out = tool(
        "kafka-configs",
        &[
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
            "--all",
        ],
    );
    support::kafka::expect_ok(&out, "kafka-configs --describe over SASL/PLAIN");
    let configs = out.stdout;
    assert!(
        configs.contains("listener.name.sasl_plaintext.plain.sasl.jaas.config=null sensitive=true"),
        "{configs}"
    );
    assert!(
        !configs.contains(PASSWORD) && !configs.contains("bob-pw"),
        "DescribeConfigs showed a password: {configs}"
    );
    assert!(configs.contains("listeners=SASL_PLAINTEXT://"), "{configs}");
}
