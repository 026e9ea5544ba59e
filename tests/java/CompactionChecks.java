import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A table-shaped topic through the Java clients: `produce` writes `--rounds` values for
 * each of `--keys` keys (value "k<i>-r<round>", padded), then tombstones for the first
 * `--tombstones` keys; `read` consumes every partition from offset 0 to its end and checks
 * that the last value per key is the last one written, and that tombstoned keys are
 * gone. The summary says how many records were read and how many offset gaps it met.
 *
 * java CompactionChecks produce|read --bootstrap HOST:PORT --topic T --keys N --rounds R
 *     --tombstones K [--partitions P --config k=v,k=v]
 */
public final class CompactionChecks {
    public static void main(String[] argv) {
        String scenario = argv.length > 0 ? argv[0] : "";
        switch (scenario) {
            case "produce": Check.main(scenario, CompactionChecks::produce, argv); break;
            case "read": Check.main(scenario, CompactionChecks::read, argv); break;
            default:
                System.err.println("usage: CompactionChecks produce|read --bootstrap HOST:PORT --topic T --keys N --rounds R --tombstones K");
                System.exit(2);
        }
    }

    static String value(int key, int round) {
        return "k" + key + "-r" + round + "-" + "x".repeat(80);
    }

    static void produce(Map<String, String> a, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(a, "bootstrap");
        String topic = Check.need(a, "topic");
        int keys = Integer.parseInt(Check.need(a, "keys"));
        int rounds = Integer.parseInt(Check.need(a, "rounds"));
        int tombstones = Integer.parseInt(a.getOrDefault("tombstones", "0"));
        if (a.containsKey("config")) {
            Map<String, String> configs = new HashMap<>();
            for (String kv : a.get("config").split(",")) {
                String[] p = kv.split("=", 2);
                configs.put(p[0], p[1]);
            }
            int partitions = Integer.parseInt(a.getOrDefault("partitions", "1"));
            try (Admin admin = Admin.create(Check.common(bootstrap))) {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                        .all().get();
            }
        }
        Properties p = Check.common(bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("batch.size", "4096");
        long sent = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < keys; k++) {
                    producer.send(new ProducerRecord<>(topic, "key-" + k, value(k, r)));
                    sent++;
                }
            }
            for (int k = 0; k < tombstones; k++) {
                producer.send(new ProducerRecord<>(topic, "key-" + k, null));
                sent++;
            }
            producer.flush();
        }
        summary.put("sent", sent);
    }

    static void read(Map<String, String> a, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(a, "bootstrap");
        String topic = Check.need(a, "topic");
        int keys = Integer.parseInt(Check.need(a, "keys"));
        int rounds = Integer.parseInt(Check.need(a, "rounds"));
        int tombstones = Integer.parseInt(a.getOrDefault("tombstones", "0"));
        Properties p = Check.common(bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("max.poll.records", "500");
        Map<String, String> table = new TreeMap<>();
        long records = 0;
        long gaps = 0;
        long tombstonesSeen = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            // The offset before each log start: a first record later than the log start
            // is a gap too.
            Map<TopicPartition, Long> last = new HashMap<>();
            consumer.beginningOffsets(tps).forEach((tp, o) -> last.put(tp, o - 1));
            long deadline = System.currentTimeMillis() + 60_000;
            while (tps.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                Check.that(System.currentTimeMillis() < deadline, "read to the end offsets " + ends);
                for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(rec.topic(), rec.partition());
                    Long prev = last.put(tp, rec.offset());
                    if (prev != null && rec.offset() != prev + 1) {
                        gaps++;
                    }
                    Check.that(prev == null || rec.offset() > prev, "offsets increase in " + tp);
                    records++;
                    if (rec.value() == null) {
                        tombstonesSeen++;
                        table.remove(rec.key());
                    } else {
                        table.put(rec.key(), rec.value());
                    }
                }
            }
        }
        for (int k = 0; k < keys; k++) {
            String got = table.get("key-" + k);
            if (k < tombstones) {
                Check.equal(null, got, "key-" + k + " was deleted");
            } else {
                Check.equal(value(k, rounds - 1), got, "the last value of key-" + k);
            }
        }
        Check.equal(keys - tombstones, table.size(), "keys in the table");
        summary.put("records", records);
        summary.put("gaps", gaps);
        summary.put("tombstones", tombstonesSeen);
    }
}
