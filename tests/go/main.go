// Command twinlog-go-client exercises a Kafka-compatible broker with franz-go
// (kgo + kadm) the way a real application would, and checks that the broker
// behaves like Apache Kafka.
//
//	go run . SCENARIO --bootstrap HOST:PORT --topic-prefix P [flags]
//
// Scenarios: produce-consume, groups, transactions, admin.
//
// Progress goes to stderr. The last stdout line is one JSON object:
// {"scenario":...,"ok":true,...} or {"scenario":...,"ok":false,"error":...}
// (exit status 1 on failure, 2 on bad usage).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type config struct {
	scenario  string
	bootstrap []string
	prefix    string
	timeout   time.Duration
	records   int
	codecs    []string
	logLevel  kgo.LogLevel
	balancer  string
}

type result map[string]any

var scenarios = map[string]func(context.Context, *config, result) error{
	"produce-consume": produceConsume,
	"groups":          groups,
	"transactions":    transactions,
	"admin":           admin,
}

func usage() {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: %s SCENARIO --bootstrap HOST:PORT --topic-prefix P [flags]\nscenarios: %s\n",
		os.Args[0], strings.Join(names, ", "))
}

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetOutput(os.Stderr)
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		usage()
		os.Exit(2)
	}
	cfg := &config{scenario: os.Args[1]}
	fn, ok := scenarios[cfg.scenario]
	if !ok {
		usage()
		os.Exit(2)
	}
	fs := flag.NewFlagSet(cfg.scenario, flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&cfg.prefix, "topic-prefix", "gotest", "prefix of every topic, group and transactional id")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "bound on the whole scenario")
	fs.IntVar(&cfg.records, "records", 2000, "records per producer (produce-consume)")
	codecs := fs.String("compression", "lz4,zstd", "comma-separated codecs for produce-consume, one topic per codec (none|gzip|snappy|lz4|zstd)")
	fs.StringVar(&cfg.balancer, "balancer", "cooperative-sticky", "group balancer for groups: cooperative-sticky|sticky|range|roundrobin")
	logLevel := fs.String("log-level", "warn", "franz-go log level on stderr: none|error|warn|info|debug")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	cfg.bootstrap = strings.Split(*bootstrap, ",")
	if _, err := cfg.groupBalancer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.codecs = strings.Split(*codecs, ",")
	for _, c := range cfg.codecs {
		if _, err := parseCodec(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	switch *logLevel {
	case "none":
		cfg.logLevel = kgo.LogLevelNone
	case "error":
		cfg.logLevel = kgo.LogLevelError
	case "warn":
		cfg.logLevel = kgo.LogLevelWarn
	case "info":
		cfg.logLevel = kgo.LogLevelInfo
	case "debug":
		cfg.logLevel = kgo.LogLevelDebug
	default:
		fmt.Fprintf(os.Stderr, "bad --log-level %q\n", *logLevel)
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	res := result{}
	start := time.Now()
	err := fn(ctx, cfg, res)
	cancel()
	res["scenario"] = cfg.scenario
	res["elapsed_ms"] = time.Since(start).Milliseconds()
	if err != nil {
		res["ok"] = false
		res["error"] = err.Error()
		log.Printf("FAIL: %v", err)
	} else {
		res["ok"] = true
		log.Printf("PASS")
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

// ---------------------------------------------------------------- helpers

func progress(format string, args ...any) { log.Printf(format, args...) }

func (c *config) name(parts ...string) string {
	return c.prefix + "-" + strings.Join(parts, "-")
}

func (c *config) client(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(c.bootstrap...),
		kgo.ClientID("twinlog-go-" + c.scenario),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, c.logLevel, func() string {
			return time.Now().Format("15:04:05.000000") + " kgo "
		})),
	}
	return kgo.NewClient(append(base, opts...)...)
}

func (c *config) admin() (*kadm.Client, *kgo.Client, error) {
	cl, err := c.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

func (c *config) groupBalancer() (kgo.GroupBalancer, error) {
	switch c.balancer {
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	case "range":
		return kgo.RangeBalancer(), nil
	case "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	}
	return nil, fmt.Errorf("unknown --balancer %q", c.balancer)
}

func parseCodec(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown codec %q", s)
}

// codecAttr is the RecordBatch attributes compression code of a codec name.
func codecAttr(s string) uint8 {
	return map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[s]
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil {
		return fmt.Errorf("CreateTopics %s (%d partitions): %w %s", topic, partitions, err, resp.ErrMessage)
	}
	if resp.NumPartitions != partitions {
		return fmt.Errorf("CreateTopics %s: response NumPartitions=%d, want %d", topic, resp.NumPartitions, partitions)
	}
	return waitTopic(ctx, adm, topic, int(partitions))
}

// waitTopic waits (bounded by ctx) until metadata shows the topic with the
// given partition count and a leader for every partition.
func waitTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	var last string
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			td, ok := tds[topic]
			switch {
			case !ok:
				last = "topic absent from Metadata response"
			case td.Err != nil:
				last = "topic error " + td.Err.Error()
			case len(td.Partitions) != partitions:
				last = fmt.Sprintf("%d partitions in metadata, want %d", len(td.Partitions), partitions)
			default:
				ready := true
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						ready = false
						last = fmt.Sprintf("partition %d leader=%d err=%v", p.Partition, p.Leader, p.Err)
					}
				}
				if ready {
					return nil
				}
			}
		} else {
			last = err.Error()
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for topic %s in Metadata: %s: %w", topic, last, err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitFor polls cond every 50ms until it returns "" (done) or ctx ends; the
// string cond returns describes what is still missing.
func waitFor(ctx context.Context, what string, cond func() string) error {
	for {
		missing := cond()
		if missing == "" {
			return nil
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for %s: %s: %w", what, missing, err)
		}
	}
}

func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	return listOffsets(ctx, "ListEndOffsets", topic, func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) })
}

func startOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	return listOffsets(ctx, "ListStartOffsets", topic, func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) })
}

func listOffsets(_ context.Context, what, topic string, fn func() (kadm.ListedOffsets, error)) (map[int32]int64, error) {
	lo, err := fn()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, topic, err)
	}
	if err := lo.Error(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, topic, err)
	}
	m := map[int32]int64{}
	for p, o := range lo[topic] {
		m[p] = o.Offset
	}
	return m, nil
}

// produceAll produces rs asynchronously and flushes; it returns the first
// produce error.
func produceAll(ctx context.Context, cl *kgo.Client, rs []*kgo.Record) error {
	var mu sync.Mutex
	var first error
	failed := 0
	for _, r := range rs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = fmt.Errorf("produce to %s[%d] key %q: %w", r.Topic, r.Partition, r.Key, err)
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return fmt.Errorf("%d/%d records failed, first: %w", failed, len(rs), first)
	}
	return nil
}

// poll polls once with a short bound and returns records and the first
// non-timeout fetch error.
func poll(ctx context.Context, cl *kgo.Client, d time.Duration) ([]*kgo.Record, error) {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fs := cl.PollFetches(pctx)
	if fs.IsClientClosed() {
		return nil, kgo.ErrClientClosed
	}
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		if ferr == nil {
			ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
		}
	})
	return fs.Records(), ferr
}

func headersEqual(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func fmtHeaders(hs []kgo.RecordHeader) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, fmt.Sprintf("%s=%q", h.Key, h.Value))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ---------------------------------------------------------------- produce-consume

type sentRecord struct {
	producer  string
	seq       int
	value     []byte
	headers   []kgo.RecordHeader
	partition int32
	offset    int64
}

