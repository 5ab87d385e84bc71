// franz-check: black-box checks of a Kafka-compatible broker with franz-go.
//
//	franz-check produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
//	franz-check produce-range BOOTSTRAP TOPIC PARTITIONS FIRST COUNT CODEC
//	franz-check consume BOOTSTRAP TOPIC PARTITIONS COUNT
//	franz-check admin BOOTSTRAP
//	franz-check transactions BOOTSTRAP TOPIC PARTITIONS
//	franz-check group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]
//
// Each prints one JSON line on stdout and exits 0 when the check passes; on
// any error or mismatch it prints "franz-check MODE: ..." on stderr and exits
// 1 (2 for a usage error). group-member (group.go) is a long-running consumer
// group member for the scenarios in tests/clients/groups/. The record contract is in contract.go and in
// tests/clients/README-python-go.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const usage = `usage: franz-check produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
       franz-check produce-range BOOTSTRAP TOPIC PARTITIONS FIRST COUNT CODEC
       franz-check consume BOOTSTRAP TOPIC PARTITIONS COUNT
       franz-check admin BOOTSTRAP
       franz-check group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]
CODEC: none|gzip|snappy|lz4|zstd
PROTOCOL: classic|consumer (KIP-848)`

// checkFailed marks a mismatch against the contract (as opposed to a client
// or broker error); both exit 1.
type checkFailed struct{ msg string }

func (e *checkFailed) Error() string { return e.msg }

func failf(format string, args ...any) error {
	return &checkFailed{fmt.Sprintf(format, args...)}
}

func envSeconds(name string, def float64) time.Duration {
	if s := os.Getenv(name); s != "" {
		if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
			return time.Duration(f * float64(time.Second))
		}
	}
	return time.Duration(def * float64(time.Second))
}

var (
	// How long consume waits for COUNT records (the contract says 60 s; the
	// variable only exists to make negative tests quicker).
	consumeTimeout = envSeconds("KRABKA_CHECK_TIMEOUT_S", 60)
	// Extra polling after COUNT records arrived, to catch extras/duplicates.
	extraPoll = envSeconds("KRABKA_CHECK_EXTRA_POLL_S", 1)
	// How long produce waits for all acknowledgements.
	produceTimeout = envSeconds("KRABKA_CHECK_PRODUCE_TIMEOUT_S", 60)
)

func usageExit(msg string) {
	fmt.Fprintf(os.Stderr, "franz-check: %s\n%s\n", msg, usage)
	os.Exit(2)
}

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		usageExit("missing mode")
	}
	mode := args[0]
	if mode == "group-member" {
		if len(args) != 6 && len(args) != 7 {
			usageExit("wrong arguments")
		}
		var idle time.Duration
		if len(args) == 7 {
			idle = time.Duration(atoiArg(args[6], 1)) * time.Second
		}
		if args[4] != "classic" && args[4] != "consumer" {
			usageExit(fmt.Sprintf("PROTOCOL must be classic or consumer, got %q", args[4]))
		}
		os.Exit(groupMember(args[1], args[2], args[3], args[4], args[5], idle))
	}
	var (
		result any
		err    error
	)
	start := time.Now()
	switch {
	case mode == "produce" && len(args) == 6:
		topic, partitions, count := args[2], atoiArg(args[3], 1), atoiArg(args[4], 0)
		codec, ok := codecs[args[5]]
		if !ok {
			usageExit(fmt.Sprintf("unknown codec %q", args[5]))
		}
		_, err = produce(args[1], topic, int32(partitions), 0, count, codec)
		result = map[string]int{"produced": count}
	case mode == "produce-range" && len(args) == 7:
		topic, partitions, first, count := args[2], atoiArg(args[3], 1), atoiArg(args[4], 0), atoiArg(args[5], 0)
		codec, ok := codecs[args[6]]
		if !ok {
			usageExit(fmt.Sprintf("unknown codec %q", args[6]))
		}
		var last map[int32]int64
		last, err = produce(args[1], topic, int32(partitions), first, count, codec)
		// Last acknowledged offset per partition that got records: the
		// scenarios derive the expected log end offsets from it.
		lastOffsets := make(map[string]int64, len(last))
		for p, o := range last {
			lastOffsets[strconv.Itoa(int(p))] = o
		}
		result = map[string]any{"produced": count, "first": first, "last_offsets": lastOffsets}
	case mode == "consume" && len(args) == 5:
		topic, partitions, count := args[2], atoiArg(args[3], 1), atoiArg(args[4], 0)
		err = consume(args[1], topic, int32(partitions), count)
		result = map[string]int{"consumed": count}
	case mode == "transactions" && len(args) == 4:
		result, err = transactions(args[1], args[2], int32(atoiArg(args[3], 1)))
	case mode == "admin" && len(args) == 2:
		err = admin(args[1])
		result = map[string]string{"admin": "ok"}
	default:
		usageExit("wrong arguments")
	}
	if err != nil {
		var cf *checkFailed
		kind := "ERROR"
		if errors.As(err, &cf) {
			kind = "FAILED"
		}
		fmt.Fprintf(os.Stderr, "franz-check %s: %s: %v\n", mode, kind, err)
		os.Exit(1)
	}
	line, _ := json.Marshal(result)
	fmt.Println(string(line))
	if os.Getenv("KRABKA_CHECK_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "franz-check %s: ok in %.2fs\n", mode, time.Since(start).Seconds())
	}
}

func atoiArg(s string, min int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		usageExit(fmt.Sprintf("bad number %q (must be >= %d)", s, min))
	}
	return n
}

var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

func baseOpts(bootstrap string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		// Default 5 s: every retry after e.g. a transient NOT_LEADER right
		// after topic creation would otherwise wait that long.
		kgo.MetadataMinAge(200 * time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel(), func() string { return "franz-go " })),
	}
	return append(opts, securityOpts()...)
}

func producerOpts(codec kgo.CompressionCodec) []kgo.Opt {
	// Idempotent writes are franz-go's default (no DisableIdempotentWrite).
	return []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
}

type delivery struct {
	partition int32
	offset    int64
	err       error
}

// produce sends the contract records first..first+count-1 (record i to
// partition i % partitions) and returns the last acknowledged offset of every
// partition that got records.
func produce(bootstrap, topic string, partitions int32, first, count int, codec kgo.CompressionCodec) (map[int32]int64, error) {
	cl, err := kgo.NewClient(append(baseOpts(bootstrap), producerOpts(codec)...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout)
	defer cancel()

	delivered := make([]delivery, count)
	var wg sync.WaitGroup
	for k := 0; k < count; k++ {
		wg.Add(1)
		cl.Produce(ctx, contractRecord(topic, first+k, partitions), func(r *kgo.Record, err error) {
			delivered[k] = delivery{r.Partition, r.Offset, err}
			wg.Done()
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	wg.Wait()

	last := make(map[int32]int64)
	for k, d := range delivered {
		i := first + k
		if d.err != nil {
			return nil, failf("record %d: delivery failed: %v", i, d.err)
		}
		want := partitionOf(i, partitions)
		if d.partition != want {
			return nil, failf("record %d delivered to partition %d, expected %d", i, d.partition, want)
		}
		if d.offset < 0 {
			return nil, failf("record %d: no offset in the acknowledgement (%d)", i, d.offset)
		}
		if prev, ok := last[d.partition]; ok && d.offset != prev+1 {
			return nil, failf("record %d: partition %d offset %d follows %d, not consecutive", i, d.partition, d.offset, prev)
		}
		last[d.partition] = d.offset
	}
	return last, nil
}

func consume(bootstrap, topic string, partitions int32, count int) error {
	assign := make(map[int32]kgo.Offset, partitions)
	for p := int32(0); p < partitions; p++ {
		assign[p] = kgo.NewOffset().AtStart()
	}
	// No group: partitions are assigned directly, nothing is committed.
	opts := append(baseOpts(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	v := newVerifier(topic, partitions, count)
	poll := func(until time.Time, stopWhenDone bool) error {
		for time.Now().Before(until) {
			if stopWhenDone && v.done() {
				return nil
			}
			ctx, cancel := context.WithDeadline(context.Background(), until)
			fetches := cl.PollFetches(ctx)
			cancel()
			if fetches.IsClientClosed() {
				return errors.New("client closed")
			}
			for _, fe := range fetches.Errors() {
				if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
					continue
				}
				return fmt.Errorf("fetch error on %s [%d]: %w", fe.Topic, fe.Partition, fe.Err)
			}
			var cerr error
			fetches.EachRecord(func(r *kgo.Record) {
				if cerr == nil {
					cerr = v.check(r)
				}
			})
			if cerr != nil {
				return cerr
			}
		}
		return nil
	}
	if err := poll(time.Now().Add(consumeTimeout), true); err != nil {
		return err
	}
	if !v.done() {
		return v.finish()
	}
	if err := poll(time.Now().Add(extraPoll), false); err != nil {
		return err
	}
	return v.finish()
}

// admin: create a 2-partition topic (with one topic config), list it,
// describe its configs, produce 5 contract records, list start/end offsets,
// delete it and wait until metadata no longer has it.
func admin(bootstrap string) error {
	cl, err := kgo.NewClient(append(baseOpts(bootstrap), producerOpts(kgo.NoCompression())...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	topic := fmt.Sprintf("franz-admin-check-%d", time.Now().UnixNano())
	const partitions = 2
	// -1: the contract timestamps are from 2023, so any time-based retention
	// could delete the 5 records before their offsets are listed.
	const retention = "-1"
	created, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"retention.ms": kadm.StringPtr(retention)}, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if created.NumPartitions != partitions {
		return failf("create topic %s: response says %d partitions, expected %d", topic, created.NumPartitions, partitions)
	}
	deleted := false
	defer func() {
		if !deleted { // best effort cleanup after a failure
			_, _ = adm.DeleteTopic(context.Background(), topic)
		}
	}()

	// List: wait until metadata shows the topic with a leader per partition.
	if err := waitFor(ctx, 15*time.Second, func() error {
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		d, ok := details[topic]
		if !ok {
			return failf("list topics: %s missing", topic)
		}
		if d.Err != nil {
			return fmt.Errorf("list topics: %s: %w", topic, d.Err)
		}
		if len(d.Partitions) != partitions {
			return failf("list topics: %s has %d partitions, expected %d", topic, len(d.Partitions), partitions)
		}
		for _, pd := range d.Partitions {
			if pd.Err != nil || pd.Leader < 0 {
				return failf("list topics: %s [%d] leader %d err %v", topic, pd.Partition, pd.Leader, pd.Err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list all topics: %w", err)
	}
	if _, ok := all[topic]; !ok {
		return failf("list all topics: %s missing from %d topics", topic, len(all))
	}

	// Describe configs: the create-time override and a broker default.
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return fmt.Errorf("describe configs: %s: %w", topic, err)
	}
	if rc.Err != nil {
		return fmt.Errorf("describe configs: %s: %w (%s)", topic, rc.Err, rc.ErrMessage)
	}
	cfgs := make(map[string]kadm.Config, len(rc.Configs))
	for _, c := range rc.Configs {
		cfgs[c.Key] = c
	}
	if c, ok := cfgs["retention.ms"]; !ok || c.Value == nil || *c.Value != retention {
		return failf("describe configs: retention.ms = %s, expected %s (set at creation)", cfgValue(c, ok), retention)
	}
	if c, ok := cfgs["cleanup.policy"]; !ok || c.Value == nil || *c.Value != "delete" {
		return failf("describe configs: cleanup.policy = %s, expected the default delete", cfgValue(c, ok))
	}

	// Produce 5 contract records (partition i % 2), then list offsets.
	const n = 5
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = contractRecord(topic, i, partitions)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records: %w", n, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	if err := starts.Error(); err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	for p := int32(0); p < partitions; p++ {
		want := int64(len(indexesOf(p, partitions, n)))
		e, ok := ends.Lookup(topic, p)
		if !ok || e.Offset != want {
			return failf("list end offsets: %s [%d] = %d (found %v), expected %d", topic, p, e.Offset, ok, want)
		}
		s, ok := starts.Lookup(topic, p)
		if !ok || s.Offset != 0 {
			return failf("list start offsets: %s [%d] = %d (found %v), expected 0", topic, p, s.Offset, ok)
		}
	}

	// Delete and wait until the topic is gone from metadata.
	dr, err := adm.DeleteTopic(ctx, topic)
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	if dr.Err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, dr.Err)
	}
	deleted = true
	return waitFor(ctx, 15*time.Second, func() error {
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		if d, ok := details[topic]; ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return failf("topic %s still listed after delete (err %v)", topic, d.Err)
		}
		return nil
	})
}

func cfgValue(c kadm.Config, ok bool) string {
	switch {
	case !ok:
		return "<missing>"
	case c.Value == nil:
		return "<null>"
	default:
		return strconv.Quote(*c.Value)
	}
}

// waitFor retries fn every 200 ms until it returns nil or limit passes, and
// then returns its last error.
func waitFor(ctx context.Context, limit time.Duration, fn func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logLevel: franz-go's own log goes to stderr at WARN, or at
// KRABKA_CHECK_FRANZ_LOG=debug|info|warn|error.
func logLevel() kgo.LogLevel {
	switch os.Getenv("KRABKA_CHECK_FRANZ_LOG") {
	case "debug":
		return kgo.LogLevelDebug
	case "info":
		return kgo.LogLevelInfo
	case "error":
		return kgo.LogLevelError
	}
	return kgo.LogLevelWarn
}
