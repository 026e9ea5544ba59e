import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Source data for mirroring from Apache Kafka, and the checks after failover.
 *
 * load:   T-lz4 (3 partitions, idempotent, lz4, headers), T-zstd (2 partitions,
 *         transactional, zstd: 5 committed and 2 aborted transactions), and group T-group
 *         with committed offsets 500/600/700 on T-lz4 (metadata "m<p>").
 * resume: a consumer of group T-group (on the failed-over copy) starts exactly at
 *         500/600/700 and reads the rest of T-lz4 in order.
 * produce-after: a fresh idempotent producer writes 100 records to T-lz4; every record,
 *         old and new, is read back once.
 *
 * java MirrorLoad load|resume|produce-after --bootstrap B --topic T
 */
public final class MirrorLoad {
    static final int PER_PARTITION = 1000;
    static final long[] COMMITTED = {500, 600, 700};

    public static void main(String[] argv) {
        String scenario = argv.length > 0 ? argv[0] : "";
        switch (scenario) {
            case "load": Check.main(scenario, MirrorLoad::load, argv); break;
            case "resume": Check.main(scenario, MirrorLoad::resume, argv); break;
            case "produce-after": Check.main(scenario, MirrorLoad::produceAfter, argv); break;
            default:
                System.err.println("usage: MirrorLoad load|resume|produce-after --bootstrap B --topic T");
                System.exit(2);
        }
    }

    static void load(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String t = Check.need(args, "topic");
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            admin.createTopics(List.of(
                    new NewTopic(t + "-lz4", 3, (short) 1).configs(Map.of("retention.ms", "987654321")),
                    new NewTopic(t + "-zstd", 2, (short) 1))).all().get();
        }
        Properties idem = new Properties();
        idem.put("enable.idempotence", "true");
        idem.put("compression.type", "lz4");
        idem.put("linger.ms", "20");
        try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, idem)) {
            for (int i = 0; i < 3 * PER_PARTITION; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(t + "-lz4", i % 3, "k" + i, "value-" + i);
                r.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                p.send(r);
            }
            p.flush();
        }
        Properties tx = new Properties();
        tx.put("transactional.id", t + "-loader");
        tx.put("compression.type", "zstd");
        int committed = 0;
        try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, tx)) {
            p.initTransactions();
            for (int round = 0; round < 7; round++) {
                boolean abort = round == 2 || round == 5;
                p.beginTransaction();
                for (int i = 0; i < 100; i++) {
                    p.send(new ProducerRecord<>(t + "-zstd", i % 2, "r" + round + "-" + i, abort ? "aborted" : "committed"));
                }
                if (abort) {
                    // Sent first, so that the aborted records are in the log.
                    p.flush();
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                    committed += 100;
                }
            }
        }
        Properties g = new Properties();
        g.put("group.id", t + "-group");
        try (KafkaConsumer<String, String> c = ProducerChecks.consumer(bootstrap, g)) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (int p = 0; p < 3; p++) {
                offsets.put(new TopicPartition(t + "-lz4", p), new OffsetAndMetadata(COMMITTED[p], "m" + p));
            }
            c.commitSync(offsets);
        }
        summary.put("lz4_records", 3 * PER_PARTITION);
        summary.put("zstd_committed", committed);
    }

    static void resume(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String t = Check.need(args, "topic");
        Properties g = new Properties();
        g.put("group.id", t + "-group");
        g.put("auto.offset.reset", "none");
        int read = 0;
        try (KafkaConsumer<String, String> c = ProducerChecks.consumer(bootstrap, g)) {
            c.subscribe(List.of(t + "-lz4"));
            Map<Integer, Long> next = new HashMap<>();
            long deadline = System.currentTimeMillis() + 60000;
            int want = 0;
            for (long o : COMMITTED) {
                want += PER_PARTITION - (int) o;
            }
            while (read < want) {
                Check.that(System.currentTimeMillis() < deadline, "resumed group read " + read + " of " + want);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    long expected = next.getOrDefault(r.partition(), COMMITTED[r.partition()]);
                    Check.equal(expected, r.offset(), "offset read in partition " + r.partition());
                    int n = Integer.parseInt(new String(r.headers().lastHeader("n").value(), StandardCharsets.UTF_8));
                    Check.equal("value-" + n, r.value(), "value at offset " + r.offset());
                    Check.equal(r.partition(), n % 3, "partition of record " + n);
                    next.put(r.partition(), r.offset() + 1);
                    read++;
                }
            }
            var committed = c.committed(java.util.Set.of(new TopicPartition(t + "-lz4", 1)));
            summary.put("metadata_p1", committed.get(new TopicPartition(t + "-lz4", 1)).metadata());
        }
        summary.put("resumed_records", read);
    }

    static void produceAfter(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String t = Check.need(args, "topic");
        Properties idem = new Properties();
        idem.put("enable.idempotence", "true");
        try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, idem)) {
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(t + "-lz4", i % 3, "after" + i, "after-" + i);
                acks.add(p.send(r));
            }
            for (var f : acks) {
                Check.that(f.get().offset() >= PER_PARTITION, "a new record appended after the mirrored ones");
            }
        }
        List<ConsumerRecord<String, String>> all = ProducerChecks.readAll(bootstrap, t + "-lz4", "read_uncommitted", 60000);
        Check.equal(3 * PER_PARTITION + 100, all.size(), "records after failover and new writes");
        long after = all.stream().filter(r -> r.value().startsWith("after-")).count();
        Check.equal(100L, after, "new records read back");
        List<ConsumerRecord<String, String>> zstd = ProducerChecks.readAll(bootstrap, t + "-zstd", "read_committed", 60000);
        Check.equal(500, zstd.size(), "committed transactional records");
        Check.that(zstd.stream().allMatch(r -> r.value().equals("committed")), "no aborted record is read_committed");
        summary.put("records", all.size());
    }
}
