"""Shared pieces of the consumer group scenario scripts (stdlib only).

Used by `scenario`, `resume`, `resume-check` and `member` in this directory.
The member programs (one per client) share one CLI and output contract:

  PROG group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]

  OUTPUT_FILE gets one line "partition offset key" per consumed record,
  appended, flushed and fsynced per poll batch before the batch is committed.
  stdout: one JSON line {"member": ID, "consumed": N} at exit.
  stderr: timestamped rebalance log ("assigned [..] now [..]", "revoked ...").

Records are produced with `franz-check produce-range BOOTSTRAP TOPIC 12 FIRST
COUNT CODEC` in chunks whose FIRST and COUNT are multiples of the partition
count, so on a fresh topic partition p offset o holds the contract index
p + PARTITIONS*o, key "k-<index>".
"""

import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
KAFKA_CLI = os.environ.get("KAFKA_CLI", os.path.join(ROOT, "tools", "kafka-reference", "kafka-cli"))
FRANZ = os.path.join(ROOT, "target", "client-bin", "franz-check")
PARTITIONS = 12

CLIENTS = ("java", "confluent", "kafka-python", "franz")
# Which group protocols each client's group-member supports.
SUPPORTED = {
    "java": ("classic", "consumer"),
    "confluent": ("classic", "consumer"),
    "kafka-python": ("classic",),
    "franz": ("classic", "consumer"),
}


class Failed(Exception):
    """A scenario assertion did not hold."""


def log(msg):
    t = time.time()
    sys.stderr.write("%s.%03d %s\n" % (time.strftime("%H:%M:%S", time.localtime(t)), int(t * 1000) % 1000, msg))
    sys.stderr.flush()


def member_command(client):
    """argv prefix that runs CLIENT's group-member mode."""
    py = os.path.join(ROOT, "tests", "clients", "python")
    if client == "java":
        return [os.path.join(ROOT, "tests", "clients", "java", "run"), "group-member"]
    if client == "confluent":
        return [os.path.join(py, "check_confluent.py"), "group-member"]
    if client == "kafka-python":
        return [os.path.join(py, "check_kafka_python.py"), "group-member"]
    if client == "franz":
        return [FRANZ, "group-member"]
    raise ValueError("unknown client %r (one of %s)" % (client, ", ".join(CLIENTS)))


def ensure_built(client):
    """Builds/installs what CLIENT needs, plus franz-check (the producer)."""
    steps = [[os.path.join(ROOT, "tests", "clients", "go", "build")]]
    if client == "java":
        steps.append([os.path.join(ROOT, "tests", "clients", "java", "build")])
    if client in ("confluent", "kafka-python"):
        steps.append([os.path.join(ROOT, "tests", "clients", "python", "install")])
    for argv in steps:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise Failed("%s failed:\n%s" % (" ".join(argv), r.stdout))


