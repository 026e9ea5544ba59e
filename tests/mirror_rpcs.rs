//! Mirror RPCs over the wire that the CLI tests do not reach: ReadMirrorStates and
//! WriteMirrorStates (with fencing), ListMirrors, DescribeMirrors of an unknown mirror,
//! LME look-ups, and DeleteRecords on a read-only mirror topic.

mod mirror_support;
mod support;

use std::time::Duration;

use dataplane::wire::mirror::*;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::DeleteRecordsRequest;
use mirror_support::*;
use support::*;

const CONFIG: &str = "\"mirror.state.topic.num.partitions\" = 3\n\"num.partitions\" = 2\n";

/// Creates `topic` on `broker` with the CLI.
fn create_topic(broker: &Broker, topic: &str, partitions: u32) {
    let created = run_command(
        std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .args([
                "topic",
                "create",
                topic,
                "--partitions",
                &partitions.to_string(),
            ])
            .args(["--bootstrap-server", &broker.bootstrap()]),
        None,
        Duration::from_secs(30),
    );
    assert!(created.success(), "{}", created.describe());
}

/// `b` mirrors `topic` of `a` as mirror `name`, every partition MIRRORING.
fn mirror_topic(a: &Broker, b: &Broker, name: &str, topic: &str) {
    assert_eq!(
        create_mirror(&b.bootstrap(), name, &a.bootstrap(), &[]).error_code,
        0
    );
    assert_eq!(add_topics(&b.bootstrap(), name, &[topic]).error_code, 0);
    wait_for(
        &b.bootstrap(),
        name,
        "MIRRORING",
        Duration::from_secs(30),
        |d| all_in(d, "MIRRORING"),
    );
}

fn topic_name(s: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_string(s.into()))
}

