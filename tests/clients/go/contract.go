package main

// The deterministic record contract shared with the Python and Java checkers:
// for global index i in 0..COUNT
//
//	partition = i % PARTITIONS
//	key       = UTF-8 "k-<i>"
//	value     = 1 + (i*37 % 2000) bytes, byte j = (i + j) % 251
//	headers   = [("idx", UTF-8 decimal i), ("h2", empty bytes)]
//	timestamp = 1700000000000 + i (CreateTime, ms)
//
// Within a partition records are produced in increasing i; a consumer must
// see p, p+PARTITIONS, ... in order at consecutive offsets, and nothing else.

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const baseTimestampMs = 1700000000000

// The contract timestamps are from November 2023: a topic with time-based
// retention (Kafka's default is 7 days) loses them at its next retention check.
const retentionHint = " (if records are missing from the start: contract timestamps are from 2023, " +
	"so time-based retention deletes them; create topics with retention.ms=-1)"

func keyOf(i int) []byte { return []byte("k-" + strconv.Itoa(i)) }

func valueOf(i int) []byte {
	v := make([]byte, 1+(i*37%2000))
	for j := range v {
		v[j] = byte((i + j) % 251)
	}
	return v
}

// headersOf returns the contract headers. "h2" is a non-nil empty slice:
// franz-go writes a nil header value as null (length -1) and an empty one as
// length 0, and reads them back the same way.
func headersOf(i int) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: "idx", Value: []byte(strconv.Itoa(i))},
		{Key: "h2", Value: []byte{}},
	}
}

func timestampOf(i int) int64 { return baseTimestampMs + int64(i) }

func partitionOf(i int, partitions int32) int32 { return int32(i % int(partitions)) }

// indexesOf lists the global indexes partition p holds, in order.
func indexesOf(p, partitions int32, count int) []int {
	var out []int
	for i := int(p); i < count; i += int(partitions) {
		out = append(out, i)
	}
	return out
}

func contractRecord(topic string, i int, partitions int32) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: partitionOf(i, partitions),
		Key:       keyOf(i),
		Value:     valueOf(i),
		Headers:   headersOf(i),
		Timestamp: time.UnixMilli(timestampOf(i)),
	}
}

type verifier struct {
	topic      string
	partitions int32
	count      int
	want       []int   // records expected per partition
	seen       []int   // records seen per partition
	nextOffset []int64 // -1 until the first record of the partition
	total      int
}

func newVerifier(topic string, partitions int32, count int) *verifier {
	v := &verifier{topic: topic, partitions: partitions, count: count,
		want: make([]int, partitions), seen: make([]int, partitions), nextOffset: make([]int64, partitions)}
	for p := int32(0); p < partitions; p++ {
		v.want[p] = len(indexesOf(p, partitions, count))
		v.nextOffset[p] = -1
	}
	return v
}

func (v *verifier) done() bool { return v.total >= v.count }

func brief(b []byte) string {
	if b == nil {
		return "nil"
	}
	if len(b) > 24 {
		return fmt.Sprintf("%q...(%d bytes)", b[:24], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func (v *verifier) check(r *kgo.Record) error {
	where := fmt.Sprintf("topic %s partition %d offset %d", r.Topic, r.Partition, r.Offset)
	if r.Topic != v.topic {
		return failf("%s: record from unexpected topic", where)
	}
	p := r.Partition
	if p < 0 || p >= v.partitions {
		return failf("%s: partition out of range 0..%d", where, v.partitions-1)
	}
	n := v.seen[p]
	if n >= v.want[p] {
		return failf("%s: extra record (duplicate or unexpected): partition already has all %d expected records; key=%s",
			where, v.want[p], brief(r.Key))
	}
	i := int(p) + n*int(v.partitions)
	where += fmt.Sprintf(" (expected index %d)", i)
	if v.nextOffset[p] >= 0 && r.Offset != v.nextOffset[p] {
		return failf("%s: offset not consecutive, expected %d", where, v.nextOffset[p])
	}
	if !bytes.Equal(r.Key, keyOf(i)) || r.Key == nil {
		return failf("%s: key %s, expected %s", where, brief(r.Key), brief(keyOf(i)))
	}
	want := valueOf(i)
	if r.Value == nil || !bytes.Equal(r.Value, want) {
		detail := "nil"
		if r.Value != nil {
			detail = fmt.Sprintf("%d bytes", len(r.Value))
			if len(r.Value) == len(want) {
				for j := range want {
					if r.Value[j] != want[j] {
						detail += fmt.Sprintf(", first difference at byte %d (%d != %d)", j, r.Value[j], want[j])
						break
					}
				}
			}
		}
		return failf("%s: value mismatch: got %s, expected %d bytes", where, detail, len(want))
	}
	if err := checkHeaders(r.Headers, headersOf(i)); err != nil {
		return failf("%s: %v", where, err)
	}
	if r.Attrs.TimestampType() != 0 {
		return failf("%s: timestamp type %d, expected 0 (CreateTime)", where, r.Attrs.TimestampType())
	}
	if ts := r.Timestamp.UnixMilli(); ts != timestampOf(i) {
		return failf("%s: timestamp %d, expected %d", where, ts, timestampOf(i))
	}
	v.seen[p] = n + 1
	v.nextOffset[p] = r.Offset + 1
	v.total++
	return nil
}

// checkHeaders compares exactly, telling a null value (nil) from an empty one.
func checkHeaders(got, want []kgo.RecordHeader) error {
	ok := len(got) == len(want)
	for k := 0; ok && k < len(want); k++ {
		ok = got[k].Key == want[k].Key && bytes.Equal(got[k].Value, want[k].Value) &&
			(got[k].Value == nil) == (want[k].Value == nil)
	}
	if ok {
		return nil
	}
	format := func(hs []kgo.RecordHeader) string {
		s := "["
		for k, h := range hs {
			if k > 0 {
				s += ", "
			}
			s += fmt.Sprintf("(%q, %s)", h.Key, brief(h.Value))
		}
		return s + "]"
	}
	return fmt.Errorf("headers %s, expected %s", format(got), format(want))
}

func (v *verifier) finish() error {
	ok := v.total == v.count
	for p := range v.want {
		ok = ok && v.seen[p] == v.want[p]
	}
	if !ok {
		msg := fmt.Sprintf("consumed %d of %d records; per partition got %v, expected %v", v.total, v.count, v.seen, v.want)
		if v.total < v.count {
			msg += retentionHint
		}
		return failf("%s", msg)
	}
	return nil
}
