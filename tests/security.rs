//! Security against real clients: a SASL_PLAINTEXT listener with PLAIN (users from the
//! listener's JAAS config). kcat, confluent-kafka, kafka-python and Kafka's own Java
//! tools authenticate and produce and consume; a wrong password, no SASL at all and
//! requests before authentication are refused; DescribeConfigs never shows the JAAS
//! config's passwords. TLS listeners (SSL, SASL_SSL, mTLS), SCRAM users made by
//! kafka-configs, ACLs made by kafka-acls, and mirrors from secured sources: SCRAM over
//! TLS, and the ACL sync with its held WRITE released by failover.
//!
//! A test whose client is missing prints why and is skipped. Run alone:
//! `cargo test -p twinlog --test security -- --nocapture`.

mod mirror_support;
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

/// One request on `stream` and its response body (after the correlation id), or `None`
/// when the broker closed the connection instead of answering.
fn exchange(stream: &mut std::net::TcpStream, frame: &[u8]) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    stream.write_all(frame).ok()?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len).max(4) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(body.split_off(4))
}

/// SaslHandshake v1 (PLAIN) and SaslAuthenticate v1 as `user`: the SaslAuthenticate
/// error code and session lifetime.
fn plain_login(stream: &mut std::net::TcpStream, user: &str, password: &str) -> (i16, i64) {
    sasl_handshake(stream, "PLAIN");
    let (error, _, lifetime) =
        sasl_authenticate(stream, format!("\0{user}\0{password}").as_bytes());
    (error, lifetime)
}

/// SaslHandshake v1 for `mechanism`, which must be enabled.
fn sasl_handshake(stream: &mut std::net::TcpStream, mechanism: &str) {
    let mut body = (mechanism.len() as i16).to_be_bytes().to_vec();
    body.extend_from_slice(mechanism.as_bytes());
    let handshake =
        exchange(stream, &support::request_frame_v1(17, 1, 1, &body)).expect("SaslHandshake");
    assert_eq!(&handshake[..2], &[0, 0], "SaslHandshake error");
}

/// One SaslAuthenticate v1: its error code (-1: the connection closed), auth bytes and
/// session lifetime.
fn sasl_authenticate(stream: &mut std::net::TcpStream, token: &[u8]) -> (i16, Vec<u8>, i64) {
    let mut body = (token.len() as i32).to_be_bytes().to_vec();
    body.extend_from_slice(token);
    let Some(r) = exchange(stream, &support::request_frame_v1(36, 1, 2, &body)) else {
        return (-1, Vec::new(), 0);
    };
    let error = i16::from_be_bytes([r[0], r[1]]);
    // error_message (nullable string), auth_bytes, session_lifetime_ms.
    let message = i16::from_be_bytes([r[2], r[3]]).max(0) as usize;
    let at = 4 + message;
    let auth = i32::from_be_bytes(r[at..at + 4].try_into().expect("4 bytes")).max(0) as usize;
    let bytes = r[at + 4..at + 4 + auth].to_vec();
    let at = at + 4 + auth;
    let lifetime = i64::from_be_bytes(r[at..at + 8].try_into().expect("8 bytes"));
    (error, bytes, lifetime)
}

#[test]
fn sasl_sessions_expire_after_connections_max_reauth_ms_unless_the_client_re_authenticates() {
    use support::request_frame_v1;
    let broker = Broker::start(&format!(
        "{}\"connections.max.reauth.ms\" = 1500\n",
        sasl_config()
    ));
    let connect = || {
        let s = std::net::TcpStream::connect(broker.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s
    };
    let api_versions = request_frame_v1(18, 0, 3, &[]);
    // The lifetime is told in SaslAuthenticate v1; after it, the next request closes
    // the connection.
    let mut s = connect();
    assert_eq!(plain_login(&mut s, "alice", PASSWORD), (0, 1500));
    assert!(exchange(&mut s, &api_versions).is_some());
    std::thread::sleep(Duration::from_millis(1700));
    assert!(
        exchange(&mut s, &api_versions).is_none(),
        "an expired session was served"
    );
    // Re-authenticating as the same user renews the session.
    let mut s = connect();
    assert_eq!(plain_login(&mut s, "alice", PASSWORD), (0, 1500));
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(plain_login(&mut s, "alice", PASSWORD), (0, 1500));
        assert!(
            exchange(&mut s, &api_versions).is_some(),
            "renewed session closed"
        );
    }
    // Re-authenticating as someone else is refused, and the connection closed.
    let mut s = connect();
    assert_eq!(plain_login(&mut s, "alice", PASSWORD).0, 0);
    assert_eq!(
        plain_login(&mut s, "bob", "bob-pw").0,
        58,
        "a re-authentication changed the principal"
    );
    assert!(exchange(&mut s, &api_versions).is_none());
    assert!(
        broker.log().contains("SASL session expired"),
        "{}",
        broker.log_tail(20)
    );

    // librdkafka (KIP-368) re-authenticates its connections: none is closed for it.
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "sasl_reauth_clients",
    ) {
        return;
    }
    let expired_before = broker.log().matches("SASL session expired").count();
    let bootstrap = broker.bootstrap();
    let out = run_python(
        &py,
        "sasl_clients.py",
        &[
            "reauth",
            "--bootstrap",
            &bootstrap,
            "--user",
            "alice",
            "--password",
            PASSWORD,
            "--topic",
            "reauth",
            "--seconds",
            "5",
        ],
        Duration::from_secs(120),
    );
    assert_success(&out, &broker);
    assert_eq!(
        broker.log().matches("SASL session expired").count(),
        expired_before,
        "librdkafka's connections were closed, not renewed: {}",
        broker.log_tail(20)
    );
}

/// A test CA and the PEM files signed by it, in `dir`: `ca.pem`, `broker.pem` (key
/// and chain for 127.0.0.1 and localhost) and `alice.pem` (a client key pair, subject
/// `CN=alice,O=Twinlog Tests`); `rogue.pem` is a client key pair no CA of the broker's
/// signed.
struct TestPki {
    dir: std::path::PathBuf,
}

impl TestPki {
    fn create(dir: &std::path::Path, ca_name: &str) -> TestPki {
        TestPki::create_for(dir, ca_name, &[])
    }

    /// [`TestPki::create`] with `broker.pem` naming `hosts` too.
    fn create_for(dir: &std::path::Path, ca_name: &str, hosts: &[String]) -> TestPki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        std::fs::create_dir_all(dir).expect("pki dir");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, ca_name);
        let ca_cert = ca.self_signed(&ca_key).expect("CA cert");
        std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("ca.pem");
        let issuer = Issuer::new(ca, ca_key);
        let leaf =
            |file: &str, names: Vec<String>, cn: &str, signer: Option<&Issuer<'_, KeyPair>>| {
                let key = KeyPair::generate().expect("key");
                let mut params = CertificateParams::new(names).expect("params");
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, "Twinlog Tests");
                params.distinguished_name.push(DnType::CommonName, cn);
                let cert = match signer {
                    Some(issuer) => params.signed_by(&key, issuer),
                    None => params.self_signed(&key),
                }
                .expect("cert");
                std::fs::write(
                    dir.join(file),
                    format!("{}{}", key.serialize_pem(), cert.pem()),
                )
                .expect("write pem");
            };
        let mut names: Vec<String> = vec!["127.0.0.1".into(), "localhost".into()];
        names.extend(
            hosts
                .iter()
                .filter(|h| !names.contains(h))
                .cloned()
                .collect::<Vec<_>>(),
        );
        leaf("broker.pem", names, "broker", Some(&issuer));
        leaf("alice.pem", Vec::new(), "alice", Some(&issuer));
        leaf("rogue.pem", Vec::new(), "alice", None);
        TestPki {
            dir: dir.to_owned(),
        }
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }
}

