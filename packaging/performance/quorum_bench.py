"""Quorum benchmark: a three-node KRaft cluster of krabka beside one of
Apache Kafka 4.3.1, measured in the same run (issue 16's figures).

Each side runs three combined nodes (process.roles=broker,controller) on
loopback, or with `--brokers N` three controllers and N brokers, one side
after the other, with the same keys (Kafka's defaults for every raft and
session timer). Phases, on each side (`--phases` picks some):

- commit latency: CreateTopics of one partition (AdminClient, one topic
  per call, sequential) through a broker that is not the active
  controller, p50/p99 of the call;
- failover: kill -9 the active controller, time until a CreateTopics
  through a survivor succeeds (a new controller committed), `--failovers`
  times (the killed node restarted in between), the median;
- start to unfenced: with `--start-partitions` partitions spread over
  the brokers, SIGTERM one broker, start it again, time from its spawn to
  another broker listing it (DescribeCluster lists unfenced brokers only);
- footprint: RSS of every process once the cluster holds
  `--rss-partitions` partitions (RF 1, spread over the brokers) and
  settled, the largest broker and the largest controller apart.
  Both brokers keep one file open per hosted partition (its segment), so
  a broker's share of the partitions must fit under the fd limit: the
  bench refuses a count that does not (more brokers make room), and
  checks afterwards that every broker holds about its share of open files
  before it measures (a node out of
  descriptors fails to open logs while the metadata still names it the
  leader, and Kafka opens its logs well after the leaders show).

Prints a markdown table (krabka, Kafka, ratio) and one JSON line.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import MIB, BenchError, build, free_port, git_head, proc_status, raise_nofile, say  # noqa: E402

CLUSTER_ID = "cUJ4RmWlRQ2v8ZxmbsMFaw"
SETTLE_SECONDS = 5
# Descriptors a node needs besides one per hosted partition: sockets,
# metadata log, checkpoints, the JVM's jars.
NOFILE_MARGIN = 1500


class Node:
    """One node, combined, controller or broker: its ports, directory and
    process. A port of None is a listener the node does not have."""

    def __init__(self, side, node_id, workdir, voters, ports):
        self.side, self.id = side, node_id
        self.port, self.controller_port = ports
        self.dir = os.path.join(workdir, f"{side.name}-{node_id}")
        os.makedirs(self.dir, exist_ok=True)
        self.config = os.path.join(self.dir, "server.properties")
        roles = ",".join(r for r, port in (("broker", self.port), ("controller", self.controller_port)) if port)
        listeners = ",".join(
            f"{name}://127.0.0.1:{port}"
            for name, port in (("PLAINTEXT", self.port), ("CONTROLLER", self.controller_port))
            if port
        )
        with open(self.config, "w") as f:
            f.write(
                f"process.roles={roles}\nnode.id={node_id}\ncontroller.quorum.voters={voters}\n"
                f"listeners={listeners}\n"
                + (f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\n" if self.port else "")
                + "controller.listener.names=CONTROLLER\n"
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
                f"log.dirs={os.path.join(self.dir, 'data')}\nnum.partitions=1\n"
                "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
                "transaction.state.log.min.isr=1\n"
            )
        side.format(self)
        self.process = None

    @property
    def is_broker(self):
        return self.port is not None

    @property
    def bootstrap(self):
        assert self.is_broker, "a controller-only node has no client listener"
        return f"127.0.0.1:{self.port}"

    def start(self):
        log = open(os.path.join(self.dir, "node.log"), "ab")
        self.process = subprocess.Popen(self.side.command(self), stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        return time.monotonic()

    def kill9(self):
        self.process.kill()
        self.process.wait()
        self.process = None

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


class Krabka:
    name = "krabka"

    def __init__(self, broker_bin, format_bin):
        self.broker_bin, self.format_bin = broker_bin, format_bin

    def format(self, node):
        subprocess.run(
            [self.format_bin, "format", "--config", node.config, "--cluster-id", CLUSTER_ID],
            check=True,
            capture_output=True,
        )

    def command(self, node):
        return [self.broker_bin, node.config]


class Kafka:
    name = "kafka"

    def __init__(self, repo, heap):
        subprocess.run([os.path.join(repo, "tools/kafka-reference/install")], check=True, stdout=sys.stderr)
        self.classpath = os.path.join(repo, "target/kafka-4.3.1/libs/*")
        self.log4j = "-Dlog4j2.configurationFile=" + os.path.join(repo, "tools/kafka-reference/log4j2.properties")
        self.heap = heap

    def format(self, node):
        subprocess.run(
            ["java", self.log4j, "-cp", self.classpath, "kafka.tools.StorageTool", "format"]
            + ["--cluster-id", CLUSTER_ID, "--config", node.config, "--ignore-formatted"],
            check=True,
            capture_output=True,
        )

    def command(self, node):
        return ["java", f"-Xms{self.heap}", f"-Xmx{self.heap}", self.log4j, "-Dkafka.root.loglevel=WARN"] + [
            f"-Dkafka.logs.dir={os.path.join(node.dir, 'app-logs')}",
            "-cp",
            self.classpath,
            "kafka.Kafka",
            node.config,
        ]


CLIENTS = {}


def admin(bootstrap, timeout_ms=30000):
    """One AdminClient per node, kept: a client dropped while its request is
    in flight purges it unanswered."""
    from confluent_kafka.admin import AdminClient

    key = (bootstrap, timeout_ms)
    if key not in CLIENTS:
        CLIENTS[key] = AdminClient(
            {"bootstrap.servers": bootstrap, "socket.timeout.ms": timeout_ms, "log_level": 3}
        )
    return CLIENTS[key]


def uvarint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def quorum_leader(bootstrap, timeout=2.0):
    """The metadata quorum's leader (the active controller) by
    DescribeQuorum v0 (flexible) through `bootstrap`, or None. Not
    DescribeCluster's controller: Kafka's brokers name a random one."""
    import socket
    import struct

    host, port = bootstrap.rsplit(":", 1)
    topic = b"__cluster_metadata"
    body = (
        uvarint(2) + uvarint(len(topic) + 1) + topic  # one topic
        + uvarint(2) + struct.pack(">i", 0) + b"\0"  # one partition, its tags
        + b"\0" + b"\0"  # the topic's tags, the request's
    )
    client_id = b"quorum-bench"
    header = struct.pack(">hhih", 55, 0, 1, len(client_id)) + client_id + b"\0"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            frame = header + body
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            data = sock.recv(size, socket.MSG_WAITALL)
    except OSError:
        return None
    # Response header v1: correlation id, tags; then error, topics, name.
    at = 4 + 1
    (error,) = struct.unpack_from(">h", data, at)
    if error != 0:
        return None
    at += 2 + 1  # the error, the topics' count (one)
    name_length = data[at] - 1
    at += 1 + name_length + 1  # the name, the partitions' count (one)
    _, partition_error, leader = struct.unpack_from(">ihi", data, at)
    return leader if partition_error == 0 and leader >= 0 else None


def controller_and_brokers(bootstrap):
    """The active controller's id and the listed (unfenced) brokers, or None."""
    try:
        cluster = admin(bootstrap, 5000).describe_cluster(request_timeout=5).result()
        return cluster.controller.id if cluster.controller else None, sorted(n.id for n in cluster.nodes)
    except Exception:  # noqa: BLE001 - the node is not serving yet
        return None, []