#[test]
fn state_rpcs_fencing_list_describe_and_read_only_delete_records() {
    let a = Broker::start(CONFIG);
    let b = Broker::start(CONFIG);
    // A topic on A with data (auto-created with 2 partitions by Metadata? create it).
    create_topic(&a, "t", 2);
    mirror_topic(&a, &b, "m", "t");

    // ReadMirrorStates answers the coordinator's view.
    let read = |bootstrap: &str| match rpc(
        bootstrap,
        MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
            mirror_name: "m".into(),
            topics: vec![("t", vec![0, 1]).into(), ("nope", vec![0]).into()],
        }),
    ) {
        MirrorResponse::ReadMirrorStates(r) => r,
        other => panic!("{other:?}"),
    };
    let r = read(&b.bootstrap());
    let t = r.topics.iter().find(|t| t.name == "t").expect("t");
    assert!(t
        .partitions
        .iter()
        .all(|p| p.state == MirrorPartitionState::Mirroring.code() && p.state_epoch > 0));
    let nope = r.topics.iter().find(|t| t.name == "nope").expect("nope");
    assert_eq!(nope.partitions[0].error_code, 3, "unknown topic: {nope:?}");

    // WriteMirrorStates with a stale state epoch is fenced; nothing changes.
    let stale = t.partitions[0].clone();
    let write = |entry: MirrorStateEntry| match rpc(
        &b.bootstrap(),
        MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
            mirror_name: "m".into(),
            topics: vec![MirrorStatesTopic {
                name: "t".into(),
                partitions: vec![entry],
            }],
            stopped_topics: Vec::new(),
        }),
    ) {
        MirrorResponse::WriteMirrorStates(r) => r.topics[0].partitions[0].clone(),
        other => panic!("{other:?}"),
    };
    let fenced = write(MirrorStateEntry {
        state_epoch: stale.state_epoch - 1,
        ..stale.clone()
    });
    assert_eq!(
        fenced.error_code,
        errors::INVALID_CLUSTER_MIRROR_STATES,
        "{fenced:?}"
    );
    let fenced = write(MirrorStateEntry {
        leader_epoch: stale.leader_epoch - 1,
        ..stale.clone()
    });
    assert_ne!(
        fenced.error_code, 0,
        "an older leader epoch is fenced: {fenced:?}"
    );
    assert_eq!(read(&b.bootstrap()).topics[0].partitions[0], stale);

    // ListMirrors and DescribeMirrors of an unknown mirror.
    match rpc(
        &b.bootstrap(),
        MirrorRequest::ListMirrors(ListMirrorsRequest {
            include_topic_names: true,
        }),
    ) {
        MirrorResponse::ListMirrors(r) => {
            assert_eq!(r.mirrors.len(), 1);
            assert_eq!(r.mirrors[0].mirror_name, "m");
            assert_eq!(r.mirrors[0].source_bootstrap, a.bootstrap());
            assert_eq!(r.mirrors[0].topic_names, vec!["t".to_string()]);
            assert_eq!(r.mirrors[0].topic_count, 1);
            assert!(!r.mirrors[0].source_cluster_id.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let d = describe(&b.bootstrap(), "nope");
    assert_eq!(d.error_code, errors::UNKNOWN_CLUSTER_MIRROR);

    // DeleteRecords on a mirror partition: READ_ONLY_TOPIC.
    let mut conn = connect(&b.bootstrap());
    let r = conn
        .send(
            &DeleteRecordsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(0)])]),
            2,
        )
        .expect("delete records");
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        errors::READ_ONLY_TOPIC
    );

    // LME look-up as a source: after a failover B answers the LME it recorded for A.
    let r = remove_topics(&b.bootstrap(), "m", &["t"]);
    assert_eq!(r.error_code, 0);
    wait_for(
        &b.bootstrap(),
        "m",
        "STOPPED",
        Duration::from_secs(30),
        |d| all_in(d, "STOPPED"),
    );
    let (id, _) = topic_id(&b.bootstrap(), "t");
    let mut meta = connect(&a.bootstrap());
    let cluster = meta
        .send(&kafka_protocol::messages::MetadataRequest::default(), 12)
        .expect("metadata")
        .cluster_id
        .expect("cluster id")
        .to_string();
    let lookup = |asker: &str| match rpc(
        &b.bootstrap(),
        MirrorRequest::DescribeMirrors(DescribeMirrorsRequest {
            mirror_names: Some(Vec::new()),
            cluster_id: Some(asker.to_string()),
            lme_lookups: vec![LmeLookup {
                topic_id: id,
                partitions: vec![0, 1],
            }],
            ..Default::default()
        }),
    ) {
        MirrorResponse::DescribeMirrors(r) => r.lookup_results,
        other => panic!("{other:?}"),
    };
    // Empty partitions have no epoch to record: -1; the answer lists both partitions.
    let from_a = lookup(&cluster);
    assert_eq!(from_a.len(), 1);
    assert_eq!(from_a[0].partitions.len(), 2);
    let other = lookup("someone-else");
    assert!(other[0]
        .partitions
        .iter()
        .all(|p| p.last_mirrored_epoch == -1));
}

/// Changing a mirror's connection settings (IncrementalAlterConfigs on resource type 64)
/// restarts its fetchers with the new settings; mirroring goes on.
#[test]
fn changing_mirror_connection_configs_restarts_the_fetchers() {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    let a = Broker::start(CONFIG);
    let b = Broker::start(CONFIG);
    create_topic(&a, "t", 2);
    mirror_topic(&a, &b, "m", "t");
    let started = |log: &str| log.matches("mirror fetcher started").count();
    let before = started(&b.log());
    assert!(before >= 1, "{}", b.log_tail(20));
    let mut conn = connect(&b.bootstrap());
    let r = conn
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(64)
                    .with_resource_name(kafka_protocol::protocol::StrBytes::from_static_str("m"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(kafka_protocol::protocol::StrBytes::from_static_str(
                            "fetch.max.bytes",
                        ))
                        .with_config_operation(0)
                        .with_value(Some(
                            kafka_protocol::protocol::StrBytes::from_static_str("65536"),
                        ))]),
            ]),
            1,
        )
        .expect("alter");
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    let start = std::time::Instant::now();
    while started(&b.log()) <= before {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "fetchers not restarted:\n{}",
            b.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let d = describe(&b.bootstrap(), "m");
    assert!(all_in(&d, "MIRRORING"), "{d:#?}");
}

