import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams with exactly_once_v2: a word count with a repartition topic, a changelog
 * topic and a RocksDB state store, record caches off so that every count update is
 * emitted. With exactly-once, a read_committed reader of the output sees each word's counts
 * as exactly 1, 2, ..., n, also when an instance was killed mid-way and restarted.
 *
 * java StreamsWordCount produce --bootstrap B --topic T --lines N --from K
 * java StreamsWordCount run --bootstrap B --topic T --state-dir D [--halt-after R] [--lines N]
 *   run: processes until --halt-after records went through the word splitter, then halts
 *   the JVM like a SIGKILL (no close, no commit); without it, until the output holds the
 *   exact counts of N lines, then checks them.
 */
public final class StreamsWordCount {
    static final String[] WORDS = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"};

    public static void main(String[] argv) {
        String scenario = argv.length > 0 ? argv[0] : "";
        switch (scenario) {
            case "produce": Check.main(scenario, StreamsWordCount::produce, argv); break;
            case "run": Check.main(scenario, StreamsWordCount::run, argv); break;
            default:
                System.err.println("usage: StreamsWordCount produce|run --bootstrap B --topic T ...");
                System.exit(2);
        }
    }

    /** Line i: word j appears when (i + j) % (j + 2) == 0, and "alpha" always. */
    static String line(int i) {
        StringBuilder b = new StringBuilder("alpha");
        for (int j = 1; j < WORDS.length; j++) {
            if ((i + j) % (j + 2) == 0) {
                b.append(' ').append(WORDS[j].toUpperCase(Locale.ROOT));
            }
        }
        return b.toString();
    }

    static Map<String, Long> expected(int lines) {
        Map<String, Long> m = new HashMap<>();
        for (int i = 0; i < lines; i++) {
            for (String w : line(i).toLowerCase(Locale.ROOT).split(" ")) {
                m.merge(w, 1L, Long::sum);
            }
        }
        return m;
    }

    static void produce(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String input = Check.need(args, "topic") + "-input";
        int from = Integer.parseInt(args.getOrDefault("from", "0"));
        int lines = Integer.parseInt(Check.need(args, "lines"));
        try (KafkaProducer<String, String> p = ProducerChecks.producer(bootstrap, new Properties())) {
            for (int i = from; i < from + lines; i++) {
                p.send(new ProducerRecord<>(input, "line-" + i, line(i)));
            }
            p.flush();
        }
        summary.put("produced", lines);
    }

    static void run(Map<String, String> args, Map<String, Object> summary) throws Exception {
        String bootstrap = Check.need(args, "bootstrap");
        String topic = Check.need(args, "topic");
        String input = topic + "-input";
        String output = topic + "-output";
        long haltAfter = Long.parseLong(args.getOrDefault("halt-after", "-1"));
        int lines = Integer.parseInt(args.getOrDefault("lines", "0"));
        Path stateDir = Path.of(Check.need(args, "state-dir"));
        Files.createDirectories(stateDir);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, topic + "-wordcount");
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "10000");
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");

        AtomicLong split = new AtomicLong();
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(input)
                .peek((k, v) -> {
                    if (split.incrementAndGet() == haltAfter) {
                        // A crash, not a shutdown: nothing is closed or committed.
                        System.err.println("[java] halting after " + haltAfter + " records");
                        System.err.flush();
                        Runtime.getRuntime().halt(137);
                    }
                })
                .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split(" ")))
                .groupBy((k, w) -> w, Grouped.as("by-word"))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setUncaughtExceptionHandler(e -> {
            Check.log("stream thread failed: " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        if (haltAfter > 0) {
            Thread.sleep(120000);
            throw new AssertionError("processed only " + split.get() + " records in 120 s, never halted");
        }
        Map<String, Long> want = expected(lines);
        Map<String, List<Long>> seen = new HashMap<>();
        Properties c = Check.common(bootstrap);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", LongDeserializer.class.getName());
        c.put("isolation.level", "read_committed");
        try (KafkaConsumer<String, Long> reader = new KafkaConsumer<>(c)) {
            long deadline = System.currentTimeMillis() + 180000;
            List<TopicPartition> tps = null;
            while (true) {
                if (tps == null) {
                    var parts = reader.partitionsFor(output);
                    if (parts != null && !parts.isEmpty()) {
                        tps = new ArrayList<>();
                        for (var pi : parts) {
                            tps.add(new TopicPartition(output, pi.partition()));
                        }
                        reader.assign(tps);
                        reader.seekToBeginning(tps);
                    } else {
                        Thread.sleep(200);
                    }
                }
                if (tps != null) {
                    for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                        seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                    }
                }
                boolean done = !want.isEmpty();
                for (var e : want.entrySet()) {
                    List<Long> s = seen.get(e.getKey());
                    if (s == null || s.isEmpty() || s.get(s.size() - 1) < e.getValue()) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                Check.that(System.currentTimeMillis() < deadline, "output never reached the expected counts: "
                        + summarize(seen) + " want " + want + " (streams " + streams.state() + ")");
            }
        }
        streams.close(Duration.ofSeconds(20));
        for (var e : want.entrySet()) {
            List<Long> s = seen.get(e.getKey());
            for (int i = 0; i < s.size(); i++) {
                Check.equal((long) (i + 1), s.get(i), "count #" + i + " of " + e.getKey()
                        + " (exactly once: 1, 2, ..., n; got " + s.size() + " updates, last " + s.get(s.size() - 1) + ")");
            }
            Check.equal(e.getValue(), (long) s.size(), "updates of " + e.getKey());
        }
        Check.equal(want.keySet(), seen.keySet(), "words counted");
        summary.put("words", want.size());
        summary.put("alpha", want.get("alpha"));
    }

    static String summarize(Map<String, List<Long>> seen) {
        Map<String, Long> last = new HashMap<>();
        seen.forEach((k, v) -> last.put(k, v.get(v.size() - 1)));
        return last.toString();
    }
}