def wait_until(what, timeout, check, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def create_one(bootstrap, name, partitions=1, timeout=30, fresh=False):
    """CreateTopics of one topic; True once created (or already there).
    `fresh`: through a new client, which learns the controller anew (a
    kept one may wait out its metadata refresh to find the new one)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}) if fresh else admin(bootstrap)
    future = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )[name]
    try:
        future.result()
        return True
    except Exception as e:  # noqa: BLE001 - reported by the caller
        if e.args and isinstance(e.args[0], KafkaError) and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return True
        return False


def create_partitions(bootstrap, prefix, total, per_topic):
    """Creates topics of `per_topic` partitions until `total` partitions exist."""
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap, 120000)
    count = (total + per_topic - 1) // per_topic
    names = [f"{prefix}-{i:04}" for i in range(count)]
    # Under Kafka's (and krabka's) 10,000 records per controller operation:
    # a topic is one record, and one per partition.
    per_request = max(1, 9000 // (per_topic + 1))
    for start in range(0, count, per_request):
        chunk = names[start:start + per_request]
        futures = client.create_topics(
            [NewTopic(n, num_partitions=per_topic, replication_factor=1) for n in chunk],
            operation_timeout=300,
            request_timeout=300,
        )
        for name, future in futures.items():
            future.result()
    return names


def all_led(bootstrap, names):
    metadata = admin(bootstrap, 60000).list_topics(timeout=60)
    return all(
        n in metadata.topics and all(p.leader >= 0 for p in metadata.topics[n].partitions.values()) for n in names
    )


class Cluster:
    """Three voters, ids 1-3: combined nodes, or with `brokers` > 0 three
    controllers and that many brokers (ids 4 on)."""

    def __init__(self, side, workdir, brokers):
        ports = [(None if brokers else free_port(), free_port()) for _ in range(3)]
        ports += [(free_port(), None) for _ in range(brokers)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports[:3]))
        self.nodes = [Node(side, i + 1, workdir, voters, p) for i, p in enumerate(ports)]
        self.brokers = [n for n in self.nodes if n.is_broker]
        self.broker_ids = [n.id for n in self.brokers]
        for node in self.nodes:
            node.start()
        self.wait_for_brokers(180)

    def node(self, node_id):
        return self.nodes[node_id - 1]

    def live(self):
        return [n for n in self.nodes if n.process is not None]

    def wait_for_brokers(self, timeout):
        """Until every broker is listed (unfenced); the active controller."""

        def listed():
            for node in self.live():
                if not node.is_broker:
                    continue
                controller, brokers = controller_and_brokers(node.bootstrap)
                if controller is not None and brokers == self.broker_ids:
                    return controller
            return None

        return wait_until(f"brokers {self.broker_ids} listed", timeout, listed, step=0.05)

    def stop(self):
        for node in self.live():
            node.stop()


def phase_latency(cluster, calls):
    controller = cluster.wait_for_brokers(60)
    through = next(n for n in cluster.brokers if n.id != controller)
    client = admin(through.bootstrap)
    from confluent_kafka.admin import NewTopic

    # A first topic warms the client's connections.
    create_one(through.bootstrap, "warm-up")
    samples = []
    for i in range(calls):
        name = f"latency-{i:05}"
        t0 = time.perf_counter()
        client.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)], operation_timeout=30)[
            name
        ].result()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {
        "commit_p50_ms": statistics.median(samples),
        "commit_p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "commit_calls": calls,
    }


def phase_failovers(cluster, rounds):
    """`rounds` failovers: the median, and every one."""
    times = []
    for _ in range(rounds):
        times.append(phase_failover(cluster)["failover_ms"])
    return {"failover_ms": statistics.median(times), "failover_all_ms": times}


def phase_failover(cluster):
    cluster.wait_for_brokers(60)
    controller = wait_until("the quorum's leader", 60, lambda: quorum_leader(cluster.brokers[0].bootstrap))
    victim = cluster.node(controller)
    survivors = [n for n in cluster.brokers if n.id != controller]
    victim.kill9()
    t0 = time.monotonic()
    attempt = [0]

    def committed():
        # Short attempts, alternating survivors: the figure's resolution is
        # one attempt (a request forwarded to the dead controller waits
        # out its timeout).
        attempt[0] += 1
        survivor = survivors[attempt[0] % len(survivors)]
        return create_one(survivor.bootstrap, f"failover-{attempt[0]}", timeout=0.5, fresh=True)

    wait_until("a CreateTopics to commit after the kill", 120, committed, step=0.0)
    elapsed = (time.monotonic() - t0) * 1000
    victim.start()
    cluster.wait_for_brokers(120)
    return {"failover_ms": elapsed, "killed_controller": controller}


def phase_start(cluster, partitions, per_topic):
    names = create_partitions(cluster.brokers[0].bootstrap, "start", partitions, per_topic)
    wait_until("every start partition led", 600, lambda: all_led(cluster.brokers[0].bootstrap, names), step=1)
    restarted, other = cluster.brokers[-1], cluster.brokers[0]
    restarted.stop()
    gone = restarted.id
    wait_until("the stopped broker to be unlisted", 120, lambda: gone not in controller_and_brokers(other.bootstrap)[1])
    t0 = restarted.start()
    wait_until("the restarted broker to be unfenced", 600, lambda: gone in controller_and_brokers(other.bootstrap)[1])
    elapsed = (time.monotonic() - t0) * 1000
    return {"start_to_unfenced_ms": elapsed, "start_partitions": partitions}


def open_files_of(node):
    return len(os.listdir(f"/proc/{node.process.pid}/fd"))


def largest(nodes, prefix):
    """RSS of `nodes`, and the largest one's split, under `prefix`."""
    status = [proc_status(n.process.pid) for n in nodes]
    rss = [s["VmRSS"] for s in status]
    top = status[rss.index(max(rss))]
    return {
        f"{prefix}rss_bytes": rss,
        f"{prefix}rss_max_bytes": max(rss),
        f"{prefix}rss_max_anon_bytes": top.get("RssAnon"),
        f"{prefix}rss_max_file_bytes": top.get("RssFile"),
    }


def phase_footprint(cluster, existing, partitions, per_topic):
    more = max(0, partitions - existing)
    bootstrap = cluster.brokers[0].bootstrap
    names = create_partitions(bootstrap, "rss", more, per_topic) if more else []
    if names:
        wait_until("every rss partition led", 1800, lambda: all_led(bootstrap, names), step=2)
    # Led in the metadata is not yet opened on disk: a broker creates its
    # logs as it applies the records, Kafka's well after the leaders show.
    share = max(partitions, existing) // len(cluster.brokers)
    wait_until(
        f"every broker to hold ~{share} open partition logs",
        900,
        lambda: min(open_files_of(n) for n in cluster.brokers) >= share * 0.9,
        step=2,
    )
    time.sleep(SETTLE_SECONDS)
    results = {"rss_partitions": max(partitions, existing), "open_files": [open_files_of(n) for n in cluster.nodes]}
    results.update(largest(cluster.nodes, ""))
    if len(cluster.brokers) < len(cluster.nodes):
        results.update(largest(cluster.brokers, "broker_"))
        results.update(largest([n for n in cluster.nodes if not n.is_broker], "controller_"))
    return results


PHASES = ("latency", "failover", "start", "footprint")


def measure(side, workdir, args):
    shape = f"three controllers and {args.brokers} brokers" if args.brokers else "three combined nodes"
    say(f"{side.name}: starting {shape}")
    cluster = Cluster(side, workdir, args.brokers)
    phases = args.phases.split(",")
    results = {}
    try:
        if "latency" in phases:
            say(f"{side.name}: commit latency, {args.calls} CreateTopics")
            results.update(phase_latency(cluster, args.calls))
        if "failover" in phases:
            say(f"{side.name}: failover")
            results.update(phase_failovers(cluster, args.failovers))
        existing = 0
        if "start" in phases:
            say(f"{side.name}: start to unfenced with {args.start_partitions} partitions")
            results.update(phase_start(cluster, args.start_partitions, args.per_topic))
            existing = args.start_partitions
        if "footprint" in phases:
            say(f"{side.name}: footprint with {args.rss_partitions} partitions")
            results.update(phase_footprint(cluster, existing, args.rss_partitions, args.per_topic))
    finally:
        cluster.stop()
    say(f"{side.name}: {results}")
    return results


ROWS = [
    ("commit latency p50 (CreateTopics, 1 partition)", "commit_p50_ms", "ms"),
    ("commit latency p99", "commit_p99_ms", "ms"),
    ("kill -9 of the active controller to a commit (median)", "failover_ms", "ms"),
    ("start to unfenced", "start_to_unfenced_ms", "ms"),
    ("RSS, largest process", "rss_max_bytes", "MiB"),
    ("of which anonymous", "rss_max_anon_bytes", "MiB"),
    ("of which file-backed", "rss_max_file_bytes", "MiB"),
    ("RSS, largest broker", "broker_rss_max_bytes", "MiB"),
    ("RSS, largest controller", "controller_rss_max_bytes", "MiB"),
]


def report(args, krabka, kafka):
    def value(results, key, unit):
        v = results.get(key)
        if v is None:
            return None
        return v / MIB if unit == "MiB" else v

    print(f"`{' '.join(sys.argv)}` at {git_head(args.repo)}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print()
    shape = f"3 controllers + {args.brokers} brokers" if args.brokers else "3 combined nodes"
    print(
        f"{shape}; start: {args.start_partitions} partitions; RSS: {args.rss_partitions} partitions; "
        f"Kafka heap {args.heap}"
    )
    print()
    print("| metric | krabka | Kafka 4.3.1 | Kafka / krabka |")
    print("|---|---:|---:|---:|")
    for label, key, unit in ROWS:
        a, b = value(krabka, key, unit), value(kafka, key, unit)
        if a is None and b is None:
            continue
        ratio = f"{b / a:.1f}x" if a and b else "-"
        fmt = (lambda v: f"{v:,.1f} {unit}" if v is not None else "-")
        print(f"| {label} | {fmt(a)} | {fmt(b)} | {ratio} |")
    print()
    print(json.dumps({"krabka": krabka, "kafka": kafka, "args": vars(args)}, default=str))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    parser.add_argument("--broker-bin")
    parser.add_argument("--format-bin")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--start-partitions", type=int, default=10000)
    # 18,000 hosted by each node: under the 20,000 descriptors this machine allows.
    parser.add_argument("--rss-partitions", type=int, default=54000)
    parser.add_argument(
        "--brokers", type=int, default=0, help="three controllers and this many brokers (0: three combined nodes)"
    )
    parser.add_argument("--phases", default=",".join(PHASES), help="some of " + ",".join(PHASES))
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--heap", default="1g", help="Kafka's -Xms/-Xmx")
    parser.add_argument("--sides", default="krabka,kafka")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    nofile, _ = raise_nofile()
    unknown = set(args.phases.split(",")) - set(PHASES)
    if unknown:
        raise BenchError(f"unknown phases {sorted(unknown)}: pick from {','.join(PHASES)}")
    per_node = -(-max(args.rss_partitions, args.start_partitions) // (args.brokers or 3))
    if per_node + NOFILE_MARGIN > nofile:
        raise BenchError(
            f"{per_node} partitions per broker need {per_node + NOFILE_MARGIN} open files, over the limit of "
            f"{nofile} (and the hard limit could not be raised): lower --rss-partitions or raise --brokers"
        )
    if args.broker_bin and args.format_bin:
        broker_bin, format_bin = args.broker_bin, args.format_bin
    else:
        broker_bin, format_bin = build(args.repo)
    workdir = args.workdir or tempfile.mkdtemp(prefix="quorum-bench-")
    say(f"work directory {workdir}")
    sides = args.sides.split(",")
    krabka = measure(Krabka(broker_bin, format_bin), workdir, args) if "krabka" in sides else {}
    kafka = measure(Kafka(args.repo, args.heap), workdir, args) if "kafka" in sides else {}
    report(args, krabka, kafka)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        say(f"failed: {e}")
        sys.exit(1)