func produceConsume(ctx context.Context, c *config, res result) error {
	adm, acl, err := c.admin()
	if err != nil {
		return err
	}
	defer acl.Close()
	total := 0
	for _, codecName := range c.codecs {
		n, err := produceConsumeCodec(ctx, c, adm, codecName)
		if err != nil {
			return fmt.Errorf("[%s] %w", codecName, err)
		}
		total += n
		res["consumed_"+codecName] = n
	}
	res["consumed"] = total
	res["codecs"] = c.codecs
	return largeRecords(ctx, c, adm)
}

// largeRecords checks the broker's message.max.bytes limit: a 900 KiB record
// is accepted and read back intact, a 1.5 MiB one is refused with
// MESSAGE_TOO_LARGE.
func largeRecords(ctx context.Context, c *config, adm *kadm.Client) error {
	topic := c.name("pc", "large")
	progress("large records on %s", topic)
	if err := createTopic(ctx, adm, topic, 1, nil); err != nil {
		return err
	}
	cl, err := c.client(
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(4<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordRetries(2),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	pseudoRandom := func(n int, seed uint64) []byte {
		b := make([]byte, n)
		x := seed | 1
		for i := range b {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			b[i] = byte(x)
		}
		return b
	}
	big := pseudoRandom(900<<10, 7)
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("big"), Value: big}).FirstErr(); err != nil {
		return fmt.Errorf("producing a 900 KiB record: %w", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Key: []byte("huge"), Value: pseudoRandom(1536<<10, 9)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		return fmt.Errorf("producing a 1.5 MiB record (message.max.bytes is 1 MiB by default): err=%v, want MESSAGE_TOO_LARGE", err)
	}
	cons, err := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cons.Close()
	for {
		rs, err := poll(ctx, cons, 2*time.Second)
		if err != nil {
			return fmt.Errorf("consuming the 900 KiB record: %w", err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("consuming the 900 KiB record: %w", ctx.Err())
		}
		if len(rs) == 0 {
			continue
		}
		if r := rs[0]; string(r.Key) != "big" || r.Offset != 0 || !bytes.Equal(r.Value, big) {
			return fmt.Errorf("large record read back as key %q offset %d, %d bytes (want big, 0, %d bytes, equal)", r.Key, r.Offset, len(r.Value), len(big))
		}
		return nil
	}
}

func produceConsumeCodec(ctx context.Context, c *config, adm *kadm.Client, codecName string) (int, error) {
	codec, _ := parseCodec(codecName)
	topic := c.name("pc", codecName)
	const partitions = 3
	progress("creating topic %s with %d partitions", topic, partitions)
	if err := createTopic(ctx, adm, topic, partitions, nil); err != nil {
		return 0, err
	}

	startTime := time.Now().Add(-time.Minute)
	sent := map[string]*sentRecord{}
	var sentMu sync.Mutex
	for _, mode := range []string{"plain", "idempotent"} {
		opts := []kgo.Opt{
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(codec),
			kgo.ProducerLinger(5 * time.Millisecond),
		}
		if mode == "plain" {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl, err := c.client(opts...)
		if err != nil {
			return 0, err
		}
		progress("producing %d keyed records (%s, %s, acks=all)", c.records, mode, codecName)
		var mu sync.Mutex
		var first error
		for i := 0; i < c.records; i++ {
			key := fmt.Sprintf("%s-key-%05d", mode, i)
			value := fmt.Appendf(nil, "value %s %d %s", mode, i, strings.Repeat("twinlog ", i%17))
			headers := []kgo.RecordHeader{
				{Key: "producer", Value: []byte(mode)},
				{Key: "seq", Value: []byte(strconv.Itoa(i))},
				{Key: "empty", Value: []byte{}},
			}
			s := &sentRecord{producer: mode, seq: i, value: value, headers: headers, partition: -1, offset: -1}
			sentMu.Lock()
			sent[key] = s
			sentMu.Unlock()
			cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: value, Headers: headers}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if first == nil {
						first = fmt.Errorf("produce %s key %s: %w", mode, key, err)
					}
					return
				}
				sentMu.Lock()
				s.partition, s.offset = r.Partition, r.Offset
				sentMu.Unlock()
			})
		}
		if err := cl.Flush(ctx); err != nil {
			cl.Close()
			return 0, fmt.Errorf("flush %s producer: %w", mode, err)
		}
		cl.Close()
		mu.Lock()
		err = first
		mu.Unlock()
		if err != nil {
			return 0, err
		}
	}

	// The acknowledged offsets must be exactly 0..count-1 in every partition.
	acked := map[int32][]int64{}
	for _, s := range sent {
		acked[s.partition] = append(acked[s.partition], s.offset)
	}
	for p, offs := range acked {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, o := range offs {
			if o != int64(i) {
				return 0, fmt.Errorf("acknowledged offsets of partition %d are not 0..%d: position %d has offset %d", p, len(offs)-1, i, o)
			}
		}
	}
	if len(acked) != partitions {
		return 0, fmt.Errorf("keyed records landed in %d partitions, want %d", len(acked), partitions)
	}

	ends, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return 0, err
	}
	starts, err := startOffsets(ctx, adm, topic)
	if err != nil {
		return 0, err
	}
	for p := int32(0); p < partitions; p++ {
		if starts[p] != 0 || ends[p] != int64(len(acked[p])) {
			return 0, fmt.Errorf("partition %d: ListOffsets start=%d end=%d, want 0 and %d", p, starts[p], ends[p], len(acked[p]))
		}
	}

	progress("consuming %s from the start", topic)
	cl, err := c.client(
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	want := len(sent)
	got := map[string]bool{}
	nextOffset := map[int32]int64{}
	lastSeq := map[string]int{} // partition/producer -> last seq
	compressed := 0
	for len(got) < want {
		rs, err := poll(ctx, cl, 2*time.Second)
		if err != nil {
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("consumed %d/%d records before the deadline: %w", len(got), want, ctx.Err())
		}
		for _, r := range rs {
			key := string(r.Key)
			s, ok := sent[key]
			if !ok {
				return 0, fmt.Errorf("consumed unknown key %q at %d/%d", key, r.Partition, r.Offset)
			}
			if got[key] {
				return 0, fmt.Errorf("consumed key %q twice (at %d/%d)", key, r.Partition, r.Offset)
			}
			got[key] = true
			if r.Partition != s.partition || r.Offset != s.offset {
				return 0, fmt.Errorf("key %q consumed at %d/%d but acknowledged at %d/%d", key, r.Partition, r.Offset, s.partition, s.offset)
			}
			if r.Offset != nextOffset[r.Partition] {
				return 0, fmt.Errorf("partition %d: offsets not contiguous: got %d after %d", r.Partition, r.Offset, nextOffset[r.Partition]-1)
			}
			nextOffset[r.Partition] = r.Offset + 1
			if !bytes.Equal(r.Value, s.value) {
				return 0, fmt.Errorf("key %q: value %q, want %q", key, r.Value, s.value)
			}
			if !headersEqual(r.Headers, s.headers) {
				return 0, fmt.Errorf("key %q: headers %s, want %s", key, fmtHeaders(r.Headers), fmtHeaders(s.headers))
			}
			ordKey := fmt.Sprintf("%d/%s", r.Partition, s.producer)
			if last, ok := lastSeq[ordKey]; ok && s.seq <= last {
				return 0, fmt.Errorf("partition %d: %s record seq %d consumed after seq %d (order broken)", r.Partition, s.producer, s.seq, last)
			}
			lastSeq[ordKey] = s.seq
			switch ct := r.Attrs.CompressionType(); ct {
			case codecAttr(codecName):
				compressed++
			case 0: // franz-go sends a batch uncompressed when compressing does not shrink it
			default:
				return 0, fmt.Errorf("key %q: batch compression type %d, want %d (%s) or 0", key, ct, codecAttr(codecName), codecName)
			}
			if r.Attrs.TimestampType() != 0 {
				return 0, fmt.Errorf("key %q: timestamp type %d, want 0 (CreateTime)", key, r.Attrs.TimestampType())
			}
			if r.Timestamp.Before(startTime) || r.Timestamp.After(time.Now().Add(time.Minute)) {
				return 0, fmt.Errorf("key %q: timestamp %v out of range", key, r.Timestamp)
			}
			if s.producer == "idempotent" && r.ProducerID < 0 {
				return 0, fmt.Errorf("key %q from the idempotent producer has producer id %d", key, r.ProducerID)
			}
			if s.producer == "plain" && r.ProducerID != -1 {
				return 0, fmt.Errorf("key %q from the non-idempotent producer has producer id %d, want -1", key, r.ProducerID)
			}
			if r.Attrs.IsTransactional() || r.Attrs.IsControl() {
				return 0, fmt.Errorf("key %q: unexpected transactional/control attributes", key)
			}
		}
	}
	for p := int32(0); p < partitions; p++ {
		if nextOffset[p] != ends[p] {
			return 0, fmt.Errorf("partition %d: consumed up to %d, end offset %d", p, nextOffset[p], ends[p])
		}
	}
	if c.codecs != nil && codecName != "none" && compressed == 0 {
		return 0, fmt.Errorf("no consumed record came from a %s-compressed batch", codecName)
	}
	progress("consumed and verified %d records (%d from %s batches)", len(got), compressed, codecName)

	// A second reader starts in the middle of every partition (inside a
	// batch, usually) with fetch limits far below one batch's size: Kafka
	// still returns whole batches and the client drops the records before
	// the requested offset.
	byOffset := map[int32]map[int64]*sentRecord{}
	for _, s := range sent {
		if byOffset[s.partition] == nil {
			byOffset[s.partition] = map[int64]*sentRecord{}
		}
		byOffset[s.partition][s.offset] = s
	}
	from := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		next[p] = ends[p]/3 + 1
		from[p] = kgo.NewOffset().At(next[p])
	}
	progress("re-reading %s from offsets %v with 256-byte fetch limits", topic, next)
	cl2, err := c.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxBytes(256),
		kgo.FetchMaxPartitionBytes(256),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return 0, err
	}
	defer cl2.Close()
	remaining := func() int64 {
		var n int64
		for p := int32(0); p < partitions; p++ {
			n += ends[p] - next[p]
		}
		return n
	}
	for remaining() > 0 {
		rs, err := poll(ctx, cl2, 2*time.Second)
		if err != nil {
			return 0, fmt.Errorf("re-read with small fetch limits: %w", err)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("re-read with small fetch limits: %d records left at the deadline (positions %v): %w", remaining(), next, ctx.Err())
		}
		for _, r := range rs {
			if r.Offset != next[r.Partition] {
				return 0, fmt.Errorf("re-read partition %d from the middle: got offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			s := byOffset[r.Partition][r.Offset]
			if s == nil || string(r.Key) != fmt.Sprintf("%s-key-%05d", s.producer, s.seq) || !bytes.Equal(r.Value, s.value) {
				return 0, fmt.Errorf("re-read %d/%d: key %q value %q does not match what was acknowledged there", r.Partition, r.Offset, r.Key, r.Value)
			}
		}
	}
	return len(got), nil
}

// ---------------------------------------------------------------- groups

type member struct {
	name string
	cl   *kgo.Client

	mu          sync.Mutex
	assigned    map[int32]bool
	assignments int // number of OnPartitionsAssigned callbacks
	revocations int
	consumed    int
	commits     int
	commitErrs  []string
	err         error

	stop chan struct{}
	done chan struct{}
}

func (m *member) assignment() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (m *member) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// retriableCommitErr is a commit error that Kafka legitimately returns while a
// group rebalances; an application retries or re-consumes.
func retriableCommitErr(err error) bool {
	return errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.UnknownMemberID)
}