def member_env():
    """Environment for member processes: smaller JVMs (2 shared cores)."""
    env = dict(os.environ)
    env.setdefault("CLIENT_CHECK_JAVA_OPTS", "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    return env


def kafka_cli(*args, timeout=120):
    """Runs a Kafka CLI tool; returns (returncode, stdout, stderr)."""
    r = subprocess.run([KAFKA_CLI] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def create_topic(bootstrap, topic, partitions=PARTITIONS, recreate=True):
    """Creates TOPIC (retention.ms=-1: the contract's timestamps are from 2023).

    recreate: delete a leftover topic of that name first and retry the create
    while the deletion is in progress.
    """
    if recreate:
        rc, out, err = kafka_cli("kafka-topics", "--bootstrap-server", bootstrap, "--delete",
                                 "--if-exists", "--topic", topic)
        if rc != 0:
            raise Failed("kafka-topics --delete %s: rc %d: %s" % (topic, rc, (out + err).strip()))
    deadline = time.monotonic() + 60
    while True:
        rc, out, err = kafka_cli("kafka-topics", "--bootstrap-server", bootstrap, "--create",
                                 "--topic", topic, "--partitions", str(partitions),
                                 "--config", "retention.ms=-1")
        text = (out + err).strip()
        if rc == 0 and "Created topic" in out:
            return
        # A topic being deleted still "exists" for a moment.
        if "TopicExistsException" in text and recreate and time.monotonic() < deadline:
            time.sleep(1)
            continue
        raise Failed("kafka-topics --create %s: rc %d: %s" % (topic, rc, text))


def delete_group(bootstrap, group):
    """Deletes GROUP if it exists (leftover committed offsets of an earlier run)."""
    rc, out, err = kafka_cli("kafka-consumer-groups", "--bootstrap-server", bootstrap,
                             "--delete", "--group", group)
    text = (out + err).strip()
    if "GroupIdNotFoundException" in text or "was successful" in text:
        return
    raise Failed("kafka-consumer-groups --delete --group %s: rc %d: %s" % (group, rc, text))


def produce_range(bootstrap, topic, first, count, codec="none", partitions=PARTITIONS):
    """franz-check produce-range; returns {partition: last offset}."""
    r = subprocess.run([FRANZ, "produce-range", bootstrap, topic, str(partitions), str(first), str(count), codec],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode != 0:
        raise Failed("produce-range %s %d..%d: rc %d: %s" % (topic, first, first + count - 1, r.returncode,
                                                             r.stderr.strip()))
    res = json.loads(r.stdout.strip().splitlines()[-1])
    return {int(p): int(o) for p, o in res["last_offsets"].items()}


_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


def describe_group(bootstrap, group, topic):
    """kafka-consumer-groups --describe: {partition: (current, log_end, lag)}
    (None where the tool prints "-"), plus the raw text."""
    rc, out, err = kafka_cli("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe",
                             "--group", group)
    text = out + err
    if rc != 0 or "Error:" in text:
        raise Failed("kafka-consumer-groups --describe --group %s: rc %d: %s" % (group, rc, text.strip()))
    rows = {}
    for line in out.splitlines():
        m = _ROW.match(line)
        if not m or m.group(1) != group or m.group(2) != topic:
            continue

        def num(s):
            return None if s == "-" else int(s)

        rows[int(m.group(3))] = (num(m.group(4)), num(m.group(5)), num(m.group(6)))
    return rows, text


def check_committed(bootstrap, group, topic, end_offsets, attempts=5):
    """Committed offset == log end offset == end_offsets[p], lag 0, for every
    partition. Retries a few times (the last commits/leaves may be settling).
    Returns the parsed rows."""
    problems = ["no attempt"]
    text = ""
    rows = {}
    for attempt in range(attempts):
        if attempt:
            time.sleep(2)
        rows, text = describe_group(bootstrap, group, topic)
        problems = []
        for p in range(len(end_offsets)):
            if p not in rows:
                problems.append("partition %d missing" % p)
                continue
            cur, leo, lag = rows[p]
            if cur != end_offsets[p] or leo != end_offsets[p] or lag != 0:
                problems.append("partition %d: committed %s, log end %s, lag %s; expected %d/%d/0"
                                % (p, cur, leo, lag, end_offsets[p], end_offsets[p]))
        extra = sorted(set(rows) - set(range(len(end_offsets))))
        if extra:
            problems.append("unexpected partitions %s" % extra)
        if not problems:
            return rows
    raise Failed("describe --group %s: %s\n%s" % (group, "; ".join(problems), text.strip()))


def group_type(bootstrap, group):
    """TYPE of GROUP from kafka-consumer-groups --list --type ("Classic",
    "Consumer", ...), or None when it is not listed."""
    rc, out, err = kafka_cli("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--list", "--type")
    if rc != 0 or "Error:" in out + err:
        raise Failed("kafka-consumer-groups --list --type: rc %d: %s" % (rc, (out + err).strip()))
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == group:
            return f[1]
    return None


def parse_output(path):
    """Lines of a member output file as [(partition, offset, key)]."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            parts = raw.decode("utf-8", "replace").rstrip("\n").split(" ")
            if len(parts) != 3:
                raise Failed("%s line %d: malformed %r" % (path, n, raw))
            out.append((int(parts[0]), int(parts[1]), parts[2]))
    return out


def expected_key(p, o, partitions=PARTITIONS):
    return "k-%d" % (p + partitions * o)


class Tail:
    """Incrementally reads a member output file; remembers when (monotonic
    time) each line was first seen by the scenario."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.partial = b""
        self.lines = []  # (partition, offset, key, seen_at)

    def update(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return 0
        if not data:
            return 0
        self.pos += len(data)
        data = self.partial + data
        chunks = data.split(b"\n")
        self.partial = chunks.pop()
        now = time.monotonic()
        for raw in chunks:
            p, o, k = raw.decode("utf-8", "replace").split(" ")
            self.lines.append((int(p), int(o), k, now))
        return len(chunks)

    def partitions_since(self, t):
        return {p for p, _, _, seen in self.lines if seen >= t}

    def last_seen(self):
        return self.lines[-1][3] if self.lines else None


def summary_line(d):
    sys.stdout.write(json.dumps(d, separators=(",", ":"), sort_keys=False) + "\n")
    sys.stdout.flush()