/// kcat on `bootstrap` with these `-X` settings.
fn kcat_with(
    bootstrap: &str,
    settings: &[String],
    args: &[&str],
    stdin: Option<&[u8]>,
) -> support::CmdOutput {
    let mut cmd = Command::new("kcat");
    cmd.args(["-b", bootstrap]);
    for s in settings {
        cmd.args(["-X", s]);
    }
    cmd.args(args);
    run_command(&mut cmd, stdin, Duration::from_secs(30))
}

/// One broker with four listeners: PLAINTEXT (inter-broker, the harness's), SSL,
/// SASL_SSL with PLAIN, and MTLS (SSL that requires a client certificate).
fn tls_broker(pki: &TestPki) -> (Broker, [u16; 3]) {
    let ports = [
        support::free_port(),
        support::free_port(),
        support::free_port(),
    ];
    let config = format!(
        r#""listeners" = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl},SASL_SSL://127.0.0.1:{sasl},MTLS://127.0.0.1:{mtls}"
"listener.security.protocol.map" = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "{broker}"
"listener.name.mtls.ssl.client.auth" = "required"
"listener.name.mtls.ssl.truststore.type" = "PEM"
"listener.name.mtls.ssl.truststore.location" = "{ca}"
"listener.name.sasl_ssl.sasl.enabled.mechanisms" = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
"listener.name.sasl_ssl.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
"offsets.topic.num.partitions" = 2
"transaction.state.log.num.partitions" = 2
"group.initial.rebalance.delay.ms" = 0
"#,
        ssl = ports[0],
        sasl = ports[1],
        mtls = ports[2],
        broker = pki.path("broker.pem"),
        ca = pki.path("ca.pem"),
    );
    (Broker::start(&config), ports)
}

#[test]
fn tls_listeners_serve_kcat_over_ssl_sasl_ssl_and_mtls_and_reload_their_keys() {
    if skip_if(missing_program("kcat"), "tls_kcat") {
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let pki = TestPki::create(&scratch.path().join("pki"), "Twinlog test CA");
    let (broker, [ssl, sasl_ssl, mtls]) = tls_broker(&pki);
    let at = |port: u16| format!("127.0.0.1:{port}");
    let ssl_settings = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ];
    let out = kcat_with(
        &at(ssl),
        &ssl_settings,
        &["-P", "-t", "tls", "-p", "0", "-X", "acks=all"],
        Some(b"one\ntwo\nthree\n"),
    );
    assert_success(&out, &broker);
    // Metadata on a listener names the brokers at their addresses on that listener.
    let out = kcat_with(&at(ssl), &ssl_settings, &["-L", "-t", "tls"], None);
    assert_success(&out, &broker);
    assert!(
        out.stdout.contains(&format!("at 127.0.0.1:{ssl}")),
        "{}",
        out.describe()
    );
    let read = ["-C", "-t", "tls", "-p", "0", "-o", "beginning", "-e", "-q"];
    // SASL over TLS.
    let sasl_settings = vec![
        "security.protocol=SASL_SSL".to_string(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
        "sasl.mechanisms=PLAIN".into(),
        "sasl.username=alice".into(),
        format!("sasl.password={PASSWORD}"),
    ];
    let out = kcat_with(&at(sasl_ssl), &sasl_settings, &read, None);
    assert_success(&out, &broker);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["one", "two", "three"]
    );
    let mut wrong = sasl_settings.clone();
    wrong[4] = "sasl.password=wrong".into();
    let out = kcat_with(&at(sasl_ssl), &wrong, &["-L", "-m", "5"], None);
    assert!(
        !out.success() && out.stderr.contains("Authentication failed"),
        "{}",
        out.describe()
    );
    // Mutual TLS: a certificate the truststore's CA signed gets in; none, or one it
    // did not sign, does not.
    let with_cert = |file: &str| {
        let mut s = ssl_settings.clone();
        s.push(format!("ssl.key.location={}", pki.path(file)));
        s.push(format!("ssl.certificate.location={}", pki.path(file)));
        s
    };
    let out = kcat_with(&at(mtls), &with_cert("alice.pem"), &read, None);
    assert_success(&out, &broker);
    assert_eq!(out.stdout.lines().count(), 3, "{}", out.describe());
    for settings in [ssl_settings.clone(), with_cert("rogue.pem")] {
        let out = kcat_with(&at(mtls), &settings, &["-L", "-m", "5"], None);
        assert!(
            !out.success(),
            "mTLS let in {settings:?}: {}",
            out.describe()
        );
    }
    assert!(
        broker.log().contains("TLS handshake failed"),
        "{}",
        broker.log_tail(20)
    );
    // A client speaking plaintext to a TLS listener is closed, the broker unharmed.
    let out = kcat_with(&at(ssl), &[], &["-L", "-m", "5"], None);
    assert!(
        !out.success(),
        "plaintext on the SSL listener: {}",
        out.describe()
    );

    // New keys from another CA: the listener takes them without a restart.
    let renewed = TestPki::create(&scratch.path().join("renewed"), "Twinlog renewed CA");
    std::fs::copy(renewed.path("broker.pem"), pki.path("broker.pem")).expect("replace keys");
    let renewed_settings = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.ca.location={}", renewed.path("ca.pem")),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = kcat_with(&at(ssl), &renewed_settings, &read, None);
        if out.success() && out.stdout.lines().count() == 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the renewed keys were not taken: {}\n{}",
            out.describe(),
            broker.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        broker.log().contains("TLS keys reloaded"),
        "{}",
        broker.log_tail(20)
    );
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "{}", broker.log_tail(40));
}

#[test]
fn tls_listeners_serve_confluent_kafka_kafka_python_and_the_java_tools() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka", "kafka"]),
        "tls_clients",
    ) {
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let pki = TestPki::create(&scratch.path().join("pki"), "Twinlog test CA");
    let (broker, [ssl, sasl_ssl, mtls]) = tls_broker(&pki);
    let ca = pki.path("ca.pem");
    let sasl_bootstrap = format!("127.0.0.1:{sasl_ssl}");
    let args = [
        "roundtrip",
        "--bootstrap",
        &sasl_bootstrap,
        "--user",
        "alice",
        "--password",
        PASSWORD,
        "--ca",
        &ca,
        "--topic",
        "sasl-ssl",
    ];
    let out = run_python(&py, "sasl_clients.py", &args, Duration::from_secs(120));
    assert_success(&out, &broker);

    if skip_if(support::kafka::missing_kafka(), "tls_java_tools") {
        return;
    }
    // Kafka's Java AdminClient with a PEM truststore, then with a PEM keystore too.
    let properties = |name: &str, text: String| {
        let path = broker.dir().join(name);
        std::fs::write(&path, text).expect("client properties");
        path.display().to_string()
    };
    let ssl_client = properties(
        "ssl.properties",
        format!("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n"),
    );
    let mtls_client = properties(
        "mtls.properties",
        format!(
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\nssl.keystore.type=PEM\nssl.keystore.location={}\n",
            pki.path("alice.pem")
        ),
    );
    let tool = |port: u16, client: &str, extra: &[&str]| {
        let bootstrap = format!("127.0.0.1:{port}");
        let mut args = vec!["--bootstrap-server", &bootstrap, "--command-config", client];
        args.extend_from_slice(extra);
        support::kafka::run_tool("kafka-topics", &args, None, Duration::from_secs(60))
    };
    let out = tool(
        ssl,
        &ssl_client,
        &["--create", "--topic", "java-ssl", "--partitions", "2"],
    );
    support::kafka::expect_ok(&out, "kafka-topics --create over SSL");
    let out = tool(mtls, &mtls_client, &["--describe", "--topic", "java-ssl"]);
    support::kafka::expect_ok(&out, "kafka-topics --describe over mTLS");
    assert!(out.stdout.contains("PartitionCount: 2"), "{}", out.stdout);
}