func startMember(ctx context.Context, c *config, name, group, topic string, seen func(*kgo.Record)) (*member, error) {
	m := &member{name: name, assigned: map[int32]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	balancer, err := c.groupBalancer()
	if err != nil {
		return nil, err
	}
	cl, err := c.client(
		kgo.ConsumerGroup(group),
		kgo.Balancers(balancer),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, as map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.assignments++
			for _, p := range as[topic] {
				m.assigned[p] = true
			}
			progress("%s: assigned %v", name, as[topic])
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, rs map[string][]int32) {
			// The documented pattern with manual commits: commit what
			// was processed before giving partitions away.
			err := cl.CommitUncommittedOffsets(ctx)
			m.mu.Lock()
			defer m.mu.Unlock()
			m.revocations++
			for _, p := range rs[topic] {
				delete(m.assigned, p)
			}
			if err != nil {
				m.commitErrs = append(m.commitErrs, "on revoke: "+err.Error())
				if !retriableCommitErr(err) && m.err == nil {
					m.err = fmt.Errorf("%s: commit on revoke: %w", name, err)
				}
			}
			progress("%s: revoked %v (commit err: %v)", name, rs[topic], err)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ls map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ls[topic] {
				delete(m.assigned, p)
			}
			if m.err == nil {
				m.err = fmt.Errorf("%s: partitions lost %v (session expired or fenced)", name, ls[topic])
			}
		}),
	)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			rs, err := poll(ctx, cl, time.Second)
			if err != nil {
				if errors.Is(err, kgo.ErrClientClosed) {
					return
				}
				m.mu.Lock()
				if m.err == nil {
					m.err = fmt.Errorf("%s: %w", name, err)
				}
				m.mu.Unlock()
				return
			}
			for _, r := range rs {
				seen(r)
			}
			if len(rs) == 0 {
				continue
			}
			cerr := cl.CommitUncommittedOffsets(ctx)
			m.mu.Lock()
			m.consumed += len(rs)
			m.commits++
			if cerr != nil {
				m.commitErrs = append(m.commitErrs, cerr.Error())
				if !retriableCommitErr(cerr) && m.err == nil && ctx.Err() == nil {
					m.err = fmt.Errorf("%s: CommitUncommittedOffsets: %w", name, cerr)
				}
			}
			m.mu.Unlock()
		}
	}()
	return m, nil
}

// stopPolling ends the member's poll loop (bounded by ctx).
func (m *member) stopPolling(ctx context.Context) error {
	close(m.stop)
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: poll loop did not stop: %w", m.name, ctx.Err())
	}
}

