package main

// group-member: one member of a consumer group, for the scenarios in
// tests/clients/groups/.
//
//	franz-check group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]
//
// PROTOCOL classic: franz-go's classic group management with its default
// balancer (cooperative-sticky), session timeout 6 s, heartbeat 1 s.
// PROTOCOL consumer: KIP-848 through kgo.ServerSideBalancer (the broker
// assigns; the default cooperative-sticky balancer maps to the server's
// "uniform" assignor). franz-go silently falls back to the classic protocol
// when the broker lacks ConsumerGroupHeartbeat v1; here that is an error.
//
// Loop: poll; append "partition offset key" per record to OUTPUT_FILE, fsync;
// commit synchronously (CommitUncommittedOffsets: everything polled, which is
// everything processed); allow rebalances again.
// BlockRebalanceOnPoll keeps rebalances (and so the revoke callback) out of
// the window between poll and commit, and OnPartitionsRevoked commits
// whatever was processed but not committed, so a graceful rebalance
// redelivers nothing. Rebalances are logged to stderr with a timestamp.
// SIGTERM (or IDLE_EXIT_SECONDS without records after the first record)
// closes the client, which leaves the group, and exits 0; errors exit 1.
// Prints {"member":ID,"consumed":N} on stdout however it ends.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fallbackLogger forwards franz-go's log at the configured level, and notices
// the (info-level) message franz-go logs when it gives up on KIP-848.
type fallbackLogger struct {
	inner    kgo.Logger
	level    kgo.LogLevel
	fellBack atomic.Bool
}

func (l *fallbackLogger) Level() kgo.LogLevel {
	if l.level < kgo.LogLevelInfo {
		return kgo.LogLevelInfo
	}
	return l.level
}

func (l *fallbackLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if strings.Contains(msg, "falling back to standard consumer group management") {
		l.fellBack.Store(true)
	}
	if level <= l.level {
		l.inner.Log(level, msg, keyvals...)
	}
}

// KRABKA_GROUP_COMMIT_DELAY_MS: a pause between writing a batch and
// committing it, to widen the processed-but-uncommitted window (the
// scenarios kill a member inside it).
var commitDelay = func() time.Duration {
	ms, err := strconv.Atoi(os.Getenv("KRABKA_GROUP_COMMIT_DELAY_MS"))
	if err != nil || ms < 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}()

type member struct {
	label    string
	cl       *kgo.Client
	mu       sync.Mutex
	owned    map[int32]bool
	memberID string
}

func stamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func (m *member) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s %s\n", stamp(), m.label, fmt.Sprintf(format, args...))
}

func (m *member) rememberID(cl *kgo.Client) {
	if id, _ := cl.GroupMetadata(); id != "" {
		m.mu.Lock()
		m.memberID = id
		m.mu.Unlock()
	}
}

func (m *member) ownedList() string {
	out := make([]int32, 0, len(m.owned))
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return partList(out)
}