/// A->B mirrors `t`; adding `t` to a B->A mirror on A would make a loop (and PREPARING
/// would cut A's own log): refused with a clear error. Once B has stopped its copy
/// (failover), the same add is the failback and is accepted.
#[test]
fn mirroring_a_topic_back_while_it_is_mirrored_is_refused_as_a_loop() {
    let a = Broker::start(CONFIG);
    let b = Broker::start(CONFIG);
    create_topic(&a, "t", 2);
    mirror_topic(&a, &b, "ab", "t");
    assert_eq!(
        create_mirror(&a.bootstrap(), "ba", &b.bootstrap(), &[]).error_code,
        0
    );
    let r = add_topics(&a.bootstrap(), "ba", &["t"]);
    assert_eq!(
        r.topics[0].error_code,
        errors::TOPIC_ALREADY_IN_CLUSTER_MIRROR,
        "{r:?}"
    );
    let message = r.topics[0].error_message.clone().unwrap_or_default();
    assert!(message.contains("loop"), "{message}");
    // Nothing changed on A: the topic is in no mirror.
    let d = describe(&a.bootstrap(), "ba");
    assert!(d.topics.is_empty(), "{d:#?}");
    // Failover on B, then the failback add is accepted.
    assert_eq!(remove_topics(&b.bootstrap(), "ab", &["t"]).error_code, 0);
    wait_for(
        &b.bootstrap(),
        "ab",
        "STOPPED",
        Duration::from_secs(30),
        |d| all_in(d, "STOPPED"),
    );
    let r = add_topics(&a.bootstrap(), "ba", &["t"]);
    assert_eq!(r.error_code, 0, "{r:?}");
    wait_for(
        &a.bootstrap(),
        "ba",
        "MIRRORING",
        Duration::from_secs(30),
        |d| all_in(d, "MIRRORING"),
    );
}

/// AddTopicsToMirror with a pattern that does not compile fails, an exclude pattern as
/// much as an include one (dropping a bad exclude would mirror more than asked).
#[test]
fn invalid_include_and_exclude_patterns_are_errors() {
    let a = Broker::start(CONFIG);
    let b = Broker::start(CONFIG);
    create_topic(&a, "pay-1", 1);
    assert_eq!(
        create_mirror(&b.bootstrap(), "pat", &a.bootstrap(), &[]).error_code,
        0
    );
    let add = |include: &[&str], exclude: &[&str]| match rpc(
        &b.bootstrap(),
        MirrorRequest::AddTopicsToMirror(AddTopicsToMirrorRequest {
            mirror_name: "pat".to_string(),
            include_patterns: include.iter().map(|s| s.to_string()).collect(),
            exclude_patterns: exclude.iter().map(|s| s.to_string()).collect(),
            state_validation_offset: -1,
            ..Default::default()
        }),
    ) {
        MirrorResponse::AddTopicsToMirror(r) => r,
        other => panic!("unexpected {other:?}"),
    };
    for (include, exclude, which) in [
        (&["pay-("][..], &[][..], "include"),
        (&["pay-.*"], &["("], "exclude"),
    ] {
        let r = add(include, exclude);
        assert_eq!(
            r.error_code,
            kafka_protocol::ResponseError::InvalidRequest.code(),
            "{r:?}"
        );
        let message = r.error_message.unwrap_or_default();
        assert!(
            message.contains(&format!("Invalid {which} pattern")),
            "{message}"
        );
    }
    // Valid ones work: the exclude keeps pay-1 out.
    let r = add(&["pay-.*"], &["pay-1"]);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(r.topics.iter().all(|t| t.name != "pay-1"), "{r:?}");
}
