"""Shared pieces of the Krabka black-box client checks (Python side).

The deterministic record contract (shared with the Java and Go checkers):
for global index i in 0..COUNT

  partition = i % PARTITIONS
  key       = UTF-8 "k-<i>"
  value     = 1 + (i*37 % 2000) bytes, byte j = (i + j) % 251
  headers   = [("idx", UTF-8 decimal i), ("h2", b"")]
  timestamp = 1700000000000 + i  (CreateTime, milliseconds)

Records of one partition are produced in increasing i. A consumer that reads
every partition from the start must see, in partition p, the indexes
p, p+PARTITIONS, p+2*PARTITIONS, ... in that order, at consecutive offsets,
and nothing else.

Every check prints exactly one JSON line on stdout when it passes and exits 0;
on any error or mismatch it prints a message starting with the program name on
stderr and exits non-zero (1 = check failed, 2 = usage error).
"""

import json
import os
import sys
import time

BASE_TIMESTAMP_MS = 1700000000000
# The contract timestamps are from November 2023: a topic with time-based
# retention (Kafka's default is 7 days) loses them at its next retention check.
RETENTION_HINT = (" (if records are missing from the start: contract timestamps are from 2023, "
                  "so time-based retention deletes them; create topics with retention.ms=-1)")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Seconds a consumer waits for COUNT records before failing; the brief fixes
# 60 s, the environment variable only exists to make negative tests quicker.
CONSUME_TIMEOUT_S = float(os.environ.get("KRABKA_CHECK_TIMEOUT_S", "60"))
# Extra poll time after COUNT records arrived, to catch duplicates/extras.
LINGER_AFTER_S = float(os.environ.get("KRABKA_CHECK_EXTRA_POLL_S", "1"))
# Seconds the producer waits for all delivery reports.
PRODUCE_TIMEOUT_S = float(os.environ.get("KRABKA_CHECK_PRODUCE_TIMEOUT_S", "60"))


class CheckFailed(Exception):
    """A mismatch between what the broker returned and the contract."""