#[test]
fn scram_users_made_by_kafka_configs_authenticate_over_sasl_ssl() {
    if skip_if(missing_program("kcat"), "scram_kcat")
        || skip_if(support::kafka::missing_kafka(), "scram_java_tools")
    {
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let pki = TestPki::create(&scratch.path().join("pki"), "Twinlog test CA");
    let (mut broker, [_, sasl_ssl, _]) = tls_broker(&pki);
    let plaintext = broker.bootstrap();
    let users = |extra: &[&str]| {
        let mut args = vec![
            "--bootstrap-server",
            &plaintext,
            "--entity-type",
            "users",
            "--entity-name",
            "carol",
        ];
        args.extend_from_slice(extra);
        support::kafka::run_tool("kafka-configs", &args, None, Duration::from_secs(60))
    };
    let out = users(&[
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=carol-pw],SCRAM-SHA-256=[password=carol-pw]",
    ]);
    support::kafka::expect_ok(&out, "kafka-configs --alter --add-config SCRAM");
    let scram = |mechanism: &str, password: &str| {
        vec![
            "security.protocol=SASL_SSL".to_string(),
            format!("ssl.ca.location={}", pki.path("ca.pem")),
            format!("sasl.mechanisms={mechanism}"),
            "sasl.username=carol".into(),
            format!("sasl.password={password}"),
        ]
    };
    let at = format!("127.0.0.1:{sasl_ssl}");
    let out = kcat_with(
        &at,
        &scram("SCRAM-SHA-512", "carol-pw"),
        &["-P", "-t", "scram", "-p", "0", "-X", "acks=all"],
        Some(b"a\nb\n"),
    );
    assert_success(&out, &broker);
    let read = [
        "-C",
        "-t",
        "scram",
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
        "-q",
    ];
    let out = kcat_with(&at, &scram("SCRAM-SHA-256", "carol-pw"), &read, None);
    assert_success(&out, &broker);
    assert_eq!(out.stdout.lines().collect::<Vec<_>>(), ["a", "b"]);
    let out = kcat_with(
        &at,
        &scram("SCRAM-SHA-512", "nope"),
        &["-L", "-m", "5"],
        None,
    );
    assert!(
        !out.success() && out.stderr.contains("Authentication failed"),
        "{}",
        out.describe()
    );
    let out = kcat_with(
        &at,
        &scram("SCRAM-SHA-512", "carol-pw")
            .into_iter()
            .map(|s| s.replace("carol", "dave"))
            .collect::<Vec<_>>(),
        &["-L", "-m", "5"],
        None,
    );
    assert!(!out.success(), "an unknown user got in: {}", out.describe());

    // The Java client, and the Python ones, with SCRAM-SHA-512 over TLS.
    let client = broker.dir().join("scram.properties");
    std::fs::write(
        &client,
        format!(
            "security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"carol\" password=\"carol-pw\";\n",
            pki.path("ca.pem")
        ),
    )
    .expect("scram.properties");
    let client = client.display().to_string();
    let out = support::kafka::run_tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &at,
            "--command-config",
            &client,
            "--describe",
            "--topic",
            "scram",
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-topics over SASL_SSL with SCRAM-SHA-512");
    assert!(out.stdout.contains("PartitionCount: 1"), "{}", out.stdout);
    let py = venv_python();
    if missing_python_modules(&py, &["confluent_kafka", "kafka"]).is_none() {
        let ca = pki.path("ca.pem");
        let args = [
            "roundtrip",
            "--bootstrap",
            &at,
            "--user",
            "carol",
            "--password",
            "carol-pw",
            "--ca",
            &ca,
            "--mechanism",
            "SCRAM-SHA-512",
            "--topic",
            "scram-py",
        ];
        let out = run_python(&py, "sasl_clients.py", &args, Duration::from_secs(120));
        assert_success(&out, &broker);
    }

    // The credentials are metadata: they survive a SIGKILL, and the password is not in
    // the metadata log.
    broker.restart_kill9();
    let out = kcat_with(&at, &scram("SCRAM-SHA-512", "carol-pw"), &read, None);
    assert_success(&out, &broker);
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut metadata = Vec::new();
    files(&broker.data_dir().join("__cluster_metadata"), &mut metadata);
    assert!(!metadata.is_empty());
    for path in metadata {
        let bytes = std::fs::read(&path).expect("metadata file");
        assert!(
            !bytes.windows(8).any(|w| w == b"carol-pw"),
            "the password reached {}",
            path.display()
        );
    }
    // Deleted, the mechanism no longer lets carol in; the other one still does.
    let out = users(&["--alter", "--delete-config", "SCRAM-SHA-512"]);
    support::kafka::expect_ok(&out, "kafka-configs --alter --delete-config SCRAM-SHA-512");
    let out = kcat_with(
        &at,
        &scram("SCRAM-SHA-512", "carol-pw"),
        &["-L", "-m", "5"],
        None,
    );
    assert!(
        !out.success(),
        "a deleted credential still authenticates: {}",
        out.describe()
    );
    let out = kcat_with(&at, &scram("SCRAM-SHA-256", "carol-pw"), &read, None);
    assert_success(&out, &broker);
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "{}", broker.log_tail(40));
}

/// A broker with the ACL authorizer: SASL_PLAINTEXT (the harness's, users admin, alice
/// and bob; admin is a super user) and a PLAINTEXT listener whose clients are
/// `User:ANONYMOUS`. Returns the PLAINTEXT port.
fn acl_broker(super_users: &str, extra: &str) -> (Broker, u16) {
    let plain = support::free_port();
    let mut config = format!(
        r#""listeners" = "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:{plain}"
"inter.broker.listener.name" = "SASL_PLAINTEXT"
"sasl.enabled.mechanisms" = "PLAIN"
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";'
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "{super_users}"
"offsets.topic.num.partitions" = 2
"transaction.state.log.num.partitions" = 2
"group.initial.rebalance.delay.ms" = 0
"#
    );
    config.push_str(extra);
    (Broker::start(&config), plain)
}

fn plain_user(user: &str) -> Vec<String> {
    vec![
        "security.protocol=SASL_PLAINTEXT".into(),
        "sasl.mechanisms=PLAIN".into(),
        format!("sasl.username={user}"),
        format!("sasl.password={user}-pw"),
    ]
}