func groups(ctx context.Context, c *config, res result) error {
	adm, acl, err := c.admin()
	if err != nil {
		return err
	}
	defer acl.Close()
	topic := c.name("groups", c.balancer)
	group := c.name("group", c.balancer)
	const partitions = 4
	const perPhase = 400
	progress("creating topic %s with %d partitions", topic, partitions)
	if err := createTopic(ctx, adm, topic, partitions, nil); err != nil {
		return err
	}
	prod, err := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	produced := 0
	producePhase := func(phase int) error {
		var rs []*kgo.Record
		for i := 0; i < perPhase; i++ {
			rs = append(rs, &kgo.Record{
				Key:       fmt.Appendf(nil, "phase%d-%04d", phase, i),
				Value:     fmt.Appendf(nil, "v%d-%d", phase, i),
				Partition: int32(i % partitions),
			})
		}
		progress("producing phase %d (%d records)", phase, perPhase)
		if err := produceAll(ctx, prod, rs); err != nil {
			return err
		}
		produced += perPhase
		return nil
	}
	var seenMu sync.Mutex
	seen := map[string]int{}
	seenBy := map[string]map[string]int{} // member -> phase -> count
	seenFn := func(name string) func(*kgo.Record) {
		return func(r *kgo.Record) {
			seenMu.Lock()
			defer seenMu.Unlock()
			seen[string(r.Key)]++
			if seenBy[name] == nil {
				seenBy[name] = map[string]int{}
			}
			seenBy[name][strings.SplitN(string(r.Key), "-", 2)[0]]++
		}
	}
	allSeen := func() string {
		seenMu.Lock()
		defer seenMu.Unlock()
		if len(seen) < produced {
			return fmt.Sprintf("%d/%d distinct records consumed", len(seen), produced)
		}
		return ""
	}

	if err := producePhase(1); err != nil {
		return err
	}
	a, err := startMember(ctx, c, "member-a", group, topic, seenFn("member-a"))
	if err != nil {
		return err
	}
	defer a.cl.Close()
	progress("member-a joined; waiting until it owns all %d partitions and consumes", partitions)
	if err := waitFor(ctx, "member-a to consume", func() string {
		if e := a.failure(); e != nil {
			return e.Error()
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.assigned) != partitions || a.consumed == 0 {
			return fmt.Sprintf("member-a owns %d partitions, consumed %d", len(a.assigned), a.consumed)
		}
		return ""
	}); err != nil {
		return err
	}
	if err := a.failure(); err != nil {
		return err
	}

	b, err := startMember(ctx, c, "member-b", group, topic, seenFn("member-b"))
	if err != nil {
		return err
	}
	defer b.cl.Close()
	progress("member-b joined; waiting for the rebalance to split the partitions")
	if err := waitFor(ctx, "rebalance to two members", func() string {
		for _, m := range []*member{a, b} {
			if e := m.failure(); e != nil {
				return e.Error()
			}
		}
		pa, pb := a.assignment(), b.assignment()
		union := map[int32]bool{}
		for _, p := range append(append([]int32{}, pa...), pb...) {
			union[p] = true
		}
		if len(pa) != 2 || len(pb) != 2 || len(union) != partitions {
			return fmt.Sprintf("member-a owns %v, member-b owns %v", pa, pb)
		}
		return ""
	}); err != nil {
		return err
	}
	res["split_a"] = a.assignment()
	res["split_b"] = b.assignment()

	if err := producePhase(2); err != nil {
		return err
	}
	if err := waitFor(ctx, "phases 1-2 consumed by both members", func() string {
		for _, m := range []*member{a, b} {
			if e := m.failure(); e != nil {
				return e.Error()
			}
		}
		if s := allSeen(); s != "" {
			return s
		}
		seenMu.Lock()
		defer seenMu.Unlock()
		if seenBy["member-b"]["phase2"] == 0 || seenBy["member-a"]["phase2"] == 0 {
			return fmt.Sprintf("phase2 records consumed: member-a %d, member-b %d", seenBy["member-a"]["phase2"], seenBy["member-b"]["phase2"])
		}
		return ""
	}); err != nil {
		return err
	}

	progress("member-b commits and leaves the group")
	if err := b.stopPolling(ctx); err != nil {
		return err
	}
	if err := b.cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("member-b final commit: %w", err)
	}
	b.cl.Close() // leaves the group (LeaveGroup)
	if err := b.failure(); err != nil {
		return err
	}
	if err := waitFor(ctx, "member-a to take over all partitions", func() string {
		if e := a.failure(); e != nil {
			return e.Error()
		}
		if pa := a.assignment(); len(pa) != partitions {
			return fmt.Sprintf("member-a owns %v", pa)
		}
		return ""
	}); err != nil {
		return err
	}

	if err := producePhase(3); err != nil {
		return err
	}
	if err := waitFor(ctx, "all records consumed", func() string {
		if e := a.failure(); e != nil {
			return e.Error()
		}
		return allSeen()
	}); err != nil {
		return err
	}
	if err := a.stopPolling(ctx); err != nil {
		return err
	}
	if err := a.cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("member-a final commit: %w", err)
	}
	if err := a.failure(); err != nil {
		return err
	}

	ends, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}
	checkCommitted := func(when string) error {
		fo, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return fmt.Errorf("FetchOffsets %s (%s): %w", group, when, err)
		}
		if err := fo.Error(); err != nil {
			return fmt.Errorf("FetchOffsets %s (%s): %w", group, when, err)
		}
		for p := int32(0); p < partitions; p++ {
			o, ok := fo.Lookup(topic, p)
			if !ok {
				return fmt.Errorf("FetchOffsets (%s): no committed offset for %s[%d]", when, topic, p)
			}
			if o.At != ends[p] {
				return fmt.Errorf("FetchOffsets (%s): %s[%d] committed %d, end offset %d", when, topic, p, o.At, ends[p])
			}
		}
		return nil
	}
	if err := checkCommitted("member-a still in the group"); err != nil {
		return err
	}

	describe := func() (kadm.DescribedGroup, error) {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return kadm.DescribedGroup{}, fmt.Errorf("DescribeGroups: %w", err)
		}
		d, ok := dg[group]
		if !ok {
			return d, fmt.Errorf("DescribeGroups: group %s missing from response", group)
		}
		if d.Err != nil {
			return d, fmt.Errorf("DescribeGroups %s: %w %s", group, d.Err, d.ErrMessage)
		}
		return d, nil
	}
	d, err := describe()
	if err != nil {
		return err
	}
	assigned := d.AssignedPartitions()
	if d.State != "Stable" || len(d.Members) != 1 || d.ProtocolType != "consumer" || d.Protocol != c.balancer ||
		len(assigned[topic]) != partitions {
		return fmt.Errorf("DescribeGroups with one member: state=%q members=%d protocolType=%q protocol=%q assigned=%v; want Stable, 1, consumer, %s, all %d partitions",
			d.State, len(d.Members), d.ProtocolType, d.Protocol, assigned, c.balancer, partitions)
	}
	if m := d.Members[0]; m.ClientID != "twinlog-go-groups" || m.MemberID == "" {
		return fmt.Errorf("DescribeGroups member: clientID=%q memberID=%q", m.ClientID, m.MemberID)
	}
	res["protocol"] = d.Protocol
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("ListGroups: %w", err)
	}
	if l, ok := lg[group]; !ok || l.ProtocolType != "consumer" || l.State != "Stable" {
		return fmt.Errorf("ListGroups: group %s: present=%v %+v; want consumer, Stable", group, ok, l)
	}
	dr, err := adm.DeleteGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("DeleteGroups (non-empty): %w", err)
	}
	if e := dr[group].Err; !errors.Is(e, kerr.NonEmptyGroup) {
		return fmt.Errorf("DeleteGroups of a group with a member: err=%v, want NON_EMPTY_GROUP", e)
	}

	progress("member-a leaves the group")
	a.cl.Close()
	if err := waitFor(ctx, "group to become Empty", func() string {
		d, err := describe()
		if err != nil {
			return err.Error()
		}
		if d.State != "Empty" || len(d.Members) != 0 {
			return fmt.Sprintf("state=%q members=%d", d.State, len(d.Members))
		}
		return ""
	}); err != nil {
		return err
	}
	if err := checkCommitted("group empty"); err != nil {
		return err
	}
	lg, err = adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("ListGroups: %w", err)
	}
	if l, ok := lg[group]; !ok || l.State != "Empty" {
		return fmt.Errorf("ListGroups after members left: group %s present=%v %+v; want Empty", group, ok, l)
	}
	dr, err = adm.DeleteGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("DeleteGroups: %w", err)
	}
	if err := dr.Error(); err != nil {
		return fmt.Errorf("DeleteGroups %s: %w", group, err)
	}
	lg, err = adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("ListGroups: %w", err)
	}
	if _, ok := lg[group]; ok {
		return fmt.Errorf("ListGroups still lists %s after DeleteGroups", group)
	}
	fo, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fo.Error()
	}
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("FetchOffsets after DeleteGroups: %w", err)
	}
	if n := len(fo[topic]); n != 0 {
		return fmt.Errorf("FetchOffsets after DeleteGroups still returns %d committed offsets", n)
	}

	seenMu.Lock()
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	res["produced"] = produced
	res["consumed_distinct"] = len(seen)
	res["redelivered"] = dups
	res["consumed_by"] = seenBy
	seenMu.Unlock()
	a.mu.Lock()
	b.mu.Lock()
	res["commits"] = a.commits + b.commits
	res["retriable_commit_errors"] = append(append([]string{}, a.commitErrs...), b.commitErrs...)
	b.mu.Unlock()
	a.mu.Unlock()
	return nil
}

