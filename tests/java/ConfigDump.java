import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Prints the topic and broker configs a fresh broker describes, one per line:
 * `topic|broker NAME TYPE READ_ONLY SENSITIVE DEFAULT SYNONYMS` (tab-separated; SYNONYMS is
 * the comma-separated synonym names Kafka lists: for a topic config of a fresh topic, the
 * broker configs it falls back to; for a broker config, those other than itself). Run against Apache Kafka
 * it regenerates dataplane/src/api/kafka_configs.tsv; run against Twinlog, the Rust test
 * compares the two lists.
 *
 * java ConfigDump --bootstrap HOST:PORT
 */
public final class ConfigDump {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Check.args(argv, 0);
        String bootstrap = Check.need(args, "bootstrap");
        String topic = args.getOrDefault("topic", "config-dump");
        try (Admin admin = Admin.create(Check.common(bootstrap))) {
            if (!admin.listTopics().names().get().contains(topic)) {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            }
            String node = Integer.toString(admin.describeCluster().nodes().get().iterator().next().id());
            DescribeConfigsOptions opts = new DescribeConfigsOptions().includeSynonyms(true);
            ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, node);
            Map<ConfigResource, Config> all = admin.describeConfigs(List.of(tr, br), opts).all().get();
            print("topic", all.get(tr));
            print("broker", all.get(br));
        }
    }

    static void print(String kind, Config c) {
        List<ConfigEntry> entries = c.entries().stream()
                .sorted(Comparator.comparing(ConfigEntry::name)).collect(Collectors.toList());
        for (ConfigEntry e : entries) {
            // The default is the value of the DEFAULT_CONFIG synonym, when there is one.
            String dflt = e.synonyms().stream()
                    .filter(s -> s.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG)
                    .map(s -> s.value() == null ? "" : s.value()).findFirst()
                    .orElse(e.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG && e.value() != null ? e.value() : "\\N");
            // A topic config's synonyms are the broker configs it falls back to (some share
            // its name, e.g. compression.type); a broker config's, the others than itself.
            String syn = e.synonyms().stream().map(ConfigEntry.ConfigSynonym::name)
                    .filter(n -> kind.equals("topic") || !n.equals(e.name())).distinct()
                    .collect(Collectors.joining(","));
            System.out.println(String.join("\t", kind, e.name(), e.type().toString(),
                    Boolean.toString(e.isReadOnly()), Boolean.toString(e.isSensitive()),
                    dflt.replace("\t", " ").replace("\n", " "), syn));
        }
    }
}
