import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java clients against a replicated cluster while its brokers fail:
 *
 * `produce`: an idempotent acks=all producer sends records 0..N (record i to partition
 * i % P, key "i", value "value-i") at a steady rate and writes each acknowledgement as
 * "partition offset index" to --ack-file as it arrives (flushed, so the file is current
 * while brokers are killed underneath).
 *
 * `check`: reads every partition from the beginning to its end offset and checks that
 * every index 0..N is there exactly once, in index order within its partition, and every
 * acknowledged record sits at its acknowledged offset.
 *
 * java ReplicationChecks produce|check --bootstrap H:P --topic T --records N --partitions P [--ack-file F] [--rate R]
 */
public final class ReplicationChecks {
    public static void main(String[] argv) {
        String scenario = argv.length > 0 ? argv[0] : "";
        switch (scenario) {
            case "produce": Check.main(scenario, ReplicationChecks::produce, argv); break;
            case "check": Check.main(scenario, ReplicationChecks::check, argv); break;
            default:
                System.err.println("usage: ReplicationChecks produce|check --bootstrap H:P --topic T --records N --partitions P");
                System.exit(2);
        }
    }

    static void produce(Map<String, String> a, Map<String, Object> sum) throws Exception {
        String topic = Check.need(a, "topic");
        int n = Integer.parseInt(Check.need(a, "records"));
        int partitions = Integer.parseInt(Check.need(a, "partitions"));
        double rate = Double.parseDouble(a.getOrDefault("rate", "2000"));
        Properties p = Check.common(Check.need(a, "bootstrap"));
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("max.in.flight.requests.per.connection", "5");
        p.put("delivery.timeout.ms", "120000");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        AtomicLong acked = new AtomicLong();
        AtomicReference<Exception> failed = new AtomicReference<>();
        long started = System.nanoTime();
        try (PrintWriter acks = new PrintWriter(new FileWriter(Check.need(a, "ack-file"), true), true);
             KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n && failed.get() == null; i++) {
                long due = started + (long) (i * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                final int index = i;
                producer.send(new ProducerRecord<>(topic, i % partitions, Integer.toString(i), "value-" + i),
                    (md, e) -> {
                        if (e != null) {
                            failed.compareAndSet(null, e);
                            return;
                        }
                        synchronized (acks) {
                            acks.println(md.partition() + " " + md.offset() + " " + index);
                        }
                        acked.incrementAndGet();
                    });
            }
            producer.flush();
        }
        sum.put("acked", acked.get());
        if (failed.get() != null) {
            throw new AssertionError("a send failed: " + failed.get());
        }
        Check.equal((long) n, acked.get(), "acknowledged records");
    }

    static void check(Map<String, String> a, Map<String, Object> sum) throws Exception {
        String topic = Check.need(a, "topic");
        int n = Integer.parseInt(Check.need(a, "records"));
        int partitions = Integer.parseInt(Check.need(a, "partitions"));
        Properties p = Check.common(Check.need(a, "bootstrap"));
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        Map<Long, Integer> seenAt = new HashMap<>();
        Map<String, Long> offsetOf = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            int[] last = new int[partitions];
            java.util.Arrays.fill(last, -1);
            long deadline = System.currentTimeMillis() + 120_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                Check.that(System.currentTimeMillis() < deadline, "read to the end offsets in time");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    int index = Integer.parseInt(r.key());
                    Check.equal("value-" + index, r.value(), "value of record " + index);
                    Check.equal(index % partitions, r.partition(), "partition of record " + index);
                    Check.that(index > last[r.partition()], "record " + index + " after " + last[r.partition()]
                        + " in partition " + r.partition() + " (a duplicate or out of order)");
                    last[r.partition()] = index;
                    Check.that(offsetOf.put(r.partition() + ":" + index, r.offset()) == null, "record " + index + " twice");
                    seenAt.put((long) r.partition() << 40 | r.offset(), index);
                }
            }
        }
        Check.equal(n, offsetOf.size(), "distinct records");
        long checked = 0;
        for (String line : Files.readAllLines(Paths.get(Check.need(a, "ack-file")), StandardCharsets.UTF_8)) {
            String[] f = line.trim().split(" ");
            if (f.length != 3) {
                continue;
            }
            long key = Long.parseLong(f[0]) << 40 | Long.parseLong(f[1]);
            Check.equal(Integer.parseInt(f[2]), seenAt.get(key), "record at acknowledged " + f[0] + "@" + f[1]);
            checked++;
        }
        sum.put("records", offsetOf.size());
        sum.put("acks_checked", checked);
    }
}