// ---------------------------------------------------------------- transactions

// writeSentinels produces one non-transactional record per partition; a reader
// that has seen every sentinel has read everything before them.
func writeSentinels(ctx context.Context, c *config, topic string, partitions int32) error {
	cl, err := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		rs = append(rs, &kgo.Record{Key: []byte("sentinel"), Value: fmt.Appendf(nil, "sentinel-%d", p), Partition: p})
	}
	return produceAll(ctx, cl, rs)
}

// readToSentinels reads a topic from the start with the given isolation level
// until it has seen the sentinel of every partition; it returns the other
// records.
func readToSentinels(ctx context.Context, c *config, topic string, partitions int32, iso kgo.IsolationLevel) ([]*kgo.Record, error) {
	cl, err := c.client(
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	sentinels := map[int32]bool{}
	var out []*kgo.Record
	for len(sentinels) < int(partitions) {
		rs, err := poll(ctx, cl, 2*time.Second)
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: saw %d/%d sentinels and %d records before the deadline: %w", topic, len(sentinels), partitions, len(out), ctx.Err())
		}
		for _, r := range rs {
			if string(r.Key) == "sentinel" {
				sentinels[r.Partition] = true
				continue
			}
			if sentinels[r.Partition] {
				return nil, fmt.Errorf("%s[%d]: record %q at offset %d after the sentinel", topic, r.Partition, r.Key, r.Offset)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func transactions(ctx context.Context, c *config, res result) error {
	adm, acl, err := c.admin()
	if err != nil {
		return err
	}
	defer acl.Close()
	const partitions = 3
	topic := c.name("txn")
	progress("creating topic %s", topic)
	if err := createTopic(ctx, adm, topic, partitions, nil); err != nil {
		return err
	}

	txid := c.name("txn-producer")
	prod, err := c.client(
		kgo.TransactionalID(txid),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.TransactionTimeout(30*time.Second),
	)
	if err != nil {
		return err
	}
	defer prod.Close()
	type txn struct {
		name   string
		commit bool
	}
	plan := []txn{{"t1", true}, {"t2", false}, {"t3", true}}
	markers := 0
	for _, t := range plan {
		progress("transaction %s: 100 records, then %s", t.name, map[bool]string{true: "commit", false: "abort"}[t.commit])
		if err := prod.BeginTransaction(); err != nil {
			return fmt.Errorf("BeginTransaction %s: %w", t.name, err)
		}
		var mu sync.Mutex
		touched := map[int32]bool{}
		txnFirst := map[int32]int64{}
		var first error
		for i := 0; i < 100; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "%s-%03d", t.name, i), Value: fmt.Appendf(nil, "%s value %d", t.name, i)}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = fmt.Errorf("transaction %s: produce %s: %w", t.name, r.Key, err)
				}
				touched[r.Partition] = true
				if o, ok := txnFirst[r.Partition]; err == nil && (!ok || r.Offset < o) {
					txnFirst[r.Partition] = r.Offset
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			return fmt.Errorf("transaction %s: flush: %w", t.name, err)
		}
		mu.Lock()
		err := first
		markers += len(touched)
		firstOff := map[int32]int64{}
		for p, o := range txnFirst {
			firstOff[p] = o
		}
		mu.Unlock()
		if err != nil {
			return err
		}
		// While the transaction is open, the last stable offset of every
		// partition it wrote is the offset of its first record there.
		lso, err := listOffsets(ctx, "ListCommittedOffsets", topic, func() (kadm.ListedOffsets, error) { return adm.ListCommittedOffsets(ctx, topic) })
		if err != nil {
			return err
		}
		for p, o := range firstOff {
			if lso[p] != o {
				return fmt.Errorf("transaction %s open: last stable offset of partition %d is %d, want %d (its first record there)", t.name, p, lso[p], o)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(t.commit)); err != nil {
			return fmt.Errorf("EndTransaction %s (commit=%v): %w", t.name, t.commit, err)
		}
	}
	if err := writeSentinels(ctx, c, topic, partitions); err != nil {
		return err
	}

	progress("read_committed consumer")
	rc, err := readToSentinels(ctx, c, topic, partitions, kgo.ReadCommitted())
	if err != nil {
		return err
	}
	keys := map[string]bool{}
	var pid int64 = -2
	for _, r := range rc {
		k := string(r.Key)
		if keys[k] {
			return fmt.Errorf("read_committed: key %s twice", k)
		}
		keys[k] = true
		if strings.HasPrefix(k, "t2-") {
			return fmt.Errorf("read_committed consumer saw aborted record %s at %d/%d", k, r.Partition, r.Offset)
		}
		if !r.Attrs.IsTransactional() {
			return fmt.Errorf("record %s: batch not marked transactional", k)
		}
		if pid == -2 {
			pid = r.ProducerID
		} else if r.ProducerID != pid {
			return fmt.Errorf("record %s: producer id %d, others %d", k, r.ProducerID, pid)
		}
	}
	if len(rc) != 200 {
		return fmt.Errorf("read_committed consumer saw %d records, want exactly 200", len(rc))
	}
	res["read_committed"] = len(rc)

	progress("read_uncommitted consumer")
	ru, err := readToSentinels(ctx, c, topic, partitions, kgo.ReadUncommitted())
	if err != nil {
		return err
	}
	if len(ru) != 300 {
		return fmt.Errorf("read_uncommitted consumer saw %d records, want 300 (aborted included)", len(ru))
	}
	res["read_uncommitted"] = len(ru)

	ends, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if want := int64(300 + markers + partitions); sum != want {
		return fmt.Errorf("sum of end offsets %d, want %d (300 records + %d transaction markers + %d sentinels)", sum, want, markers, partitions)
	}
	lso, err := listOffsets(ctx, "ListCommittedOffsets", topic, func() (kadm.ListedOffsets, error) { return adm.ListCommittedOffsets(ctx, topic) })
	if err != nil {
		return err
	}
	for p, e := range ends {
		if lso[p] != e {
			return fmt.Errorf("partition %d: last stable offset %d != high watermark %d with no open transaction", p, lso[p], e)
		}
	}
	prod.Close()

	if err := groupTransact(ctx, c, adm, res); err != nil {
		return err
	}
	if err := fencing(ctx, c, adm, res); err != nil {
		return err
	}

	// Checked last so that a broker without DescribeTransactions still runs
	// the checks above.
	progress("DescribeTransactions %s", txid)
	dt, err := adm.DescribeTransactions(ctx, txid)
	if err != nil {
		return fmt.Errorf("DescribeTransactions: %w", err)
	}
	if d, ok := dt[txid]; !ok || d.Err != nil || d.State != "CompleteCommit" || d.ProducerID != pid {
		return fmt.Errorf("DescribeTransactions %s: present=%v state=%q pid=%d err=%v; want CompleteCommit, pid %d", txid, ok, d.State, d.ProducerID, d.Err, pid)
	}
	return nil
}

func groupTransact(ctx context.Context, c *config, adm *kadm.Client, res result) error {
	const partitions = 3
	const n = 150
	in, out := c.name("eos-in"), c.name("eos-out")
	group := c.name("eos-group")
	for _, t := range []string{in, out} {
		progress("creating topic %s", t)
		if err := createTopic(ctx, adm, t, partitions, nil); err != nil {
			return err
		}
	}
	prod, err := c.client(kgo.DefaultProduceTopic(in))
	if err != nil {
		return err
	}
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "in-%03d", i), Value: fmt.Appendf(nil, "input %d", i)})
	}
	progress("producing %d input records to %s", n, in)
	err = produceAll(ctx, prod, rs)
	prod.Close()
	if err != nil {
		return err
	}

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(c.bootstrap...),
		kgo.ClientID("twinlog-go-"+c.scenario),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, c.logLevel, func() string {
			return time.Now().Format("15:04:05.000000") + " kgo-eos "
		})),
		kgo.TransactionalID(c.name("eos-producer")),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.DefaultProduceTopic(out),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	done := map[string]bool{}
	rounds, aborted := 0, 0
	progress("consume-transform-produce %s -> %s in group %s", in, out, group)
	for len(done) < n {
		if ctx.Err() != nil {
			return fmt.Errorf("transformed %d/%d records before the deadline: %w", len(done), n, ctx.Err())
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollRecords(pctx, 40)
		cancel()
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("session fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("session Begin: %w", err)
		}
		var mu sync.Mutex
		var first error
		for _, r := range recs {
			sess.Produce(ctx, &kgo.Record{
				Key:     r.Key,
				Value:   append([]byte("transformed: "), r.Value...),
				Headers: []kgo.RecordHeader{{Key: "src", Value: fmt.Appendf(nil, "%d/%d", r.Partition, r.Offset)}},
			}, func(r *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("session produce %s: %w", r.Key, err)
					}
					mu.Unlock()
				}
			})
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("session End (commit) after %d rounds: %w", rounds, err)
		}
		mu.Lock()
		perr := first
		mu.Unlock()
		if committed && perr != nil {
			return fmt.Errorf("session committed although a produce failed: %w", perr)
		}
		rounds++
		if !committed {
			aborted++
			progress("round %d aborted (produce err: %v); records will be re-polled", rounds, perr)
			continue
		}
		for _, r := range recs {
			if done[string(r.Key)] {
				return fmt.Errorf("input %s processed in two committed transactions", r.Key)
			}
			done[string(r.Key)] = true
		}
	}
	sess.Close() // leaves the group
	res["eos_rounds"] = rounds
	res["eos_aborted_rounds"] = aborted

	if err := writeSentinels(ctx, c, out, partitions); err != nil {
		return err
	}
	outRecs, err := readToSentinels(ctx, c, out, partitions, kgo.ReadCommitted())
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, r := range outRecs {
		k := string(r.Key)
		if seen[k] {
			return fmt.Errorf("output %s twice (not exactly-once)", k)
		}
		seen[k] = true
		var i int
		if _, err := fmt.Sscanf(k, "in-%d", &i); err != nil {
			return fmt.Errorf("unexpected output key %q", k)
		}
		if want := fmt.Sprintf("transformed: input %d", i); string(r.Value) != want {
			return fmt.Errorf("output %s: value %q, want %q", k, r.Value, want)
		}
	}
	if len(outRecs) != n {
		return fmt.Errorf("output topic has %d committed records, want %d", len(outRecs), n)
	}
	res["eos_output"] = len(outRecs)

	ends, err := endOffsets(ctx, adm, in)
	if err != nil {
		return err
	}
	fo, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("FetchOffsets %s: %w", group, err)
	}
	if err := fo.Error(); err != nil {
		return fmt.Errorf("FetchOffsets %s: %w", group, err)
	}
	for p := int32(0); p < partitions; p++ {
		o, ok := fo.Lookup(in, p)
		if !ok {
			return fmt.Errorf("no offset committed in the transaction for %s[%d]", in, p)
		}
		if o.At != ends[p] {
			return fmt.Errorf("%s[%d]: transactionally committed offset %d, end offset %d", in, p, o.At, ends[p])
		}
	}
	return nil
}

