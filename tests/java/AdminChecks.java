import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The Java AdminClient against a broker: topics and partitions, the cluster, configs,
 * offsets (max timestamp included), DeleteRecords, consumer groups and their offsets,
 * producers and transactions.
 *
 * java AdminChecks admin --bootstrap HOST:PORT --topic T
 */
public final class AdminChecks {
    public static void main(String[] argv) {
        Check.main("admin", AdminChecks::admin, argv);
    }

    static <T> Throwable failure(org.apache.kafka.common.KafkaFuture<T> f) throws InterruptedException {
        try {
            f.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    static void admin(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        String group = topic + "-g";
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            // Cluster.
            DescribeClusterResult cluster = admin.describeCluster();
            Check.that(cluster.clusterId().get() != null, "a cluster id");
            Check.equal(1, cluster.nodes().get().size(), "brokers");
            Check.that(cluster.controller().get() != null, "a controller");
            summary.put("cluster_id", cluster.clusterId().get());

            // Topics and partitions.
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete")))).all().get();
            Throwable exists = failure(admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all());
            Check.that(exists instanceof TopicExistsException, "a second create fails with TopicExists: " + exists);
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            Check.equal(3, td.partitions().size(), "partitions after CreatePartitions");
            Check.that(td.topicId() != null && !td.topicId().toString().isEmpty(), "a topic id");
            Set<String> names = admin.listTopics().names().get();
            Check.that(names.contains(topic), "listTopics has " + topic);
            String doomed = topic + "-doomed";
            admin.createTopics(List.of(new NewTopic(doomed, 1, (short) 1))).all().get();
            admin.deleteTopics(List.of(doomed)).all().get();
            Check.waitFor(() -> {
                try {
                    return !admin.listTopics().names().get().contains(doomed);
                } catch (Exception e) {
                    return false;
                }
            }, 30000, "the deleted topic to disappear");
            Throwable gone = failure(admin.describeTopics(List.of(doomed)).allTopicNames());
            Check.that(gone instanceof UnknownTopicOrPartitionException, "describe of a deleted topic: " + gone);

            // Configs: describe, incremental alter, delete back to the default.
            ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config tc = admin.describeConfigs(List.of(tr)).all().get().get(tr);
            Check.equal("3600000", tc.get("retention.ms").value(), "retention.ms as created");
            Check.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, tc.get("retention.ms").source(), "its source");
            Check.that(tc.get("segment.bytes") != null, "segment.bytes described");
            Check.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, tc.get("segment.bytes").source(), "segment.bytes source");
            admin.incrementalAlterConfigs(Map.of(tr, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            tc = admin.describeConfigs(List.of(tr)).all().get().get(tr);
            Check.equal("7200000", tc.get("retention.ms").value(), "retention.ms after the alter");
            Check.equal("2000000", tc.get("max.message.bytes").value(), "max.message.bytes after the alter");
            Check.equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, tc.get("cleanup.policy").source(), "cleanup.policy deleted");
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER,
                    Integer.toString(cluster.nodes().get().iterator().next().id()));
            Config bc = admin.describeConfigs(List.of(br), new DescribeConfigsOptions().includeSynonyms(true))
                    .all().get().get(br);
            Check.that(bc.get("log.retention.ms") != null || bc.get("log.retention.hours") != null,
                    "broker config describes log retention");
            summary.put("broker_configs", bc.entries().size());
            summary.put("topic_configs", tc.entries().size());

            // Offsets, max timestamp included, and DeleteRecords.
            long base = System.currentTimeMillis() - 60000;
            try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, new Properties())) {
                for (int i = 0; i < 30; i++) {
                    // the newest timestamp sits in the middle, at offset 14
                    long ts = base + (i == 14 ? 50000 : i * 100);
                    p.send(new ProducerRecord<>(topic, 0, ts, "k" + i, "v" + i));
                }
                p.flush();
            }
            TopicPartition p0 = new TopicPartition(topic, 0);
            Check.equal(0L, offset(admin, p0, OffsetSpec.earliest()), "earliest");
            Check.equal(30L, offset(admin, p0, OffsetSpec.latest()), "latest");
            Check.equal(14L, offset(admin, p0, OffsetSpec.maxTimestamp()), "max timestamp");
            Check.equal(5L, offset(admin, p0, OffsetSpec.forTimestamp(base + 450)), "for timestamp");
            var deleted = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(10))).all();
            deleted.get();
            Check.equal(10L, offset(admin, p0, OffsetSpec.earliest()), "earliest after DeleteRecords");

            // Consumer groups: a committed group, listed, described, its offsets altered and deleted.
            Properties g = new Properties();
            g.put("group.id", group);
            try (KafkaConsumer<String, String> c = ProducerChecks.consumer(bootstrap, g)) {
                c.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60000;
                int n = 0;
                while (n < 20) {
                    Check.that(System.currentTimeMillis() < deadline, "group consumer read " + n);
                    n += c.poll(Duration.ofMillis(200)).count();
                }
                c.commitSync(Map.of(p0, new OffsetAndMetadata(25, "meta")));
                Collection<GroupListing> groups = admin.listGroups().all().get();
                Check.that(groups.stream().anyMatch(l -> l.groupId().equals(group)), "listGroups has " + group);
                var d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                Check.equal(1, d.members().size(), "members of a live group");
            }
            var offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Check.equal(25L, offs.get(p0).offset(), "committed offset");
            Check.equal("meta", offs.get(p0).metadata(), "committed metadata");
            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(12))).all().get();
            offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Check.equal(12L, offs.get(p0).offset(), "offset after alterConsumerGroupOffsets");
            admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get();
            offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Check.that(offs.get(p0) == null, "offset after deleteConsumerGroupOffsets: " + offs);
            admin.deleteConsumerGroups(List.of(group)).all().get();
            Check.that(admin.listGroups().all().get().stream().noneMatch(l -> l.groupId().equals(group)),
                    "the deleted group is not listed");

            // Producers and transactions.
            Properties tx = new Properties();
            tx.put("transactional.id", topic + "-tx");
            try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, tx)) {
                p.initTransactions();
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 1, "t", "open")).get();
                List<ProducerState> producers = admin.describeProducers(List.of(new TopicPartition(topic, 1)))
                        .partitionResult(new TopicPartition(topic, 1)).get().activeProducers();
                Check.equal(1, producers.size(), "active producers of a partition with an open transaction");
                Check.that(producers.get(0).currentTransactionStartOffset().isPresent(),
                        "the producer's open transaction start offset");
                Collection<TransactionListing> txns = admin.listTransactions().all().get();
                Check.that(txns.stream().anyMatch(t -> t.transactionalId().equals(topic + "-tx")),
                        "listTransactions has the open transaction: " + txns);
                var described = admin.describeTransactions(List.of(topic + "-tx")).all().get().get(topic + "-tx");
                Check.equal("Ongoing", described.state().toString(), "described transaction state");
                Check.that(described.topicPartitions().contains(new TopicPartition(topic, 1)),
                        "described transaction partitions: " + described.topicPartitions());
                p.commitTransaction();
            }
        }
    }

    static long offset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResult r = admin.listOffsets(Map.of(tp, spec));
        return r.partitionResult(tp).get().offset();
    }
}
