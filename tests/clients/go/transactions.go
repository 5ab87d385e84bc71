package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// transactions: a transactional producer commits 50 records over every
// partition, aborts 50 (all acknowledged first, so they are in the log) and
// commits 50 more; a read_committed consumer must read exactly the
// committed ones.
func transactions(bootstrap, topic string, partitions int32) (map[string]int, error) {
	opts := append(baseOpts(bootstrap),
		kgo.TransactionalID("franz-check-transactions"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var committed, aborted []string
	for _, step := range []struct {
		label  string
		commit bool
	}{{"first", true}, {"aborted", false}, {"second", true}} {
		if err := cl.BeginTransaction(); err != nil {
			return nil, err
		}
		var values []string
		for i := 0; i < 50; i++ {
			value := fmt.Sprintf("%s-%d", step.label, i)
			values = append(values, value)
			r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(value)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return nil, err
			}
		}
		end := kgo.TryAbort
		if step.commit {
			end = kgo.TryCommit
			committed = append(committed, values...)
		} else {
			aborted = append(aborted, values...)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			return nil, err
		}
	}
	read, err := readCommitted(bootstrap, topic, partitions, len(committed))
	if err != nil {
		return nil, err
	}
	sort.Strings(read)
	sort.Strings(committed)
	if fmt.Sprint(read) != fmt.Sprint(committed) {
		return nil, failf("read_committed read %d records, %d were committed", len(read), len(committed))
	}
	return map[string]int{"committed": len(committed), "aborted": len(aborted), "read_committed": len(read)}, nil
}

// readCommitted reads topic from the start at read_committed until it has
// want records, then a little longer (an aborted record would show then).
func readCommitted(bootstrap, topic string, partitions int32, want int) ([]string, error) {
	assign := make(map[int32]kgo.Offset, partitions)
	for p := int32(0); p < partitions; p++ {
		assign[p] = kgo.NewOffset().AtStart()
	}
	opts := append(baseOpts(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var read []string
	deadline := time.Now().Add(consumeTimeout)
	extra := time.Time{}
	for time.Now().Before(deadline) && (extra.IsZero() || time.Now().Before(extra)) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
		if len(read) >= want && extra.IsZero() {
			extra = time.Now().Add(extraPoll)
		}
	}
	return read, nil
}
