import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java producer against a broker: `idempotent` (acks=all, compression, headers, read
 * back exactly once and in order) and `transactions` (commit, abort, read_committed vs
 * read_uncommitted, sendOffsetsToTransaction).
 *
 * java ProducerChecks idempotent|transactions --bootstrap HOST:PORT --topic T [--records N] [--compression C]
 */
public final class ProducerChecks {
    public static void main(String[] argv) {
        String scenario = argv.length > 0 ? argv[0] : "";
        switch (scenario) {
            case "idempotent": Check.main(scenario, ProducerChecks::idempotent, argv); break;
            case "transactions": Check.main(scenario, ProducerChecks::transactions, argv); break;
            case "produce": Check.main(scenario, ProducerChecks::produce, argv); break;
            case "topic-rules": Check.main(scenario, ProducerChecks::topicRules, argv); break;
            case "txn-refused": Check.main(scenario, ProducerChecks::txnRefused, argv); break;
            case "create-topic": Check.main(scenario, (a, sum) -> createTopic(Check.need(a, "bootstrap"),
                    Check.need(a, "topic"), Integer.parseInt(a.getOrDefault("partitions", "1"))), argv); break;
            default:
                System.err.println("usage: ProducerChecks idempotent|transactions|produce|create-topic|topic-rules|txn-refused --bootstrap HOST:PORT --topic T");
                System.exit(2);
        }
    }