// ---------------------------------------------------------------- admin

func admin(ctx context.Context, c *config, res result) error {
	adm, acl, err := c.admin()
	if err != nil {
		return err
	}
	defer acl.Close()

	progress("BrokerMetadata")
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("BrokerMetadata: %w", err)
	}
	if len(md.Brokers) == 0 || md.Cluster == "" || md.Controller < 0 {
		return fmt.Errorf("BrokerMetadata: brokers=%v cluster=%q controller=%d", md.Brokers, md.Cluster, md.Controller)
	}
	broker := md.Brokers[0]
	if fmt.Sprintf("%s:%d", broker.Host, broker.Port) != c.bootstrap[0] && len(md.Brokers) == 1 {
		return fmt.Errorf("BrokerMetadata: the only broker advertises %s:%d, bootstrap is %s", broker.Host, broker.Port, c.bootstrap[0])
	}
	res["brokers"] = len(md.Brokers)

	progress("DescribeBrokerConfigs")
	bc, err := adm.DescribeBrokerConfigs(ctx, broker.NodeID)
	if err != nil {
		return fmt.Errorf("DescribeBrokerConfigs %d: %w", broker.NodeID, err)
	}
	if len(bc) != 1 || bc[0].Err != nil || bc[0].Name != strconv.Itoa(int(broker.NodeID)) {
		return fmt.Errorf("DescribeBrokerConfigs %d: %+v", broker.NodeID, bc)
	}
	brokerCfg := map[string]kadm.Config{}
	for _, cf := range bc[0].Configs {
		brokerCfg[cf.Key] = cf
	}
	for _, k := range []string{"num.partitions", "log.retention.hours", "auto.create.topics.enable", "default.replication.factor", "message.max.bytes"} {
		if _, ok := brokerCfg[k]; !ok {
			return fmt.Errorf("DescribeBrokerConfigs %d: %d configs, %q missing", broker.NodeID, len(brokerCfg), k)
		}
	}
	npc := brokerCfg["num.partitions"]
	numPartStr := npc.MaybeValue()
	numPartitions, err := strconv.Atoi(numPartStr)
	if err != nil || numPartitions < 1 {
		return fmt.Errorf("DescribeBrokerConfigs: num.partitions=%q", numPartStr)
	}
	res["broker_configs"] = len(brokerCfg)
	cluster, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return fmt.Errorf("DescribeBrokerConfigs (cluster default): %w", err)
	}
	if len(cluster) != 1 || cluster[0].Err != nil || cluster[0].Name != "" {
		return fmt.Errorf("DescribeBrokerConfigs (cluster default): %+v", cluster)
	}

	ta, tb := c.name("admin-a"), c.name("admin-b")
	progress("CreateTopics %s (3 partitions, retention.ms) and %s (broker defaults)", ta, tb)
	ctr, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, ta)
	if err != nil {
		return fmt.Errorf("CreateTopics %s: %w", ta, err)
	}
	if r := ctr[ta]; r.Err != nil || r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID == (kadm.TopicID{}) {
		return fmt.Errorf("CreateTopics %s: err=%v %s partitions=%d rf=%d id=%v", ta, r.Err, r.ErrMessage, r.NumPartitions, r.ReplicationFactor, r.ID)
	} else if v := r.Configs["retention.ms"]; v.Value == nil || *v.Value != "3600000" {
		return fmt.Errorf("CreateTopics %s: response config retention.ms=%+v", ta, v)
	}
	ctr, err = adm.CreateTopics(ctx, -1, -1, nil, tb)
	if err != nil {
		return fmt.Errorf("CreateTopics %s: %w", tb, err)
	}
	if r := ctr[tb]; r.Err != nil || r.NumPartitions != int32(numPartitions) {
		return fmt.Errorf("CreateTopics %s with broker defaults: err=%v %s partitions=%d, want num.partitions=%d", tb, r.Err, r.ErrMessage, r.NumPartitions, numPartitions)
	}
	ctr, err = adm.CreateTopics(ctx, 3, 1, nil, ta)
	if err != nil {
		return fmt.Errorf("CreateTopics (duplicate): %w", err)
	}
	if e := ctr[ta].Err; !errors.Is(e, kerr.TopicAlreadyExists) {
		return fmt.Errorf("CreateTopics of an existing topic: err=%v, want TOPIC_ALREADY_EXISTS", e)
	}
	if err := waitTopic(ctx, adm, ta, 3); err != nil {
		return err
	}
	if err := waitTopic(ctx, adm, tb, numPartitions); err != nil {
		return err
	}

	progress("ListTopics")
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("ListTopics: %w", err)
	}
	for _, t := range []string{ta, tb} {
		if td, ok := tds[t]; !ok || td.Err != nil || td.IsInternal {
			return fmt.Errorf("ListTopics (all): %s present=%v err=%v internal=%v", t, ok, td.Err, td.IsInternal)
		}
	}
	if tds[ta].ID == (kadm.TopicID{}) {
		return fmt.Errorf("ListTopics: %s has no topic ID", ta)
	}
	for name, td := range tds {
		if strings.HasPrefix(name, "__") {
			return fmt.Errorf("ListTopics (internal filtered) still lists %s (internal=%v)", name, td.IsInternal)
		}
	}

	progress("CreatePartitions %s +2", ta)
	cpr, err := adm.CreatePartitions(ctx, 2, ta)
	if err != nil {
		return fmt.Errorf("CreatePartitions: %w", err)
	}
	if e := cpr[ta].Err; e != nil {
		return fmt.Errorf("CreatePartitions %s +2: %w %s", ta, e, cpr[ta].ErrMessage)
	}
	if err := waitTopic(ctx, adm, ta, 5); err != nil {
		return err
	}
	cpr, err = adm.UpdatePartitions(ctx, 2, ta)
	if err != nil {
		return fmt.Errorf("CreatePartitions (shrink): %w", err)
	}
	if e := cpr[ta].Err; !errors.Is(e, kerr.InvalidPartitions) {
		return fmt.Errorf("CreatePartitions shrinking 5 -> 2: err=%v, want INVALID_PARTITIONS", e)
	}

	progress("DescribeTopicConfigs / AlterTopicConfigs")
	topicCfg := func(key string) (kadm.Config, error) {
		rcs, err := adm.DescribeTopicConfigs(ctx, ta)
		if err != nil {
			return kadm.Config{}, fmt.Errorf("DescribeTopicConfigs %s: %w", ta, err)
		}
		rc, err := rcs.On(ta, nil)
		if err != nil || rc.Err != nil {
			return kadm.Config{}, fmt.Errorf("DescribeTopicConfigs %s: %v %v %s", ta, err, rc.Err, rc.ErrMessage)
		}
		for _, cf := range rc.Configs {
			if cf.Key == key {
				return cf, nil
			}
		}
		return kadm.Config{}, fmt.Errorf("DescribeTopicConfigs %s: %d configs, %s missing", ta, len(rc.Configs), key)
	}
	cf, err := topicCfg("retention.ms")
	if err != nil {
		return err
	}
	if cf.MaybeValue() != "3600000" || cf.Source != kmsg.ConfigSourceDynamicTopicConfig {
		return fmt.Errorf("retention.ms after create: %q source %v, want 3600000 DYNAMIC_TOPIC_CONFIG", cf.MaybeValue(), cf.Source)
	}
	if cf, err = topicCfg("cleanup.policy"); err != nil {
		return err
	} else if cf.MaybeValue() != "delete" || cf.Source == kmsg.ConfigSourceDynamicTopicConfig {
		return fmt.Errorf("cleanup.policy default: %q source %v", cf.MaybeValue(), cf.Source)
	}
	alter := func(ops ...kadm.AlterConfig) error {
		ar, err := adm.AlterTopicConfigs(ctx, ops, ta)
		if err != nil {
			return fmt.Errorf("AlterTopicConfigs: %w", err)
		}
		r, err := ar.On(ta, nil)
		if err != nil {
			return fmt.Errorf("AlterTopicConfigs: %w", err)
		}
		if r.Err != nil {
			return fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
		}
		return nil
	}
	if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000000")}); err != nil {
		return fmt.Errorf("AlterTopicConfigs set retention.ms, max.message.bytes: %w", err)
	}
	if cf, err = topicCfg("retention.ms"); err != nil {
		return err
	} else if cf.MaybeValue() != "7200000" || cf.Source != kmsg.ConfigSourceDynamicTopicConfig {
		return fmt.Errorf("retention.ms after alter: %q source %v", cf.MaybeValue(), cf.Source)
	}
	if cf, err = topicCfg("max.message.bytes"); err != nil {
		return err
	} else if cf.MaybeValue() != "2000000" {
		return fmt.Errorf("max.message.bytes after alter: %q", cf.MaybeValue())
	}
	if err := alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		return fmt.Errorf("AlterTopicConfigs delete retention.ms: %w", err)
	}
	if cf, err = topicCfg("retention.ms"); err != nil {
		return err
	} else if cf.Source == kmsg.ConfigSourceDynamicTopicConfig || cf.MaybeValue() == "7200000" {
		return fmt.Errorf("retention.ms after delete: %q source %v, want the default", cf.MaybeValue(), cf.Source)
	} else {
		res["retention_ms_default"] = cf.MaybeValue()
	}
	if cf, err = topicCfg("max.message.bytes"); err != nil {
		return err
	} else if cf.MaybeValue() != "2000000" {
		return fmt.Errorf("max.message.bytes changed by an unrelated incremental delete: %q", cf.MaybeValue())
	}
	if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("not-a-number")}); !errors.Is(err, kerr.InvalidConfig) {
		return fmt.Errorf("AlterTopicConfigs retention.ms=not-a-number: err=%v, want INVALID_CONFIG", err)
	}
	if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")}); !errors.Is(err, kerr.InvalidConfig) {
		return fmt.Errorf("AlterTopicConfigs no.such.config: err=%v, want INVALID_CONFIG", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, c.name("admin-missing"))
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("DescribeTopicConfigs (missing topic): %w", err)
	}
	if err == nil {
		if rc, _ := rcs.On(c.name("admin-missing"), nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("DescribeTopicConfigs of a missing topic: err=%v, want UNKNOWN_TOPIC_OR_PARTITION", rc.Err)
		}
	}

	progress("producing timestamped records to %s", ta)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	prod, err := c.client(kgo.DefaultProduceTopic(ta), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	var rs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 10; i++ {
			rs = append(rs, &kgo.Record{
				Partition: p,
				Value:     fmt.Appendf(nil, "p%d-%d", p, i),
				Timestamp: base.Add(time.Duration(i) * time.Second),
			})
		}
	}
	err = produceAll(ctx, prod, rs)
	prod.Close()
	if err != nil {
		return err
	}

	progress("ListStartOffsets / ListEndOffsets / ListOffsetsAfterMilli")
	starts, err := startOffsets(ctx, adm, ta)
	if err != nil {
		return err
	}
	ends, err := endOffsets(ctx, adm, ta)
	if err != nil {
		return err
	}
	for p := int32(0); p < 5; p++ {
		wantEnd := int64(10)
		if p >= 3 {
			wantEnd = 0
		}
		if s, ok := starts[p]; !ok || s != 0 {
			return fmt.Errorf("ListStartOffsets %s[%d] = %d (present %v), want 0", ta, p, s, ok)
		}
		if e, ok := ends[p]; !ok || e != wantEnd {
			return fmt.Errorf("ListEndOffsets %s[%d] = %d (present %v), want %d", ta, p, e, ok, wantEnd)
		}
	}
	lo, err := adm.ListOffsetsAfterMilli(ctx, base.Add(5500*time.Millisecond).UnixMilli(), ta)
	if err != nil {
		return fmt.Errorf("ListOffsetsAfterMilli: %w", err)
	}
	if err := lo.Error(); err != nil {
		return fmt.Errorf("ListOffsetsAfterMilli: %w", err)
	}
	for p := int32(0); p < 3; p++ {
		o, _ := lo.Lookup(ta, p)
		if o.Offset != 6 || o.Timestamp != base.Add(6*time.Second).UnixMilli() {
			return fmt.Errorf("ListOffsetsAfterMilli(base+5.5s) %s[%d] = offset %d timestamp %d, want 6 and %d", ta, p, o.Offset, o.Timestamp, base.Add(6*time.Second).UnixMilli())
		}
	}
	lo, err = adm.ListOffsetsAfterMilli(ctx, base.Add(-time.Hour).UnixMilli(), ta)
	if err != nil {
		return fmt.Errorf("ListOffsetsAfterMilli (early): %w", err)
	}
	for p := int32(0); p < 3; p++ {
		if o, _ := lo.Lookup(ta, p); o.Offset != 0 || o.Timestamp != base.UnixMilli() {
			return fmt.Errorf("ListOffsetsAfterMilli(before all) %s[%d] = offset %d timestamp %d, want 0 and %d", ta, p, o.Offset, o.Timestamp, base.UnixMilli())
		}
	}
	lo, err = adm.ListOffsetsAfterMilli(ctx, time.Now().Add(time.Hour).UnixMilli(), ta)
	if err != nil {
		return fmt.Errorf("ListOffsetsAfterMilli (future): %w", err)
	}
	for p := int32(0); p < 5; p++ {
		// kadm re-lists the end offset for a partition with no record at or after the time.
		if o, _ := lo.Lookup(ta, p); o.Err != nil || o.Offset != ends[p] {
			return fmt.Errorf("ListOffsetsAfterMilli(future) %s[%d] = offset %d err %v, want the end offset %d", ta, p, o.Offset, o.Err, ends[p])
		}
	}

	progress("DeleteRecords %s[0] before 4", ta)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: ta, Partition: 0, At: 4})
	del.Add(kadm.Offset{Topic: ta, Partition: 1, At: -1}) // -1: up to the high watermark
	dr, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		return fmt.Errorf("DeleteRecords: %w", err)
	}
	if r, ok := dr.Lookup(ta, 0); !ok || r.Err != nil || r.LowWatermark != 4 {
		return fmt.Errorf("DeleteRecords %s[0] before 4: present=%v err=%v low watermark %d", ta, ok, r.Err, r.LowWatermark)
	}
	if r, ok := dr.Lookup(ta, 1); !ok || r.Err != nil || r.LowWatermark != 10 {
		return fmt.Errorf("DeleteRecords %s[1] before -1 (high watermark): present=%v err=%v low watermark %d", ta, ok, r.Err, r.LowWatermark)
	}
	bad := kadm.Offsets{}
	bad.Add(kadm.Offset{Topic: ta, Partition: 2, At: 11})
	dr, err = adm.DeleteRecords(ctx, bad)
	if err != nil {
		return fmt.Errorf("DeleteRecords past the end: %w", err)
	}
	if r, _ := dr.Lookup(ta, 2); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		return fmt.Errorf("DeleteRecords %s[2] before 11 (end 10): err=%v, want OFFSET_OUT_OF_RANGE", ta, r.Err)
	}
	starts, err = startOffsets(ctx, adm, ta)
	if err != nil {
		return err
	}
	if starts[0] != 4 || starts[1] != 10 || starts[2] != 0 {
		return fmt.Errorf("ListStartOffsets after DeleteRecords: %v, want p0=4 p1=10 p2=0", starts)
	}
	cons, err := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{ta: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	var got []*kgo.Record
	for len(got) < 6 {
		r, err := poll(ctx, cons, 2*time.Second)
		if err != nil {
			cons.Close()
			return err
		}
		if ctx.Err() != nil {
			cons.Close()
			return fmt.Errorf("consuming %s[0] after DeleteRecords: %d/6 records: %w", ta, len(got), ctx.Err())
		}
		got = append(got, r...)
	}
	cons.Close()
	if got[0].Offset != 4 || string(got[0].Value) != "p0-4" || len(got) != 6 {
		return fmt.Errorf("consuming %s[0] from the start after DeleteRecords: first offset %d value %q (%d records), want offset 4", ta, got[0].Offset, got[0].Value, len(got))
	}

	progress("DeleteTopics")
	dtr, err := adm.DeleteTopics(ctx, ta, tb)
	if err != nil {
		return fmt.Errorf("DeleteTopics: %w", err)
	}
	for _, t := range []string{ta, tb} {
		if r, ok := dtr[t]; !ok || r.Err != nil {
			return fmt.Errorf("DeleteTopics %s: present=%v err=%v %s", t, ok, r.Err, r.ErrMessage)
		}
	}
	if err := waitFor(ctx, "deleted topics to leave metadata", func() string {
		tds, err := adm.ListTopics(ctx)
		if err != nil {
			return err.Error()
		}
		for _, t := range []string{ta, tb} {
			if _, ok := tds[t]; ok {
				return t + " still listed"
			}
		}
		return ""
	}); err != nil {
		return err
	}
	dtr, err = adm.DeleteTopics(ctx, ta)
	if err != nil {
		return fmt.Errorf("DeleteTopics (again): %w", err)
	}
	if e := dtr[ta].Err; !errors.Is(e, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("DeleteTopics of a deleted topic: err=%v, want UNKNOWN_TOPIC_OR_PARTITION", e)
	}
	res["topics_created"] = 2
	return nil
}