#[test]
fn acls_made_by_kafka_acls_decide_what_each_principal_may_do() {
    if skip_if(missing_program("kcat"), "acls_kcat")
        || skip_if(support::kafka::missing_kafka(), "acls_java_tools")
    {
        return;
    }
    let (mut broker, plain) = acl_broker("User:admin", "");
    let at = broker.bootstrap();
    let admin = broker.dir().join("admin.properties");
    std::fs::write(
        &admin,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-pw\";\n",
    )
    .expect("admin.properties");
    let admin = admin.display().to_string();
    let tool = |name: &str, extra: &[&str]| {
        let mut args = vec!["--bootstrap-server", &at, "--command-config", &admin];
        args.extend_from_slice(extra);
        support::kafka::run_tool(name, &args, None, Duration::from_secs(60))
    };
    for topic in ["orders", "secret"] {
        let out = tool(
            "kafka-topics",
            &["--create", "--topic", topic, "--partitions", "1"],
        );
        support::kafka::expect_ok(&out, "kafka-topics --create as the super user");
    }
    let out = tool(
        "kafka-acls",
        &[
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--operation",
            "Describe",
            "--topic",
            "orders",
        ],
    );
    support::kafka::expect_ok(&out, "kafka-acls --add (alice writes orders)");
    let out = tool(
        "kafka-acls",
        &[
            "--add",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            "ord",
            "--resource-pattern-type",
            "prefixed",
            "--group",
            "g1",
        ],
    );
    support::kafka::expect_ok(&out, "kafka-acls --add (bob reads ord*, group g1)");
    let out = tool("kafka-acls", &["--list"]);
    support::kafka::expect_ok(&out, "kafka-acls --list");
    for expected in [
        "name=orders, patternType=LITERAL",
        "name=ord, patternType=PREFIXED",
        "name=g1, patternType=PREFIXED",
        "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW",
        "principal=User:bob, host=*, operation=READ, permissionType=ALLOW",
    ] {
        assert!(
            out.stdout.contains(expected),
            "no `{expected}` in\n{}",
            out.stdout
        );
    }

    // alice writes orders but not secret; nothing reaches secret.
    let produce = |user: &str, topic: &str, records: &[u8]| {
        kcat_with(
            &at,
            &plain_user(user),
            &["-P", "-t", topic, "-p", "0", "-X", "acks=all"],
            Some(records),
        )
    };
    let read = |user: &str, topic: &str| {
        kcat_with(
            &at,
            &plain_user(user),
            &["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
            None,
        )
    };
    assert_success(&produce("alice", "orders", b"o1\no2\n"), &broker);
    let out = produce("alice", "secret", b"s1\n");
    assert!(
        out.stderr
            .to_lowercase()
            .contains("topic authorization failed"),
        "{}",
        out.describe()
    );
    let out = read("admin", "secret");
    assert_success(&out, &broker);
    assert_eq!(out.stdout, "", "records reached secret: {}", out.describe());

    // bob reads orders (prefixed ACL) but may not write it, and sees only orders.
    let out = read("bob", "orders");
    assert_success(&out, &broker);
    assert_eq!(out.stdout.lines().collect::<Vec<_>>(), ["o1", "o2"]);
    let out = produce("bob", "orders", b"b1\n");
    assert!(
        out.stderr
            .to_lowercase()
            .contains("topic authorization failed"),
        "{}",
        out.describe()
    );
    let listed = |settings: &[String], bootstrap: &str| {
        let out = kcat_with(bootstrap, settings, &["-L", "-m", "10"], None);
        assert_success(&out, &broker);
        out.stdout
    };
    let bobs = listed(&plain_user("bob"), &at);
    assert!(bobs.contains("topic \"orders\""), "{bobs}");
    assert!(
        !bobs.contains("secret"),
        "Metadata showed bob an unauthorized topic: {bobs}"
    );
    let admins = listed(&plain_user("admin"), &at);
    assert!(admins.contains("topic \"secret\""), "{admins}");

    // An unauthenticated client (User:ANONYMOUS on PLAINTEXT) sees no topic and may
    // neither write mirror states nor create a mirror.
    let anonymous = format!("127.0.0.1:{plain}");
    let theirs = listed(&[], &anonymous);
    assert!(
        !theirs.contains("orders") && !theirs.contains("secret"),
        "{theirs}"
    );
    use dataplane::wire::mirror::*;
    let written = mirror_support::rpc(
        &anonymous,
        MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
            mirror_name: "m".into(),
            topics: vec![MirrorStatesTopic {
                name: "orders".into(),
                partitions: vec![MirrorStateEntry::default()],
            }],
            stopped_topics: Vec::new(),
        }),
    );
    match written {
        MirrorResponse::WriteMirrorStates(r) => {
            assert_eq!(r.topics[0].partitions[0].error_code, 31, "{r:?}")
        }
        other => panic!("{other:?}"),
    }
    let created = mirror_support::create_mirror(&anonymous, "m", &at, &[]);
    assert_eq!(
        created.error_code,
        errors::CLUSTER_MIRROR_AUTHORIZATION_FAILED,
        "{created:?}"
    );

    // The ACLs are metadata: they survive a SIGKILL. Removed, alice's WRITE is gone.
    broker.restart_kill9();
    let out = read("bob", "orders");
    assert_success(&out, &broker);
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.describe());
    let out = tool(
        "kafka-acls",
        &[
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--topic",
            "orders",
        ],
    );
    support::kafka::expect_ok(&out, "kafka-acls --remove");
    let out = produce("alice", "orders", b"o3\n");
    assert!(
        out.stderr
            .to_lowercase()
            .contains("topic authorization failed"),
        "{}",
        out.describe()
    );
    let out = read("admin", "orders");
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.describe());
    assert!(
        broker.log().contains("denied"),
        "no authorizer log line: {}",
        broker.log_tail(20)
    );
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "{}", broker.log_tail(40));
}

/// IncrementalAlterConfigs SET of one config of mirror `name` (resource type 64).
fn set_mirror_config(dest: &str, name: &str, key: &str, value: &str) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let r = mirror_support::connect(dest)
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(64)
                    .with_resource_name(StrBytes::from_string(name.into()))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_string(key.into()))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(value.into())))]),
            ]),
            1,
        )
        .expect("IncrementalAlterConfigs");
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
}

/// SCRAM-SHA-512 credentials for `user` on `broker`, sent as AlterUserScramCredentials
/// (the client salts the password, as kafka-configs does).
fn add_scram_user(broker: &Broker, user: &str, password: &str) {
    use dataplane::net::scram::ScramMechanism;
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
    use kafka_protocol::messages::AlterUserScramCredentialsRequest;
    use kafka_protocol::protocol::StrBytes;
    let salt = b"twinlog-test-salt".to_vec();
    let salted = ScramMechanism::Sha512.salted_password(password.as_bytes(), &salt, 4096);
    let r = mirror_support::connect(&broker.bootstrap())
        .send(
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from_string(user.into()))
                    .with_mechanism(ScramMechanism::Sha512.code())
                    .with_iterations(4096)
                    .with_salt(salt.into())
                    .with_salted_password(salted.into()),
            ]),
            0,
        )
        .expect("AlterUserScramCredentials");
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
}

#[test]
fn a_mirror_from_a_scram_over_tls_source_copies_byte_for_byte_and_fails_on_a_wrong_password() {
    let scratch = tempfile::tempdir().expect("scratch");
    let pki = TestPki::create(&scratch.path().join("pki"), "Twinlog test CA");
    let (source, [_, sasl_ssl, _]) = tls_broker(&pki);
    let dest = Broker::start("\"num.partitions\" = 2\n");
    add_scram_user(&source, "mirror", "mirror-pw");
    mirror_support::create_topic(&source.bootstrap(), "t", 2);
    for p in 0..2 {
        support::produce_batch(&source.bootstrap(), "t", p, 50);
    }
    let jaas = |password: &str| {
        format!(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" password=\"{password}\";"
        )
    };
    let ca = pki.path("ca.pem");
    let secured = format!("127.0.0.1:{sasl_ssl}");
    let right = jaas("mirror-pw");
    let created = mirror_support::create_mirror(
        &dest.bootstrap(),
        "m",
        &secured,
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &ca),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", &right),
        ],
    );
    assert_eq!(created.error_code, 0, "{created:?}");
    let added = mirror_support::add_topics(&dest.bootstrap(), "m", &["t"]);
    assert_eq!(added.error_code, 0, "{added:?}");
    let ends = |n: i64| -> std::collections::BTreeMap<(String, i32), i64> {
        (0..2).map(|p| (("t".to_string(), p), n)).collect()
    };
    mirror_support::wait_for(
        &dest.bootstrap(),
        "m",
        "catch-up over SASL_SSL",
        Duration::from_secs(60),
        |d| mirror_support::caught_up(d, &ends(50)),
    );
    let same = |what: &str| {
        for p in 0..2 {
            let left = mirror_support::read_log(&source.bootstrap(), "t", p);
            let right = mirror_support::read_log(&dest.bootstrap(), "t", p);
            assert!(!left.is_empty(), "{what}");
            mirror_support::assert_same_batches(&left, &right, "t", p);
        }
    };
    same("first copy");

    // A wrong password: the partitions go FAILED with the source's reason.
    set_mirror_config(
        &dest.bootstrap(),
        "m",
        "sasl.jaas.config",
        &jaas("wrong-pw"),
    );
    for p in 0..2 {
        support::produce_batch(&source.bootstrap(), "t", p, 25);
    }
    let failed = mirror_support::wait_for(
        &dest.bootstrap(),
        "m",
        "FAILED on a wrong password",
        Duration::from_secs(60),
        |d| mirror_support::all_in(d, "FAILED"),
    );
    for p in mirror_support::partitions(&failed).values() {
        let message = p.error_message.as_deref().unwrap_or_default();
        assert!(
            message.contains("refused the mirror's security settings")
                && message.contains("Authentication failed"),
            "{p:?}"
        );
        assert_eq!(
            p.destination_offset, 50,
            "nothing is fetched with a wrong password"
        );
    }
    // Fixed, they resume at once (not after the FAILED backoff) and catch up.
    set_mirror_config(&dest.bootstrap(), "m", "sasl.jaas.config", &right);
    mirror_support::wait_for(
        &dest.bootstrap(),
        "m",
        "resumed after the fix",
        Duration::from_secs(30),
        |d| mirror_support::caught_up(d, &ends(75)),
    );
    same("after the fix");

    // The password is a sensitive config: DescribeConfigs does not return it, and no
    // log line shows it.
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let r = mirror_support::connect(&dest.bootstrap())
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(64)
                    .with_resource_name(kafka_protocol::protocol::StrBytes::from_static_str("m")),
            ]),
            4,
        )
        .expect("DescribeConfigs");
    let jaas_entry = r.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "sasl.jaas.config")
        .expect("sasl.jaas.config listed");
    assert!(
        jaas_entry.is_sensitive && jaas_entry.value.is_none(),
        "{jaas_entry:?}"
    );
    for (who, log) in [("destination", dest.log()), ("source", source.log())] {
        assert!(
            !log.contains("mirror-pw") && !log.contains("wrong-pw"),
            "the {who} logged the password"
        );
    }
}

