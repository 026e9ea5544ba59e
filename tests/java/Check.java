import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.function.BooleanSupplier;

/**
 * What the Java test clients share: arguments, client properties, checks that fail with a
 * message, bounded waits and the one-line JSON summary the Rust harness reads
 * (tests/support: the last stdout line that starts with '{').
 */
final class Check {
    private Check() {}

    /** `--name value` pairs after the scenario word. */
    static Map<String, String> args(String[] argv, int from) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = from; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + argv[i]);
            }
            m.put(argv[i].substring(2), argv[i + 1]);
        }
        return m;
    }

    static String need(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    static void that(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void equal(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    /** Polls `cond` every 100 ms until it holds or `timeoutMs` passes. */
    static void waitFor(BooleanSupplier cond, long timeoutMs, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(100);
        }
    }

    static void log(String msg) {
        System.err.println("[java] " + msg);
    }

    interface Scenario {
        void run(Map<String, String> args, Map<String, Object> summary) throws Exception;
    }

    /** Runs one scenario: prints the JSON summary and exits 0, or 1 with the error. */
    static void main(String scenarioName, Scenario s, String[] argv) {
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("scenario", scenarioName);
        int code = 0;
        try {
            s.run(args(argv, 1), summary);
            summary.put("ok", true);
        } catch (Throwable t) {
            t.printStackTrace();
            summary.put("ok", false);
            summary.put("error", t.toString());
            code = 1;
        }
        System.out.println(json(summary));
        System.out.flush();
        // Client threads (e.g. a Streams instance still closing) must not keep the JVM up.
        Runtime.getRuntime().halt(code);
    }

    static String json(Map<String, Object> m) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            b.append(quote(e.getKey())).append(':');
            Object v = e.getValue();
            if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else {
                b.append(quote(String.valueOf(v)));
            }
        }
        return b.append('}').toString();
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }
}