// fencing checks that a second producer with the same transactional ID fences
// the first one (a zombie), and that the zombie's writes never become visible.
func fencing(ctx context.Context, c *config, adm *kadm.Client, res result) error {
	topic := c.name("txn-fence")
	txid := c.name("fence-producer")
	if err := createTopic(ctx, adm, topic, 1, nil); err != nil {
		return err
	}
	newProducer := func() (*kgo.Client, error) {
		return c.client(kgo.TransactionalID(txid), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(30*time.Second))
	}
	txnProduce := func(cl *kgo.Client, key string) error {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("BeginTransaction: %w", err)
		}
		perr := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(key)}).FirstErr()
		commit := kgo.TransactionEndTry(perr == nil)
		eerr := cl.EndTransaction(ctx, commit)
		if perr != nil {
			return fmt.Errorf("produce: %w (EndTransaction abort: %v)", perr, eerr)
		}
		if eerr != nil {
			return fmt.Errorf("EndTransaction commit: %w", eerr)
		}
		return nil
	}
	p1, err := newProducer()
	if err != nil {
		return err
	}
	defer p1.Close()
	progress("fencing: producer 1 commits f1")
	if err := txnProduce(p1, "f1"); err != nil {
		return fmt.Errorf("producer 1, f1: %w", err)
	}
	p2, err := newProducer()
	if err != nil {
		return err
	}
	defer p2.Close()
	progress("fencing: producer 2 (same transactional id) commits f2")
	if err := txnProduce(p2, "f2"); err != nil {
		return fmt.Errorf("producer 2, f2: %w", err)
	}
	progress("fencing: the fenced producer 1 tries f3")
	err = txnProduce(p1, "f3")
	if err == nil {
		return fmt.Errorf("a producer fenced by a newer one with the same transactional id committed f3")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("fenced producer 1: %w; want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	res["fenced_error"] = err.Error()
	if err := writeSentinels(ctx, c, topic, 1); err != nil {
		return err
	}
	rs, err := readToSentinels(ctx, c, topic, 1, kgo.ReadCommitted())
	if err != nil {
		return err
	}
	var keys []string
	for _, r := range rs {
		keys = append(keys, string(r.Key))
	}
	if strings.Join(keys, ",") != "f1,f2" {
		return fmt.Errorf("read_committed after fencing sees %v, want [f1 f2]", keys)
	}
	return nil
}