def ensure_venv():
    """Re-exec under <repo>/target/client-venv when started by another Python.

    Lets `tests/clients/python/check_*.py ...` work directly once
    tests/clients/python/install has run.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(os.path.join(here, "..", "..", ".."))
    venv = os.path.join(root, "target", "client-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if os.environ.get("KRABKA_CHECK_NO_REEXEC"):
        return
    if os.path.exists(py):
        os.environ["KRABKA_CHECK_NO_REEXEC"] = "1"
        os.execv(py, [py, os.path.abspath(sys.argv[0])] + sys.argv[1:])
    # else: fall through, the import of the client library will fail loudly


def key_of(i):
    return ("k-%d" % i).encode("utf-8")


def value_of(i):
    n = 1 + (i * 37 % 2000)
    return bytes((i + j) % 251 for j in range(n))


def headers_of(i):
    return [("idx", str(i).encode("utf-8")), ("h2", b"")]


def timestamp_of(i):
    return BASE_TIMESTAMP_MS + i


def partition_of(i, partitions):
    return i % partitions


def expected_per_partition(count, partitions):
    """Number of records partition p must hold, for each p."""
    return [len(range(p, count, partitions)) for p in range(partitions)]


def _brief(b, limit=40):
    if b is None:
        return "None"
    r = repr(bytes(b))
    return r if len(r) <= limit else r[:limit] + "...(%d bytes)" % len(b)


class Verifier:
    """Checks consumed records one by one against the contract.

    h2_may_be_none: accept None for the empty "h2" header value. Only for a
    client that cannot tell an empty header value from a null one.
    """

    def __init__(self, topic, partitions, count, h2_may_be_none=False):
        self.topic = topic
        self.partitions = partitions
        self.count = count
        self.h2_may_be_none = h2_may_be_none
        self.want = expected_per_partition(count, partitions)
        self.seen = [0] * partitions  # records seen per partition
        self.next_offset = [None] * partitions
        self.first_offset = [None] * partitions
        self.total = 0

    def done(self):
        return self.total >= self.count

    def check(self, topic, partition, offset, key, value, headers, ts_type_is_create, timestamp):
        where = "topic %s partition %s offset %s" % (topic, partition, offset)
        if topic != self.topic:
            raise CheckFailed("%s: record from unexpected topic" % where)
        if not (0 <= partition < self.partitions):
            raise CheckFailed("%s: partition out of range 0..%d" % (where, self.partitions - 1))
        n = self.seen[partition]
        if n >= self.want[partition]:
            raise CheckFailed(
                "%s: extra record (duplicate or unexpected): partition already has all %d expected "
                "records; key=%s" % (where, self.want[partition], _brief(key)))
        i = partition + n * self.partitions
        where += " (expected index %d)" % i
        if self.next_offset[partition] is None:
            self.first_offset[partition] = offset
        elif offset != self.next_offset[partition]:
            raise CheckFailed("%s: offset not consecutive, expected %d" % (where, self.next_offset[partition]))
        if key != key_of(i):
            raise CheckFailed("%s: key %s, expected %s" % (where, _brief(key), _brief(key_of(i))))
        exp_value = value_of(i)
        if value is None or bytes(value) != exp_value:
            detail = "None" if value is None else "%d bytes" % len(value)
            if value is not None and len(value) == len(exp_value):
                j = next(j for j in range(len(value)) if value[j] != exp_value[j])
                detail += ", first difference at byte %d (%d != %d)" % (j, value[j], exp_value[j])
            raise CheckFailed("%s: value mismatch: got %s, expected %d bytes" % (where, detail, len(exp_value)))
        self._check_headers(where, i, headers)
        if not ts_type_is_create:
            raise CheckFailed("%s: timestamp type is not CreateTime" % where)
        if timestamp != timestamp_of(i):
            raise CheckFailed("%s: timestamp %s, expected %d" % (where, timestamp, timestamp_of(i)))
        self.seen[partition] = n + 1
        self.next_offset[partition] = offset + 1
        self.total += 1

    def _check_headers(self, where, i, headers):
        got = [(k, None if v is None else bytes(v)) for (k, v) in (headers or [])]
        exp = headers_of(i)
        ok = len(got) == len(exp)
        if ok:
            for (gk, gv), (ek, ev) in zip(got, exp):
                if gk != ek:
                    ok = False
                elif gv != ev and not (gk == "h2" and gv is None and self.h2_may_be_none):
                    ok = False
        if not ok:
            raise CheckFailed("%s: headers %r, expected %r" % (where, got, exp))

    def finish(self):
        if self.total != self.count or self.seen != self.want:
            raise CheckFailed(
                "consumed %d of %d records; per partition got %s, expected %s%s"
                % (self.total, self.count, self.seen, self.want,
                   RETENTION_HINT if self.total < self.count else ""))


def check_delivery_offsets(delivered, partitions):
    """delivered: list indexed by i of (partition, offset). Offsets of one
    partition must be consecutive in the order of i."""
    last = [None] * partitions
    for i, (p, off) in enumerate(delivered):
        if p != partition_of(i, partitions):
            raise CheckFailed("record %d was delivered to partition %d, expected %d"
                              % (i, p, partition_of(i, partitions)))
        if off is None or off < 0:
            raise CheckFailed("record %d: delivery report has no offset (%r)" % (i, off))
        if last[p] is not None and off != last[p] + 1:
            raise CheckFailed("record %d: partition %d offset %d follows %d, not consecutive"
                              % (i, p, off, last[p]))
        last[p] = off


def parse_args(prog, argv):
    usage = ("usage: %s produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC\n"
             "       %s consume BOOTSTRAP TOPIC PARTITIONS COUNT\n"
             "CODEC: %s" % (prog, prog, "|".join(CODECS)))
    try:
        mode = argv[0]
        if mode == "produce" and len(argv) == 6:
            codec = argv[5]
            if codec not in CODECS:
                raise ValueError("unknown codec %r" % codec)
        elif mode == "consume" and len(argv) == 5:
            codec = None
        else:
            raise ValueError("wrong arguments")
        bootstrap, topic = argv[1], argv[2]
        partitions, count = int(argv[3]), int(argv[4])
        if partitions < 1 or count < 0:
            raise ValueError("PARTITIONS must be >= 1 and COUNT >= 0")
    except (IndexError, ValueError) as e:
        sys.stderr.write("%s: %s\n%s\n" % (prog, e, usage))
        sys.exit(2)
    return mode, bootstrap, topic, partitions, count, codec


def run(prog, produce, consume):
    """Parses sys.argv, runs produce or consume, prints the JSON line."""
    mode, bootstrap, topic, partitions, count, codec = parse_args(prog, sys.argv[1:])
    start = time.monotonic()
    try:
        if mode == "produce":
            produce(bootstrap, topic, partitions, count, codec)
            result = {"produced": count}
        else:
            consume(bootstrap, topic, partitions, count)
            result = {"consumed": count}
    except CheckFailed as e:
        sys.stderr.write("%s %s: FAILED: %s\n" % (prog, mode, e))
        sys.exit(1)
    except Exception as e:  # client errors: report them the same way
        sys.stderr.write("%s %s: ERROR: %s: %s\n" % (prog, mode, type(e).__name__, e))
        sys.exit(1)
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    if os.environ.get("KRABKA_CHECK_VERBOSE"):
        sys.stderr.write("%s %s: ok in %.2fs\n" % (prog, mode, time.monotonic() - start))


# ---------------------------------------------------------------------------
# group-member mode (consumer group scenarios, tests/clients/groups/)
#
#   PROG group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]
#
# The client-specific loop lives in check_confluent.py / check_kafka_python.py;
# this is the shared part: argument parsing, the output file (one line
# "partition offset key" per record, appended, flushed and fsynced per poll
# batch before the batch is committed), timestamped stderr logging, SIGTERM
# and idle-exit handling, and the final {"member":...,"consumed":N} line.

# KRABKA_GROUP_COMMIT_DELAY_MS: a pause between writing a batch and committing
# it, to widen the processed-but-uncommitted window (the scenarios kill a
# member inside it).
GROUP_COMMIT_DELAY_S = max(0.0, float(os.environ.get("KRABKA_GROUP_COMMIT_DELAY_MS") or 0) / 1000)

GROUP_MEMBER_USAGE = ("usage: %s group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE "
                      "[IDLE_EXIT_SECONDS]\nPROTOCOL: classic|consumer")


def parse_group_member_args(prog, argv):
    """argv after the mode; exits 2 on a usage error."""
    try:
        if len(argv) not in (5, 6):
            raise ValueError("group-member takes 5 or 6 arguments, got %d" % len(argv))
        bootstrap, topic, group, protocol, out = argv[:5]
        if protocol not in ("classic", "consumer"):
            raise ValueError("PROTOCOL must be classic or consumer, got %r" % protocol)
        idle = None
        if len(argv) == 6:
            idle = int(argv[5])
            if idle < 1:
                raise ValueError("IDLE_EXIT_SECONDS must be >= 1")
    except ValueError as e:
        sys.stderr.write("%s: %s\n%s\n" % (prog, e, GROUP_MEMBER_USAGE % prog))
        sys.exit(2)
    return bootstrap, topic, group, protocol, out, idle


def utc_stamp():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


class GroupMemberState:
    """Output file, stop flag, idle timer and summary of one group member."""

    def __init__(self, client, protocol, out_path, idle_s):
        import signal
        self.label = "group-member[%s %s pid %d]" % (client, protocol, os.getpid())
        self.out = open(out_path, "ab")
        self.idle_s = idle_s
        self.consumed = 0
        self.member_id = ""
        self.stop = False
        self.last_record = time.monotonic()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.stop = True

    def log(self, msg):
        sys.stderr.write("%s %s %s\n" % (utc_stamp(), self.label, msg))
        sys.stderr.flush()

    def write_batch(self, rows):
        """rows: (partition, offset, key bytes or None). Durable on return
        (then sleeps KRABKA_GROUP_COMMIT_DELAY_MS, if set, before the caller
        commits)."""
        if not rows:
            return
        buf = bytearray()
        for p, off, key in rows:
            buf += b"%d %d " % (p, off)
            buf += b"-" if key is None else key
            buf += b"\n"
        self.out.write(buf)
        self.out.flush()
        os.fsync(self.out.fileno())
        self.consumed += len(rows)
        self.last_record = time.monotonic()
        if GROUP_COMMIT_DELAY_S > 0:
            time.sleep(GROUP_COMMIT_DELAY_S)

    def idle_expired(self):
        if self.idle_s is None or self.consumed == 0:
            return False
        if time.monotonic() - self.last_record >= self.idle_s:
            self.log("idle for %d s, exiting" % self.idle_s)
            return True
        return False

    def finish(self, error=None):
        """Prints the summary line; returns the exit status."""
        try:
            self.out.close()
        except OSError as e:
            self.log("closing the output file: %s" % e)
        status = 0
        if error is not None:
            self.log("FAIL: %s" % error)
            status = 1
        else:
            self.log("closed, consumed %d" % self.consumed)
        sys.stdout.write(json.dumps({"member": self.member_id, "consumed": self.consumed},
                                    separators=(",", ":")) + "\n")
        sys.stdout.flush()
        return status


def partitions_str(parts):
    return "[%s]" % ",".join(str(p) for p in sorted(parts))