/// Every ACL `bootstrap` lists (DescribeAcls v3, all filters ANY), as
/// `TYPE:name:principal:OPERATION:PERMISSION` with Kafka's code names.
fn listed_acls(bootstrap: &str) -> Vec<String> {
    use kafka_protocol::messages::DescribeAclsRequest;
    let r = mirror_support::connect(bootstrap)
        .send(
            &DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1)
                .with_resource_name_filter(None)
                .with_principal_filter(None)
                .with_host_filter(None),
            3,
        )
        .expect("DescribeAcls");
    assert_eq!(r.error_code, 0, "{r:?}");
    let resource = |t: i8| match t {
        2 => "TOPIC",
        3 => "GROUP",
        4 => "CLUSTER",
        _ => "OTHER",
    };
    let operation = |o: i8| match o {
        2 => "ALL",
        3 => "READ",
        4 => "WRITE",
        8 => "DESCRIBE",
        _ => "OTHER",
    };
    let mut out: Vec<String> = r
        .resources
        .iter()
        .flat_map(|res| {
            res.acls.iter().map(move |a| {
                format!(
                    "{}:{}:{}:{}:{}",
                    resource(res.resource_type),
                    res.resource_name.as_str(),
                    a.principal.as_str(),
                    operation(a.operation),
                    if a.permission_type == 3 {
                        "ALLOW"
                    } else {
                        "DENY"
                    }
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// Polls the destination's ACLs (on its PLAINTEXT address `at`) until `done` holds.
fn until_acls(
    dest: &Broker,
    at: &str,
    what: &str,
    done: &dyn Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let acls = listed_acls(at);
        if done(&acls) {
            return acls;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the destination lists {acls:?}\n{}",
            dest.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_mirror_syncs_the_sources_acls_and_holds_write_until_failover() {
    if skip_if(missing_program("kcat"), "acl_sync_kcat")
        || skip_if(support::kafka::missing_kafka(), "acl_sync_java_tools")
    {
        return;
    }
    // The source's PLAINTEXT clients are super users, so the harness and kafka-acls
    // need no login there; the mirror logs in over SASL_PLAINTEXT as admin.
    let (source, source_plain) = acl_broker("User:admin;User:ANONYMOUS", "");
    let source_at = format!("127.0.0.1:{source_plain}");
    // The destination enforces ACLs, and lets the harness's anonymous client drive the
    // mirror RPCs: no ACL guards its cluster or the mirror resource.
    let (mut dest, dest_plain) =
        acl_broker("User:admin", "\"allow.everyone.if.no.acl.found\" = true\n");
    let dest_at = format!("127.0.0.1:{dest_plain}");
    let kafka_acls = |bootstrap: &str, extra: &[&str]| {
        let mut args = vec!["--bootstrap-server", bootstrap];
        args.extend_from_slice(extra);
        let out = support::kafka::run_tool("kafka-acls", &args, None, Duration::from_secs(60));
        support::kafka::expect_ok(&out, &format!("kafka-acls {extra:?}"));
        out.stdout
    };
    for topic in ["orders", "private"] {
        mirror_support::create_topic(&source_at, topic, 1);
    }
    support::produce_batch(&source_at, "orders", 0, 10);
    let _ = kafka_acls(
        &source_at,
        &[
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--topic",
            "orders",
            "--topic",
            "private",
        ],
    );
    let _ = kafka_acls(
        &source_at,
        &[
            "--add",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            "orders",
            "--group",
            "g1",
        ],
    );

    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-pw\";";
    let created = mirror_support::create_mirror(
        &dest_at,
        "m",
        &source.bootstrap(),
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.jaas.config", jaas),
            ("mirror.metadata.refresh.interval.ms", "500"),
        ],
    );
    assert_eq!(created.error_code, 0, "{created:?}");
    let added = mirror_support::add_topics(&dest_at, "m", &["orders"]);
    assert_eq!(added.error_code, 0, "{added:?}");
    let ends: std::collections::BTreeMap<(String, i32), i64> =
        [(("orders".to_string(), 0), 10)].into();
    mirror_support::wait_for(&dest_at, "m", "catch-up", Duration::from_secs(60), |d| {
        mirror_support::caught_up(d, &ends)
    });
    let bob_reads = "TOPIC:orders:User:bob:READ:ALLOW".to_string();
    let bob_group = "GROUP:g1:User:bob:READ:ALLOW".to_string();
    let alice_writes = "TOPIC:orders:User:alice:WRITE:ALLOW".to_string();
    // bob's READ and group are synced; alice's WRITE on the read-only copy is held (not
    // listed); the ACL of the unmirrored topic stays on the source.
    let synced = until_acls(&dest, &dest_at, "bob's ACLs synced", &|a| {
        a.contains(&bob_reads) && a.contains(&bob_group)
    });
    assert_eq!(synced, [bob_group.clone(), bob_reads.clone()], "{synced:?}");
    let listed = kafka_acls(&dest_at, &["--list"]);
    assert!(
        listed.contains("name=orders, patternType=LITERAL")
            && listed.contains("principal=User:bob, host=*, operation=READ, permissionType=ALLOW")
            && !listed.contains("User:alice"),
        "{listed}"
    );
    // The synced ACL decides on the destination: bob reads the copy, alice may not.
    let read = |dest: &Broker, user: &str| {
        kcat_with(
            &dest.bootstrap(),
            &plain_user(user),
            &[
                "-C",
                "-t",
                "orders",
                "-p",
                "0",
                "-o",
                "beginning",
                "-e",
                "-q",
                "-f",
                "%o\n",
            ],
            None,
        )
    };
    let out = read(&dest, "bob");
    assert_success(&out, &dest);
    assert_eq!(out.stdout.lines().count(), 10, "{}", out.describe());
    let out = read(&dest, "alice");
    assert!(
        out.stderr.to_lowercase().contains("authorization failed"),
        "{}",
        out.describe()
    );

    // Removed on the source, bob's READ goes from the destination; his group stays.
    let _ = kafka_acls(
        &source_at,
        &[
            "--remove",
            "--force",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            "orders",
        ],
    );
    let after = until_acls(&dest, &dest_at, "bob's READ removed", &|a| {
        !a.contains(&bob_reads)
    });
    assert_eq!(after, std::slice::from_ref(&bob_group), "{after:?}");
    // The held ACL is a metadata record: it stays held across a SIGKILL.
    dest.restart_kill9();
    let restarted = until_acls(&dest, &dest_at, "ACLs after restart", &|a| !a.is_empty());
    assert_eq!(restarted, std::slice::from_ref(&bob_group), "{restarted:?}");

    // Failover releases alice's held WRITE with the topic: she produces at once, and
    // bob (no WRITE) may not.
    let removed = mirror_support::remove_topics(&dest_at, "m", &["orders"]);
    assert_eq!(removed.error_code, 0, "{removed:?}");
    let released = until_acls(&dest, &dest_at, "alice's WRITE released", &|a| {
        a.contains(&alice_writes)
    });
    assert_eq!(released, [bob_group, alice_writes], "{released:?}");
    let produce = |dest: &Broker, user: &str, records: &[u8]| {
        kcat_with(
            &dest.bootstrap(),
            &plain_user(user),
            &["-P", "-t", "orders", "-p", "0", "-X", "acks=all"],
            Some(records),
        )
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = produce(&dest, "alice", b"a1\n");
        if out.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "alice never wrote after failover: {}",
            out.describe()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = produce(&dest, "bob", b"b1\n");
    assert!(
        out.stderr
            .to_lowercase()
            .contains("topic authorization failed"),
        "{}",
        out.describe()
    );
    let out = read(&dest, "bob");
    assert!(
        out.stderr.to_lowercase().contains("authorization failed"),
        "bob's READ came back: {}",
        out.describe()
    );
    for broker in [&source, &dest] {
        let (_, _, panicked) = broker.log_problems();
        assert!(!panicked, "{}", broker.log_tail(40));
    }
}

/// One connection's bytes to a listener: it is sent, the write side is shut, and what
/// the broker answers is read until it closes. Whether the broker closed within 10 s,
/// and how many bytes it answered.
fn send_and_drain<S: std::io::Read + std::io::Write>(
    stream: &mut S,
    bytes: &[u8],
    shutdown: impl FnOnce(&mut S),
) -> (bool, usize) {
    let _ = stream.write_all(bytes);
    let _ = stream.flush();
    shutdown(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    let mut answered = 0;
    while std::time::Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return (true, answered),
            Ok(n) => answered += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (true, answered),
        }
    }
    (false, answered)
}

fn tcp_to(port: u16) -> std::net::TcpStream {
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("read timeout");
    tcp
}

/// The first flight of a real TLS client: its ClientHello.
fn client_hello(config: &std::sync::Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut conn = rustls::ClientConnection::new(config.clone(), name).expect("client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    hello
}

#[test]
fn fuzzed_tls_and_sasl_handshakes_never_crash_the_broker() {
    use std::io::Write;
    use support::request_frame_v1;
    if skip_if(missing_program("kcat"), "tls_fuzz_kcat") {
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let pki = TestPki::create(&scratch.path().join("pki"), "Twinlog test CA");
    let (broker, [ssl, sasl_ssl, mtls]) = tls_broker(&pki);
    let ca = dataplane::net::tls::Pem::File(pki.path("ca.pem").into());
    let config = dataplane::net::tls::client_config(Some(&ca), &[], true).expect("client TLS");
    let hello = client_hello(&config);
    let seed = std::env::var("TWINLOG_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_7151_u64);
    eprintln!("[harness] seed {seed:#x} (TWINLOG_FUZZ_SEED)");
    let mut rng = support::Rng::new(seed);
    let mut hung = Vec::new();
    let tcp_shutdown = |s: &mut std::net::TcpStream| {
        let _ = s.shutdown(std::net::Shutdown::Write);
    };

    // Before TLS: random bytes, a handshake record header over random bytes, and the
    // real ClientHello mangled or cut short, on every TLS listener.
    for port in [ssl, sasl_ssl, mtls] {
        for round in 0..90 {
            let bytes = match round % 3 {
                0 => {
                    let n = rng.below(2048) as usize;
                    rng.bytes(n)
                }
                1 => {
                    let n = rng.below(4096) as usize;
                    let mut b = vec![0x16, 0x03, rng.below(5) as u8];
                    b.extend_from_slice(&(rng.below(1 << 16) as u16).to_be_bytes());
                    b.extend_from_slice(&rng.bytes(n));
                    b
                }
                _ => {
                    let mut b = hello.clone();
                    for _ in 0..1 + rng.below(8) {
                        let i = rng.below(b.len() as u64) as usize;
                        b[i] ^= 1 << rng.below(8);
                    }
                    b.truncate(1 + rng.below(b.len() as u64) as usize);
                    b
                }
            };
            if !send_and_drain(&mut tcp_to(port), &bytes, tcp_shutdown).0 {
                hung.push(format!("port {port} round {round}: {} bytes", bytes.len()));
            }
        }
    }

    // In TLS on SASL_SSL: SaslHandshake with real and random mechanisms, then
    // SaslAuthenticate with random tokens, frames with random lengths, and requests
    // before the login.
    let mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", ""];
    for round in 0..40 {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let conn = rustls::ClientConnection::new(config.clone(), name).expect("client");
        let mut tls = rustls::StreamOwned::new(conn, tcp_to(sasl_ssl));
        let mut bytes = Vec::new();
        let mechanism = if round % 4 == 3 {
            let n = rng.below(40) as usize;
            String::from_utf8_lossy(&rng.bytes(n)).into_owned()
        } else {
            mechanisms[rng.below(mechanisms.len() as u64) as usize].to_string()
        };
        let mut body = (mechanism.len() as i16).to_be_bytes().to_vec();
        body.extend_from_slice(mechanism.as_bytes());
        bytes.extend(request_frame_v1(17, 1, 1, &body));
        for i in 0..1 + rng.below(3) {
            let token = match rng.below(3) {
                0 => format!("\0alice\0{}", rng.below(1000)).into_bytes(),
                1 => format!("n,,n=alice,r={}", rng.next_u64()).into_bytes(),
                _ => {
                    let n = rng.below(600) as usize;
                    rng.bytes(n)
                }
            };
            let mut body = (token.len() as i32).to_be_bytes().to_vec();
            body.extend_from_slice(&token);
            bytes.extend(request_frame_v1(36, 1, 2 + i as i32, &body));
        }
        match round % 5 {
            0 => {
                // A frame whose length is random (negative, huge, or short).
                bytes.extend_from_slice(&(rng.next_u64() as i32).to_be_bytes());
                let n = rng.below(256) as usize;
                bytes.extend(rng.bytes(n));
            }
            1 => bytes.extend(request_frame_v1(3, 1, 9, &[0xff, 0xff, 0xff, 0xff])),
            _ => {}
        }
        let (closed, answered) = send_and_drain(&mut tls, &bytes, |s| {
            s.conn.send_close_notify();
            let _ = s.conn.complete_io(&mut s.sock);
            let _ = s.sock.shutdown(std::net::Shutdown::Write);
        });
        if !closed {
            hung.push(format!("SASL_SSL round {round}"));
        }
        // The handshake completed and the SaslHandshake was answered (its response
        // frame is at least 10 bytes), whatever came after it.
        assert!(
            answered >= 10,
            "SASL_SSL round {round} ({mechanism:?}): {answered} bytes answered"
        );
    }
    // mTLS without a client certificate is refused in the handshake.
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(config.clone(), name).expect("client");
    let mut tls = rustls::StreamOwned::new(conn, tcp_to(mtls));
    let wrote = tls
        .write_all(&request_frame_v1(18, 0, 1, &[]))
        .and_then(|_| tls.flush())
        .and_then(|_| {
            let mut b = [0u8; 4];
            std::io::Read::read_exact(&mut tls, &mut b)
        });
    assert!(
        wrote.is_err(),
        "MTLS answered a client without a certificate"
    );

    assert!(
        hung.is_empty(),
        "the broker kept these connections open: {hung:?}"
    );
    // The broker still serves a real client on each TLS listener, and never panicked.
    let ssl_settings = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ];
    let out = kcat_with(&format!("127.0.0.1:{ssl}"), &ssl_settings, &["-L"], None);
    assert_success(&out, &broker);
    let mut sasl_settings = ssl_settings.clone();
    sasl_settings[0] = "security.protocol=SASL_SSL".into();
    sasl_settings.extend([
        "sasl.mechanisms=PLAIN".into(),
        "sasl.username=alice".into(),
        format!("sasl.password={PASSWORD}"),
    ]);
    let out = kcat_with(
        &format!("127.0.0.1:{sasl_ssl}"),
        &sasl_settings,
        &["-L"],
        None,
    );
    assert_success(&out, &broker);
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "{}", broker.log_tail(60));
}

/// Three nodes whose quorum links are TLS (`CONTROLLER:SSL`, client certificates
/// required), whose inter-broker listener is SASL_SSL (PLAIN, and client certificates
/// required) and whose authorizer lets only `User:admin` (the brokers' own login) and
/// the PLAINTEXT clients do anything: the cluster forms, followers replicate over TLS
/// as admin (the ISR fills, the replicas' bytes agree), and transactions whose markers
/// cross brokers commit.
#[test]
fn a_cluster_over_a_tls_quorum_replicates_and_commits_transactions_on_a_sasl_ssl_inter_broker_listener(
) {
    use support::cluster::{
        assert_replicas_identical, bootstrap_all, create_topic, start_nodes_with, wait_brokers,
        wait_isr,
    };
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "a cluster over a secured inter-broker listener",
    ) {
        return;
    }
    let net = support::netns::Net::new(3);
    let pki_dir = tempfile::tempdir().expect("pki dir");
    let hosts: Vec<String> = (0..3).map(|i| net.ip(i).to_string()).collect();
    let pki = TestPki::create_for(pki_dir.path(), "Twinlog Cluster CA", &hosts);
    let (keystore, truststore) = (pki.path("broker.pem"), pki.path("ca.pem"));
    let all = [0, 1, 2];
    let nodes = start_nodes_with(
        &net,
        &all,
        &all,
        "broker,controller",
        Broker::TEST_CLUSTER_ID,
        |i| {
            let (ip, internal, client) = (net.ip(i), net.port(i, 9092), net.port(i, 9094));
            let config = format!(
                r#""listeners" = "INTERNAL://{ip}:{internal},CLIENT://{ip}:{client}"
"listener.security.protocol.map" = "INTERNAL:SASL_SSL,CLIENT:PLAINTEXT,CONTROLLER:SSL"
"listener.name.controller.ssl.client.auth" = "required"
"inter.broker.listener.name" = "INTERNAL"
"sasl.enabled.mechanisms" = "PLAIN"
"sasl.mechanism.inter.broker.protocol" = "PLAIN"
"listener.name.internal.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" user_admin="admin-pw";'
"listener.name.internal.ssl.client.auth" = "required"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "{keystore}"
"ssl.truststore.type" = "PEM"
"ssl.truststore.location" = "{truststore}"
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:admin;User:ANONYMOUS"
"group.initial.rebalance.delay.ms" = 0
"transaction.abort.timed.out.transaction.cleanup.interval.ms" = 500
"min.insync.replicas" = 2
"#
            );
            (config, Some(client))
        },
    );
    let nodes: Vec<Option<Broker>> = nodes.into_iter().map(Some).collect();
    wait_brokers(&nodes, 3);
    let first = nodes[0].as_ref().expect("node 0");
    create_topic(&nodes, "secured", 3, &[]);
    // Every follower fetches from its leader over SASL_SSL, or the ISR never fills.
    wait_isr(first, "secured", 3, 3);
    // Keyed, so that every partition gets records.
    let records: Vec<u8> = (0..300)
        .flat_map(|i| format!("k{i}:r{i}\n").into_bytes())
        .collect();
    let out = kcat_with(
        &bootstrap_all(&nodes),
        &["acks=all".into()],
        &["-P", "-t", "secured", "-K:"],
        Some(&records),
    );
    assert_success(&out, first);
    wait_isr(first, "secured", 3, 3);
    assert_replicas_identical(&nodes, "secured", 3);
    // Transactions: the coordinators and the partitions' leaders are on different
    // brokers, so markers (WriteTxnMarkers) and offset commits cross the secured
    // listener.
    create_topic(&nodes, "secured-txn", 3, &[]);
    wait_isr(first, "secured-txn", 3, 3);
    let out = run_python(
        &py,
        "ck_txn.py",
        &[
            "run",
            "--bootstrap",
            &bootstrap_all(&nodes),
            "--topic",
            "secured-txn",
            "--group",
            "g-secured",
            "--partitions",
            "3",
            "--timeout",
            "30",
        ],
        Duration::from_secs(120),
    );
    assert_success(&out, first);
    for n in nodes.iter().flatten() {
        let (_, _, panicked) = n.log_problems();
        assert!(!panicked, "{}", n.log_tail(40));
        let log = n.log();
        assert!(
            log.contains("the metadata quorum's links are TLS"),
            "{}",
            n.log_tail(20)
        );
        assert!(
            !log.contains("authentication failed") && !log.contains("SASL_AUTHENTICATION_FAILED"),
            "a broker's own login was refused:\n{}",
            n.log_tail(40)
        );
    }
}

/// A test identity provider: an ES256 key, its JWK, and the JWTs it signs.
struct TestIdp {
    pair: ring::signature::EcdsaKeyPair,
    kid: String,
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

impl TestIdp {
    fn new(kid: &str) -> TestIdp {
        use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("key pair");
        TestIdp {
            pair,
            kid: kid.to_owned(),
        }
    }

    fn jwk(&self) -> String {
        use ring::signature::KeyPair;
        let point = self.pair.public_key().as_ref();
        format!(
            r#"{{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"{}","x":"{}","y":"{}"}}"#,
            self.kid,
            b64url(&point[1..33]),
            b64url(&point[33..65])
        )
    }

    /// A token for `sub` with audience `aud`, expiring `ttl` seconds from now
    /// (negative: in the past).
    fn token(&self, sub: &str, aud: &str, ttl: i64) -> String {
        let now = unix_now();
        let header = format!(r#"{{"alg":"ES256","typ":"JWT","kid":"{}"}}"#, self.kid);
        let claims = format!(
            r#"{{"sub":"{sub}","aud":"{aud}","iss":"https://idp.test","iat":{now},"exp":{}}}"#,
            now as i64 + ttl
        );
        let signing_input = format!(
            "{}.{}",
            b64url(header.as_bytes()),
            b64url(claims.as_bytes())
        );
        let signature = self
            .pair
            .sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes())
            .expect("sign");
        format!("{signing_input}.{}", b64url(signature.as_ref()))
    }
}

fn write_jwks(path: &std::path::Path, idps: &[&TestIdp]) {
    let keys: Vec<String> = idps.iter().map(|i| i.jwk()).collect();
    std::fs::write(path, format!(r#"{{"keys":[{}]}}"#, keys.join(","))).expect("jwks");
}

/// OAUTHBEARER's first message for `token`, then (on the invalid-token challenge) the
/// %x01: the final error code, the challenge (empty when accepted) and the lifetime.
fn oauth_login(port: u16, token: &str) -> (i16, String, i64) {
    let mut stream = tcp_to(port);
    sasl_handshake(&mut stream, "OAUTHBEARER");
    let first = format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}");
    let (error, challenge, lifetime) = sasl_authenticate(&mut stream, first.as_bytes());
    let challenge = String::from_utf8_lossy(&challenge).into_owned();
    if error != 0 || challenge.is_empty() {
        return (error, challenge, lifetime);
    }
    let (error, _, _) = sasl_authenticate(&mut stream, &[1]);
    (error, challenge, lifetime)
}

/// A broker with two OAUTHBEARER listeners — OAUTH checks tokens against a JWKS file
/// (audience `kafka`), UNSECURED takes unsigned test tokens (named opt-in) — and the
/// harness's PLAINTEXT one; the authorizer lets alice, bob and the PLAINTEXT clients do
/// anything and everyone else nothing. Tokens of the JWKS's key authenticate
/// confluent-kafka (oauth_cb), Kafka's Java tools (a token file) and a mirror; an
/// expired, foreign-audience or unknown-key token gets the invalid-token challenge and
/// SASL_AUTHENTICATION_FAILED; the principal is the token's `sub`; the session ends with
/// the token; a rotated JWKS is picked up without a restart.
#[test]
fn oauthbearer_tokens_checked_against_a_jwks_serve_clients_java_tools_kcat_and_a_mirror() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"])
            .or_else(|| missing_program("kcat"))
            .or_else(support::kafka::missing_kafka),
        "OAUTHBEARER",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    let idp = TestIdp::new("k1");
    write_jwks(&jwks, &[&idp]);
    let token_file = |name: &str, token: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, token).expect("token file");
        path.display().to_string()
    };
    let alice = token_file("alice.jwt", &idp.token("alice", "kafka", 3600));
    let mallory = token_file("mallory.jwt", &idp.token("mallory", "kafka", 3600));
    let (oauth_port, unsecured_port) = (support::free_port(), support::free_port());
    let broker = Broker::start(&format!(
        r#""listeners" = "PLAINTEXT://127.0.0.1:0,OAUTH://127.0.0.1:{oauth_port},UNSECURED://127.0.0.1:{unsecured_port}"
"listener.security.protocol.map" = "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT,UNSECURED:SASL_PLAINTEXT"
"inter.broker.listener.name" = "PLAINTEXT"
"listener.name.oauth.sasl.enabled.mechanisms" = "OAUTHBEARER"
"listener.name.oauth.oauthbearer.sasl.jaas.config" = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
"listener.name.oauth.oauthbearer.sasl.server.callback.handler.class" = "{}"
"listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url" = "file://{}"
"listener.name.oauth.sasl.oauthbearer.expected.audience" = "kafka"
"listener.name.oauth.sasl.oauthbearer.expected.issuer" = "https://idp.test"
"listener.name.unsecured.sasl.enabled.mechanisms" = "OAUTHBEARER"
"listener.name.unsecured.oauthbearer.sasl.server.callback.handler.class" = "{}"
"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:alice;User:bob;User:ANONYMOUS"
"offsets.topic.num.partitions" = 2
"group.initial.rebalance.delay.ms" = 0
"#,
        dataplane::net::oauth::JWKS_VALIDATOR_CLASS,
        jwks.display(),
        dataplane::net::oauth::UNSECURED_VALIDATOR_CLASS,
    ));
    let at = |port: u16| format!("127.0.0.1:{port}");
    mirror_support::create_topic(&broker.bootstrap(), "oauth", 2);

    // confluent-kafka as alice, and as mallory (authenticated, not authorized).
    let client = |mode: &str, token: &str| {
        run_python(
            &py,
            "sasl_clients.py",
            &[
                mode,
                "--bootstrap",
                &at(oauth_port),
                "--topic",
                "oauth",
                "--token-file",
                token,
                "--count",
                "100",
            ],
            Duration::from_secs(90),
        )
    };
    assert_success(&client("oauth", &alice), &broker);
    assert_success(&client("oauth-denied", &mallory), &broker);

    // Refused tokens, raw: the challenge, then SASL_AUTHENTICATION_FAILED.
    let refused = |token: &str, what: &str| {
        let (error, challenge, _) = oauth_login(oauth_port, token);
        assert_eq!(error, 58, "{what}: SASL_AUTHENTICATION_FAILED");
        assert_eq!(challenge, r#"{"status":"invalid_token"}"#, "{what}");
    };
    refused(&idp.token("alice", "kafka", -120), "expired");
    refused(&idp.token("alice", "elsewhere", 600), "another audience");
    refused(
        &TestIdp::new("k9").token("alice", "kafka", 600),
        "unknown key",
    );
    refused(
        &TestIdp::new("k1").token("alice", "kafka", 600),
        "forged under k1",
    );
    refused("e30.e30.", "unsigned on the JWKS listener");
    // The session ends with the token.
    let (error, challenge, lifetime) = oauth_login(oauth_port, &idp.token("alice", "kafka", 120));
    assert_eq!((error, challenge.as_str()), (0, ""));
    assert!(
        (100_000..=120_000).contains(&lifetime),
        "the session lifetime follows the token's exp: {lifetime} ms"
    );

    // Kafka's Java tools: OAuthBearerLoginCallbackHandler with a token file.
    let props = dir.path().join("oauth.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\nsasl.oauthbearer.token.endpoint.url=file://{alice}\nsasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n"
        ),
    )
    .expect("properties");
    let out = support::kafka::run_tool_with_jvm(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &at(oauth_port),
            "--command-config",
            &props.display().to_string(),
            "--list",
        ],
        &format!("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{alice}"),
        None,
        Duration::from_secs(90),
    );
    support::kafka::expect_ok(&out, "kafka-topics --list over OAUTHBEARER");
    assert!(
        out.stdout.lines().any(|l| l.trim() == "oauth"),
        "{}",
        out.stdout
    );

    // kcat's unsigned tokens: taken by the opted-in listener, refused by the JWKS one.
    let unsecured = [
        "security.protocol=SASL_PLAINTEXT".to_owned(),
        "sasl.mechanisms=OAUTHBEARER".to_owned(),
        "enable.sasl.oauthbearer.unsecure.jwt=true".to_owned(),
        "sasl.oauthbearer.config=principal=bob".to_owned(),
    ];
    let out = kcat_with(
        &at(unsecured_port),
        &unsecured,
        &["-L", "-t", "oauth"],
        None,
    );
    assert_success(&out, &broker);
    let out = kcat_with(
        &at(oauth_port),
        &unsecured,
        &["-L", "-t", "oauth", "-m", "5"],
        None,
    );
    assert!(
        !out.status.is_some_and(|s| s.success()),
        "kcat's unsigned token passed the JWKS listener: {}",
        out.stdout
    );

    // The provider rotates its key: k2 in, k1 out, without a restart.
    let idp2 = TestIdp::new("k2");
    write_jwks(&jwks, &[&idp2]);
    let rotated = idp2.token("alice", "kafka", 3600);
    let started = std::time::Instant::now();
    while oauth_login(oauth_port, &rotated).0 != 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the rotated JWKS was not picked up\n{}",
            broker.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    refused(&idp.token("alice", "kafka", 600), "k1 after the rotation");

    // A mirror whose source wants OAUTHBEARER: its token from a file.
    let mirror_token = token_file("mirror.jwt", &rotated);
    let dest = Broker::start("\"num.partitions\" = 2\n");
    mirror_support::create_topic(&broker.bootstrap(), "mirrored", 2);
    for p in 0..2 {
        support::produce_batch(&broker.bootstrap(), "mirrored", p, 50);
    }
    let token_url = format!("file://{mirror_token}");
    let created = mirror_support::create_mirror(
        &dest.bootstrap(),
        "m",
        &at(oauth_port),
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "OAUTHBEARER"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            ),
            ("sasl.oauthbearer.token.endpoint.url", &token_url),
        ],
    );
    assert_eq!(created.error_code, 0, "{created:?}");
    let added = mirror_support::add_topics(&dest.bootstrap(), "m", &["mirrored"]);
    assert_eq!(added.error_code, 0, "{added:?}");
    let ends: std::collections::BTreeMap<(String, i32), i64> =
        (0..2).map(|p| (("mirrored".to_string(), p), 50)).collect();
    mirror_support::wait_for(
        &dest.bootstrap(),
        "m",
        "catch-up over OAUTHBEARER",
        Duration::from_secs(60),
        |d| mirror_support::caught_up(d, &ends),
    );
    for p in 0..2 {
        let left = mirror_support::read_log(&broker.bootstrap(), "mirrored", p);
        let right = mirror_support::read_log(&dest.bootstrap(), "mirrored", p);
        mirror_support::assert_same_batches(&left, &right, "mirrored", p);
    }
    for b in [&broker, &dest] {
        let (_, _, panicked) = b.log_problems();
        assert!(!panicked, "{}", b.log_tail(40));
    }
}