func sortedParts(ps []int32) string {
	out := append([]int32(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return partList(out)
}

// partList formats partitions as "[0,1,2]", the format every group-member
// program logs.
func partList(ps []int32) string {
	b := []byte{'['}
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return string(append(b, ']'))
}

// groupMember runs the member and returns the process exit status.
func groupMember(bootstrap, topic, group, protocol, outFile string, idle time.Duration) int {
	m := &member{
		label: fmt.Sprintf("group-member[franz %s pid %d]", protocol, os.Getpid()),
		owned: map[int32]bool{},
	}
	consumed, err := m.run(bootstrap, topic, group, protocol, outFile, idle)
	status := 0
	if err != nil {
		m.logf("FAIL: %v", err)
		status = 1
	}
	m.mu.Lock()
	line, _ := json.Marshal(struct {
		Member   string `json:"member"`
		Consumed int64  `json:"consumed"`
	}{m.memberID, consumed})
	m.mu.Unlock()
	fmt.Println(string(line))
	return status
}

// require848 fails unless the broker serves ConsumerGroupHeartbeat v1+, the
// condition franz-go checks before it uses KIP-848 at all.
func require848(bootstrap string) error {
	cl, err := kgo.NewClient(baseOpts(bootstrap)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("ApiVersions from broker %d: %w", v.NodeID, v.Err)
		}
		max, ok := v.KeyMaxVersion(int16(kmsg.ConsumerGroupHeartbeat))
		if !ok || max < 1 {
			return fmt.Errorf("broker %d does not serve ConsumerGroupHeartbeat v1+ (present %v, max %d): "+
				"franz-go would silently use the classic protocol", v.NodeID, ok, max)
		}
	}
	return nil
}

func (m *member) run(bootstrap, topic, group, protocol, outFile string, idle time.Duration) (int64, error) {
	var consumed int64
	if protocol == "consumer" {
		if err := require848(bootstrap); err != nil {
			return 0, err
		}
	}
	out, err := os.OpenFile(outFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer out.Close()

	logger := &fallbackLogger{inner: kgo.BasicLogger(os.Stderr, logLevel(), func() string { return "franz-go " }), level: logLevel()}
	opts := append(baseOpts(bootstrap),
		kgo.WithLogger(logger),
		kgo.ClientID(fmt.Sprintf("group-member-franz-%d", os.Getpid())),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		// No rebalance (and no revoke callback) between a poll and AllowRebalance.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
			m.rememberID(cl)
			m.mu.Lock()
			for _, p := range assigned[topic] {
				m.owned[p] = true
			}
			now, id := m.ownedList(), m.memberID
			m.mu.Unlock()
			m.logf("assigned %s now %s member %s", sortedParts(assigned[topic]), now, id)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			m.mu.Lock()
			for _, p := range revoked[topic] {
				delete(m.owned, p)
			}
			now := m.ownedList()
			m.mu.Unlock()
			// Called at the end of every group session, also with nothing
			// revoked. Everything polled is processed by now (rebalances are
			// blocked while a batch is processed), so committing the
			// uncommitted offsets commits exactly the processed ones.
			err := cl.CommitUncommittedOffsets(ctx)
			if err != nil {
				m.logf("revoked %s now %s; commit of processed offsets failed: %v", sortedParts(revoked[topic]), now, err)
			} else if len(revoked[topic]) > 0 {
				m.logf("revoked %s now %s", sortedParts(revoked[topic]), now)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			m.mu.Lock()
			for _, p := range lost[topic] {
				delete(m.owned, p)
			}
			now := m.ownedList()
			m.mu.Unlock()
			m.logf("lost %s now %s", sortedParts(lost[topic]), now)
		}),
	)
	if protocol == "classic" {
		opts = append(opts, kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second))
	} else {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	m.cl = cl
	closed := false
	defer func() {
		if !closed {
			leaveCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = cl.LeaveGroupContext(leaveCtx)
			cl.Close()
		}
	}()
	m.logf("subscribed to %s in group %s", topic, group)

	var stop atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		stop.Store(true)
	}()

	lastRecord := time.Now()
	var line []byte
	for !stop.Load() {
		if logger.fellBack.Load() {
			return consumed, errors.New("franz-go fell back to the classic protocol (KIP-848 ConsumerGroupHeartbeat answered UNSUPPORTED_VERSION)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		if fetches.IsClientClosed() {
			return consumed, errors.New("client closed")
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			cl.AllowRebalance()
			return consumed, fmt.Errorf("fetch error on %s [%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		m.rememberID(cl)
		records := fetches.Records()
		if len(records) == 0 {
			cl.AllowRebalance()
			if idle > 0 && consumed > 0 && time.Since(lastRecord) >= idle {
				m.logf("idle for %v, exiting", idle)
				break
			}
			continue
		}
		lastRecord = time.Now()
		line = line[:0]
		for _, r := range records {
			line = strconv.AppendInt(line, int64(r.Partition), 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, r.Offset, 10)
			line = append(line, ' ')
			if r.Key == nil {
				line = append(line, '-')
			} else {
				line = append(line, r.Key...)
			}
			line = append(line, '\n')
		}
		if _, err := out.Write(line); err != nil {
			cl.AllowRebalance()
			return consumed, err
		}
		if err := out.Sync(); err != nil {
			cl.AllowRebalance()
			return consumed, err
		}
		consumed += int64(len(records))
		if commitDelay > 0 {
			time.Sleep(commitDelay)
		}
		// Rebalances are blocked until AllowRebalance, so "uncommitted" (the
		// offsets after everything polled) is exactly what was processed;
		// this also retries offsets of an earlier batch whose commit failed.
		commitCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.CommitUncommittedOffsets(commitCtx)
		cancel()
		if err != nil {
			// Not fatal: the offsets stay uncommitted; the next batch's commit
			// or OnPartitionsRevoked commits them.
			m.logf("commit after %d records failed: %v; kept uncommitted", len(records), err)
		}
		cl.AllowRebalance()
	}
	if stop.Load() {
		m.logf("stop requested (signal)")
	}
	m.rememberID(cl)
	// Everything written is committed already unless a commit failed; commit
	// once more, then Close leaves the group.
	commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cl.CommitUncommittedOffsets(commitCtx); err != nil {
		m.logf("final commit failed: %v", err)
	}
	cancel()
	// Leave explicitly (bounded) so a failed leave is reported; Close would
	// leave too, without a deadline and without an error.
	leaveCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closed = true
	leaveErr := cl.LeaveGroupContext(leaveCtx)
	cl.Close()
	if leaveErr != nil {
		return consumed, fmt.Errorf("leave group: %w", leaveErr)
	}
	m.logf("closed, consumed %d", consumed)
	return consumed, nil
}
