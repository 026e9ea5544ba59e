import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java consumer's classic group protocol: two members and a rebalance, commitSync and
 * commitAsync, seek, pause/resume, a leave, and static membership (a member that restarts
 * with the same group.instance.id gets its partitions back without a rebalance).
 *
 * java GroupChecks groups --bootstrap HOST:PORT --topic T
 */
public final class GroupChecks {
    public static void main(String[] argv) {
        if (argv.length > 0 && argv[0].equals("consumer-protocol")) {
            Check.main("consumer-protocol", GroupChecks::consumerProtocol, argv);
        } else {
            Check.main("groups", GroupChecks::groups, argv);
        }
    }

    /**
     * The KIP-848 consumer protocol (group.protocol=consumer) is not served: the client
     * must fail cleanly, telling the user to set group.protocol=classic, as it does with a
     * Kafka cluster that predates KIP-848.
     */
    static void consumerProtocol(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        ProducerChecks.createTopic(bootstrap, topic, 1);
        Properties p = new Properties();
        p.put("group.id", topic + "-848");
        p.put("group.protocol", "consumer");
        try (KafkaConsumer<String, String> c = ProducerChecks.consumer(bootstrap, p)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(200));
            }
            throw new AssertionError("group.protocol=consumer worked: if it is supported now, test it fully");
        } catch (org.apache.kafka.common.errors.UnsupportedVersionException e) {
            Check.that(e.getMessage().contains("group.protocol=classic"), "the error tells the fix: " + e.getMessage());
            summary.put("refused_with", "UnsupportedVersionException");
        }
    }

    static final int PARTITIONS = 4;
    static final int PER_ROUND = 400;

    static void produce(String bootstrap, String topic, int from, int n) throws Exception {
        try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, new Properties())) {
            for (int i = from; i < from + n; i++) {
                p.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i));
            }
            p.flush();
        }
    }

    static KafkaConsumer<String, String> member(String bootstrap, String group, String instance) {
        Properties p = new Properties();
        p.put("group.id", group);
        p.put("group.protocol", "classic");
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "500");
        p.put("max.poll.records", "50");
        p.put("partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        if (instance != null) {
            p.put("group.instance.id", instance);
        }
        return ProducerChecks.consumer(bootstrap, p);
    }

    static final class Tracker implements ConsumerRebalanceListener {
        final Set<TopicPartition> owned = new HashSet<>();
        final AtomicInteger rebalances = new AtomicInteger();

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
            owned.removeAll(ps);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
            owned.addAll(ps);
            rebalances.incrementAndGet();
        }
    }

    static void groups(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        String group = topic + "-g";
        ProducerChecks.createTopic(bootstrap, topic, PARTITIONS);
        produce(bootstrap, topic, 0, PER_ROUND);

        Map<String, Integer> seen = new HashMap<>();
        Tracker t1 = new Tracker();
        Tracker t2 = new Tracker();
        try (KafkaConsumer<String, String> c1 = member(bootstrap, group, null);
             KafkaConsumer<String, String> c2 = member(bootstrap, group, null)) {
            c1.subscribe(List.of(topic), t1);
            long deadline = System.currentTimeMillis() + 60000;
            // c1 alone: takes every partition, reads some, commits synchronously.
            while (t1.owned.size() < PARTITIONS || seen.size() < 100) {
                Check.that(System.currentTimeMillis() < deadline, "first member never got all partitions");
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(100))) {
                    seen.merge(r.key(), 1, Integer::sum);
                }
            }
            c1.commitSync();
            // c2 joins: the cooperative assignor splits the partitions 2/2.
            c2.subscribe(List.of(topic), t2);
            deadline = System.currentTimeMillis() + 60000;
            while (t1.owned.size() != 2 || t2.owned.size() != 2) {
                Check.that(System.currentTimeMillis() < deadline,
                        "no 2/2 split after the second member joined: " + t1.owned + " / " + t2.owned);
                for (KafkaConsumer<String, String> c : List.of(c1, c2)) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) {
                        seen.merge(r.key(), 1, Integer::sum);
                    }
                    c.commitAsync();
                }
            }
            Set<TopicPartition> both = new HashSet<>(t1.owned);
            both.retainAll(t2.owned);
            Check.that(both.isEmpty(), "a partition owned twice: " + both);
            // Drain the rest with both members, committing asynchronously.
            deadline = System.currentTimeMillis() + 60000;
            while (seen.size() < PER_ROUND) {
                Check.that(System.currentTimeMillis() < deadline, "read " + seen.size() + " of " + PER_ROUND);
                for (KafkaConsumer<String, String> c : List.of(c1, c2)) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) {
                        seen.merge(r.key(), 1, Integer::sum);
                    }
                    c.commitAsync((offsets, e) -> {
                        if (e != null) {
                            Check.log("commitAsync failed: " + e);
                        }
                    });
                }
            }
            c1.commitSync();
            c2.commitSync();

            // pause/resume: a paused partition returns nothing while new records arrive.
            TopicPartition paused = t1.owned.iterator().next();
            c1.pause(List.of(paused));
            produce(bootstrap, topic, PER_ROUND, PER_ROUND);
            long until = System.currentTimeMillis() + 1500;
            while (System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(100))) {
                    Check.that(r.partition() != paused.partition(), "a record of paused " + paused);
                    seen.merge(r.key(), 1, Integer::sum);
                }
                for (ConsumerRecord<String, String> r : c2.poll(Duration.ofMillis(10))) {
                    seen.merge(r.key(), 1, Integer::sum);
                }
            }
            c1.resume(List.of(paused));
            // seek: rewind the paused partition by 10 and see those records again.
            long pos = c1.position(paused);
            c1.seek(paused, Math.max(0, pos - 10));
            int again = 0;
            deadline = System.currentTimeMillis() + 60000;
            while (seen.size() < 2 * PER_ROUND) {
                Check.that(System.currentTimeMillis() < deadline, "read " + seen.size() + " of " + 2 * PER_ROUND);
                for (KafkaConsumer<String, String> c : List.of(c1, c2)) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) {
                        if (seen.merge(r.key(), 1, Integer::sum) > 1) {
                            again++;
                        }
                    }
                }
            }
            Check.that(again >= Math.min(10, pos), "seek back by 10 re-read " + again + " records");
            c1.commitSync();
            c2.commitSync();
            // c2 leaves: c1 takes every partition again.
            c2.close();
            deadline = System.currentTimeMillis() + 60000;
            while (t1.owned.size() < PARTITIONS) {
                Check.that(System.currentTimeMillis() < deadline, "the member left never handed over: " + t1.owned);
                c1.poll(Duration.ofMillis(100));
            }
            c1.commitSync();
        }
        // Committed offsets equal the end offsets; the group is empty and deletable.
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            var ends = admin.listOffsets(latest).all().get();
            for (var e : ends.entrySet()) {
                Check.equal(e.getValue().offset(), committed.get(e.getKey()).offset(), "committed offset of " + e.getKey());
            }
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            Check.equal(GroupState.EMPTY, d.groupState(), "group state after every member left");
        }
        summary.put("distinct_records", seen.size());
        summary.put("rebalances_member1", t1.rebalances.get());

        // Static membership: a member that restarts within the session timeout keeps its
        // partitions and its generation (no rebalance).
        String sgroup = topic + "-static";
        Tracker s1 = new Tracker();
        int generation;
        try (KafkaConsumer<String, String> c = member(bootstrap, sgroup, "instance-a")) {
            c.subscribe(List.of(topic), s1);
            long deadline = System.currentTimeMillis() + 60000;
            while (s1.owned.size() < PARTITIONS) {
                Check.that(System.currentTimeMillis() < deadline, "static member never got its partitions");
                c.poll(Duration.ofMillis(100));
            }
            generation = c.groupMetadata().generationId();
            c.commitSync();
            // close() of a static member does not send LeaveGroup.
        }
        Tracker s2 = new Tracker();
        try (KafkaConsumer<String, String> c = member(bootstrap, sgroup, "instance-a")) {
            c.subscribe(List.of(topic), s2);
            long deadline = System.currentTimeMillis() + 60000;
            while (s2.owned.size() < PARTITIONS) {
                Check.that(System.currentTimeMillis() < deadline, "restarted static member never got its partitions");
                c.poll(Duration.ofMillis(100));
            }
            Check.equal(generation, c.groupMetadata().generationId(), "generation after a static member rejoined");
        }
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(sgroup)).all().get().get(sgroup);
            List<String> instances = new ArrayList<>();
            d.members().forEach(m -> instances.add(m.groupInstanceId().orElse("")));
            Check.equal(List.of("instance-a"), instances, "static members described");
        }
        summary.put("static_generation", generation);
    }
}