    static KafkaProducer<String, String> producer(String bootstrap, Properties extra) {
        Properties p = Check.common(bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, Properties extra) {
        Properties p = Check.common(bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
    }

    /** Reads every partition of `topic` from the start until `expected` records or the end offsets. */
    static List<ConsumerRecord<String, String>> readAll(String bootstrap, String topic, String isolation,
            long timeoutMs) throws Exception {
        Properties extra = new Properties();
        extra.put("isolation.level", isolation);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, extra)) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(topic).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp) < ends.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                Check.that(System.currentTimeMillis() < deadline, "reading " + topic + " timed out at "
                        + out.size() + " records");
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                rs.forEach(out::add);
            }
        }
        return out;
    }

    static void produce(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        int n = Integer.parseInt(args.getOrDefault("records", "1000"));
        Properties extra = new Properties();
        extra.put("compression.type", args.getOrDefault("compression", "none"));
        extra.put("enable.idempotence", args.getOrDefault("idempotent", "true"));
        try (KafkaProducer<String, String> p = producer(bootstrap, extra)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, "k" + (i % 97), "v" + i)));
            }
            for (Future<RecordMetadata> f : acks) {
                f.get();
            }
        }
        summary.put("produced", n);
    }

    /**
     * Topic configs a leader enforces: a record without a key on a compacted topic is
     * rejected (INVALID_RECORD, KIP-467 per-record errors) while the keyed ones of other
     * batches are written; LogAppendTime replaces the producer's timestamps; a topic
     * compression.type is applied (the records read back unchanged; the Rust test checks
     * the codec in the segment).
     */
    static void topicRules(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        String compacted = topic + "-compacted";
        String appendTime = topic + "-appendtime";
        String gzip = topic + "-gzip";
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            admin.createTopics(List.of(
                    new NewTopic(compacted, 1, (short) 1).configs(Map.of("cleanup.policy", "compact")),
                    new NewTopic(appendTime, 1, (short) 1).configs(Map.of("message.timestamp.type", "LogAppendTime")),
                    new NewTopic(gzip, 1, (short) 1).configs(Map.of("compression.type", "gzip")))).all().get();
        }
        Properties noRetry = new Properties();
        noRetry.put("retries", "0");
        noRetry.put("enable.idempotence", "false");
        noRetry.put("linger.ms", "0");
        try (KafkaProducer<String, String> p = producer(bootstrap, noRetry)) {
            p.send(new ProducerRecord<>(compacted, "k1", "v1")).get();
            try {
                p.send(new ProducerRecord<>(compacted, null, "no key")).get();
                throw new AssertionError("a record without a key was accepted by a compacted topic");
            } catch (java.util.concurrent.ExecutionException e) {
                Check.that(e.getCause() instanceof org.apache.kafka.common.InvalidRecordException,
                        "null key on a compacted topic: " + e.getCause());
                Check.that(String.valueOf(e.getCause().getMessage()).contains("without key"),
                        "the per-record error names the missing key: " + e.getCause().getMessage());
                summary.put("null_key_error", e.getCause().getClass().getSimpleName());
            }
            p.send(new ProducerRecord<>(compacted, "k2", "v2")).get();

            long old = System.currentTimeMillis() - 3_600_000L;
            long before = System.currentTimeMillis();
            RecordMetadata m = p.send(new ProducerRecord<>(appendTime, null, old, "k", "stamped")).get();
            Check.that(m.timestamp() >= before - 1000, "LogAppendTime in the produce answer: " + m.timestamp());

            for (int i = 0; i < 50; i++) {
                p.send(new ProducerRecord<>(gzip, "g" + i, "value-" + i));
            }
            p.flush();
        }
        List<ConsumerRecord<String, String>> c = readAll(bootstrap, compacted, "read_uncommitted", 30000);
        Check.equal(2, c.size(), "records of the compacted topic");
        Check.equal("k2", c.get(1).key(), "the keyed record after the rejected one");
        List<ConsumerRecord<String, String>> a = readAll(bootstrap, appendTime, "read_uncommitted", 30000);
        Check.equal(1, a.size(), "records of the LogAppendTime topic");
        Check.equal(org.apache.kafka.common.record.TimestampType.LOG_APPEND_TIME, a.get(0).timestampType(),
                "timestamp type read back");
        Check.that(a.get(0).timestamp() >= System.currentTimeMillis() - 120_000, "timestamp read back is the append time");
        List<ConsumerRecord<String, String>> g = readAll(bootstrap, gzip, "read_uncommitted", 30000);
        Check.equal(50, g.size(), "records of the gzip topic");
        for (int i = 0; i < 50; i++) {
            Check.equal("value-" + i, g.get(i).value(), "gzip record " + i);
        }
    }

    /**
     * A transactional producer that writes to a read-only (mirrored) topic: the
     * transaction cannot take the partition, nothing is committed, and the producer can
     * abort and go on.
     */
    static void txnRefused(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        Properties tx = new Properties();
        tx.put("transactional.id", topic + "-refused-txn");
        tx.put("transaction.timeout.ms", "10000");
        tx.put("request.timeout.ms", "5000");
        tx.put("delivery.timeout.ms", "10000");
        tx.put("max.block.ms", "10000");
        try (KafkaProducer<String, String> p = producer(bootstrap, tx)) {
            p.initTransactions();
            p.beginTransaction();
            Throwable failure = null;
            try {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, i % 3, "x" + i, "must not land"));
                }
                p.commitTransaction();
            } catch (Exception e) {
                failure = e;
            }
            Check.that(failure != null, "a transaction into a read-only topic committed");
            summary.put("refused_with", failure.getClass().getSimpleName());
            try {
                p.abortTransaction();
            } catch (Exception e) {
                summary.put("abort", e.getClass().getSimpleName());
            }
        }
    }

    static void idempotent(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        int n = Integer.parseInt(args.getOrDefault("records", "5000"));
        int partitions = 3;
        createTopic(bootstrap, topic, partitions);
        Properties extra = new Properties();
        extra.put("enable.idempotence", "true");
        extra.put("max.in.flight.requests.per.connection", "5");
        extra.put("compression.type", args.getOrDefault("compression", "lz4"));
        Map<Integer, List<Long>> offsets = new HashMap<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, extra)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i);
                r.headers().add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                acks.add(p.send(r));
            }
            for (Future<RecordMetadata> f : acks) {
                RecordMetadata m = f.get();
                offsets.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset());
            }
        }
        for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) {
            List<Long> os = e.getValue();
            for (int i = 0; i < os.size(); i++) {
                Check.equal((long) i, os.get(i), "acknowledged offset " + i + " of partition " + e.getKey());
            }
        }
        List<ConsumerRecord<String, String>> got = readAll(bootstrap, topic, "read_uncommitted", 60000);
        Check.equal(n, got.size(), "records read back");
        Map<Integer, Integer> lastSeq = new HashMap<>();
        for (ConsumerRecord<String, String> r : got) {
            int seq = Integer.parseInt(new String(r.headers().lastHeader("seq").value(), StandardCharsets.UTF_8));
            Check.equal("k" + seq, r.key(), "key of seq " + seq);
            Check.equal("v" + seq, r.value(), "value of seq " + seq);
            Check.equal(seq % partitions, r.partition(), "partition of seq " + seq);
            Integer prev = lastSeq.put(r.partition(), seq);
            Check.that(prev == null || prev + partitions == seq,
                    "partition " + r.partition() + " out of order: " + prev + " then " + seq);
        }
        summary.put("records", got.size());
    }

    static void transactions(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        String input = topic + "-in";
        String group = topic + "-group";
        createTopic(bootstrap, topic, 2);
        createTopic(bootstrap, input, 1);
        // Input for the consume-transform-produce round.
        try (KafkaProducer<String, String> p = producer(bootstrap, new Properties())) {
            for (int i = 0; i < 50; i++) {
                p.send(new ProducerRecord<>(input, "in" + i, "x" + i));
            }
        }
        Properties tx = new Properties();
        tx.put("transactional.id", topic + "-txn");
        tx.put("transaction.timeout.ms", "30000");
        try (KafkaProducer<String, String> p = producer(bootstrap, tx)) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 100; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "c1-" + i, "committed"));
            }
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < 100; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "a-" + i, "aborted"));
            }
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            for (int i = 0; i < 100; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "c2-" + i, "committed"));
            }
            p.commitTransaction();

            // consume-transform-produce: offsets commit with the transaction, and an
            // aborted transaction's offsets do not.
            Properties g = new Properties();
            g.put("group.id", group);
            g.put("isolation.level", "read_committed");
            try (KafkaConsumer<String, String> c = consumer(bootstrap, g)) {
                c.subscribe(List.of(input));
                List<ConsumerRecord<String, String>> in = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 60000;
                while (in.size() < 50) {
                    Check.that(System.currentTimeMillis() < deadline, "group read of input timed out at " + in.size());
                    c.poll(Duration.ofMillis(200)).forEach(in::add);
                }
                ConsumerGroupMetadata meta = c.groupMetadata();
                TopicPartition itp = new TopicPartition(input, 0);
                p.beginTransaction();
                for (ConsumerRecord<String, String> r : in.subList(0, 30)) {
                    p.send(new ProducerRecord<>(topic, 0, r.key(), "transformed"));
                }
                p.sendOffsetsToTransaction(Map.of(itp, new OffsetAndMetadata(30)), meta);
                p.commitTransaction();
                p.beginTransaction();
                for (ConsumerRecord<String, String> r : in.subList(30, 50)) {
                    p.send(new ProducerRecord<>(topic, 1, r.key(), "aborted"));
                }
                p.sendOffsetsToTransaction(Map.of(itp, new OffsetAndMetadata(50)), meta);
                // Sent first, so that the aborted records are in the log.
                p.flush();
                p.abortTransaction();
            }
        }
        List<ConsumerRecord<String, String>> committed = readAll(bootstrap, topic, "read_committed", 60000);
        List<ConsumerRecord<String, String>> all = readAll(bootstrap, topic, "read_uncommitted", 60000);
        long committedValues = committed.stream().filter(r -> !r.value().equals("aborted")).count();
        Check.equal(230L, (long) committed.size(), "read_committed records");
        Check.equal(230L, committedValues, "read_committed records that were committed");
        Check.equal(350L, (long) all.size(), "read_uncommitted records");
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            Map<TopicPartition, OffsetAndMetadata> offs =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Check.equal(30L, offs.get(new TopicPartition(input, 0)).offset(), "group offset after commit and abort");
            // The LSO is the end once every transaction has ended.
            TopicPartition p0 = new TopicPartition(topic, 0);
            long end = admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all().get().get(p0).offset();
            Check.that(end > 0, "end offset of " + p0);
        }
        summary.put("read_committed", committed.size());
        summary.put("read_uncommitted", all.size());
    }
}
