"""Side-by-side runner: krabka against Apache Kafka 4.3.1 (or against another
krabka build), the same Java workload, the same CPU and file limits.

Run through the `side-by-side` wrapper next to this file. For every round and
every cell of regression-contract.json it starts each side on a fresh data
directory, pinned to the broker CPU set, creates fresh 12-partition topics,
warms up, runs BrokerPerformanceWorkload pinned to the client CPU set, and
samples the broker's CPU time and RSS every 250 ms. CPU time comes from a
cpuacct cgroup made for the trial (nanoseconds, threads and children that
exited included) where the kernel offers one, else from utime+stime of the
process tree in clock ticks (10 ms: at small scales a cell's whole broker CPU
is a few dozen ticks, and the quantisation alone can exceed the contract's
variance budget). The side that goes first alternates from round to round.
Each broker runs under the CPU quota the contract names (broker_cpu_quota,
a CPU cgroup per trial; --broker-cpu-quota overrides it), so that the broker,
not the client, is the limit; summary.md says how often the quota bound.

Output directory (--out): runs.csv (one row per trial), summary.md (medians
and krabka/reference ratios), chart.svg (records/s and CPU per record, each
side's median and spread over the rounds), record.json (the performance record that
tools/parse-benches judges), and logs/ with every broker and workload log.
"""

import argparse
import csv
import datetime
import hashlib
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

from chart import svg as chart_svg
from loadgen_client import Loadgen, build_loadgen
from benchlib import (
    CLK_TCK,
    MIB,
    BenchError,
    build,
    create_topics,
    free_port,
    git_head,
    raise_nofile,
    run,
    say,
    sha256,
    write_config,
)

SAMPLE_SECONDS = 0.25
METRICS = ("records_per_second", "cpu_us_per_record", "peak_rss_bytes", "p99_latency_ms")

# Records per cell at --scale 1. Saturating cells are sized to run for
# roughly 10-30 s on the 2-core machine; the rate cell is 30 s at its rate.
BASE_RECORDS = {
    "1k-random-lz4-p12-saturate": 1_000_000,
    "100b-random-lz4-p12-saturate": 2_000_000,
    "1k-random-none-p12-saturate": 1_000_000,
    "1k-zeros-lz4-p12-saturate": 1_000_000,
    "100k-random-lz4-p12-saturate": 10_000,
    # In all, over the cell's producer/consumer pairs.
    "1k-random-lz4-4x12-saturate": 1_000_000,
    # Capacity cells (tools/loadgen): about 10 s against krabka, 30-40 s
    # against Kafka; the fan-out cell's readers read it three times.
    "cap-1k-random-lz4-p12": 4_000_000,
    "cap-100b-random-lz4-p12": 20_000_000,
    "cap-1k-random-none-p12": 4_000_000,
    "cap-1k-zeros-lz4-p12": 4_000_000,
    "cap-100k-random-lz4-p12": 40_000,
    "cap-1k-random-lz4-p12-fanout3": 2_000_000,
    "idle-to-burst": 500_000,
    # The mixed cell's flat-out pairs, in all; its rate pairs run
    # RATE_SECONDS at their rate.
    "fresh-256m-3x12-3x12at20k": 600_000,
}
RATE_SECONDS = 30
# Warm-up before each measured run (not for idle-to-burst): this many bytes
# of values in the cell's shape, to a separate topic on the same broker.
WARMUP_BYTES = 100 * MIB


# --------------------------------------------------------------------------
# Process tree readings

def process_tree(root_pid):
    """The pid and all its descendants (scans /proc once)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(children.get(pid, ()))
    return tree


def tree_reading(root_pid):
    """(cpu seconds, rss bytes) summed over the process tree; reaped children
    count through cutime/cstime."""
    cpu, rss = 0.0, 0
    for pid in process_tree(root_pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read()
            rest = fields[fields.rindex(")") + 2:].split()
            cpu += sum(int(v) for v in rest[11:15]) / CLK_TCK
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue  # exited between the scan and the read
    return cpu, rss


CPUACCT_ROOT = "/sys/fs/cgroup/cpuacct"


class CpuAccount:
    """A cpuacct cgroup (v1) holding one broker and everything it starts, so
    its CPU time reads in nanoseconds. `available()` is false where the
    hierarchy is missing or not writable; callers then fall back to ticks."""

    def __init__(self, tag):
        self.path = os.path.join(CPUACCT_ROOT, f"krabka-side-by-side-{os.getpid()}-{tag}")
        os.makedirs(self.path, exist_ok=True)

    @staticmethod
    def available():
        return os.access(CPUACCT_ROOT, os.W_OK) and os.path.exists(os.path.join(CPUACCT_ROOT, "cpuacct.usage"))

    def join_self(self):
        """Runs in the child between fork and exec: it joins before it can
        start anything, so no descendant escapes the account."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def seconds(self):
        with open(os.path.join(self.path, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass  # a process still in it; the next boot clears it


class CpuQuota:
    """A CPU cgroup capping a broker (and everything it starts) at `cores`:
    cgroup v2's `cpu.max` where the unified hierarchy has the cpu controller,
    else v1's `cpu.cfs_quota_us` (this machine mounts v1's cpu controller at
    /sys/fs/cgroup/cpu). Every trial gets its own group, removed after."""

    PERIOD_US = 100_000

    def __init__(self, cores, tag):
        self.cores = cores
        self.root, self.version = CpuQuota.hierarchy()
        self.path = os.path.join(self.root, f"krabka-side-by-side-{os.getpid()}-{tag}-quota")
        os.makedirs(self.path, exist_ok=True)
        quota = max(1000, round(cores * self.PERIOD_US))
        if self.version == 2:
            self._write("cpu.max", f"{quota} {self.PERIOD_US}")
        else:
            self._write("cpu.cfs_period_us", str(self.PERIOD_US))
            self._write("cpu.cfs_quota_us", str(quota))

    @staticmethod
    def hierarchy(v1_root="/sys/fs/cgroup/cpu", v2_root="/sys/fs/cgroup/unified"):
        """(root, version) of the hierarchy that offers CPU quotas."""
        controllers = os.path.join(v2_root, "cgroup.controllers")
        if os.path.exists(controllers):
            with open(controllers) as f:
                if "cpu" in f.read().split():
                    return v2_root, 2
        if os.path.exists(os.path.join(v1_root, "cpu.cfs_quota_us")):
            return v1_root, 1
        raise BenchError("--broker-cpu-quota: no cgroup hierarchy with CPU quotas (v2 cpu.max or v1 cpu.cfs_quota_us)")

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def join_self(self):
        """Runs in the child between fork and exec, as CpuAccount.join_self."""
        self._write("cgroup.procs", str(os.getpid()))

    def throttled_periods(self):
        """(periods, throttled periods) so far: how often the quota bound."""
        stat = {}
        with open(os.path.join(self.path, "cpu.stat")) as f:
            for line in f:
                key, _, value = line.partition(" ")
                stat[key] = int(value)
        return stat.get("nr_periods", 0), stat.get("nr_throttled", 0)

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass  # a process still in it; the next boot clears it


class Sampler:
    """Samples the brokers' process trees every 250 ms; keeps each broker's
    peak RSS and every (time, cpu, rss) sample (cpu summed over the brokers,
    rss of the largest). CPU comes from `account` when given."""

    def __init__(self, pids, account=None):
        self.pids = list(pids)
        self.account = account
        self.samples = []
        self.peak_rss_by_pid = dict.fromkeys(self.pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def peak_rss(self):
        """The largest broker's peak: with several brokers, RSS per broker."""
        return max(self.peak_rss_by_pid.values())

    def _reading(self):
        readings = {pid: tree_reading(pid) for pid in self.pids}
        cpu = sum(c for c, _ in readings.values())
        return (self.account.seconds() if self.account else cpu), {pid: r for pid, (_, r) in readings.items()}

    def _loop(self):
        while True:
            cpu, rss = self._reading()
            self.samples.append((time.monotonic(), cpu, max(rss.values())))
            for pid, value in rss.items():
                self.peak_rss_by_pid[pid] = max(self.peak_rss_by_pid[pid], value)
            if self._stop.wait(SAMPLE_SECONDS):
                return

    def cpu_now(self):
        return self._reading()[0]

    def stop(self):
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------
# Brokers

def pinned(cpus, account=None, quota=None):
    cpu_set = set(cpus)

    def in_child():
        os.sched_setaffinity(0, cpu_set)
        for group in (account, quota):
            if group:
                group.join_self()

    return in_child


def wait_port(port, proc, log_path, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"broker exited with {proc.returncode} before listening; see {log_path}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise BenchError(f"broker not listening on {port} after {timeout} s; see {log_path}")


# Both sides' nodes share it (a multi-node cluster needs one; fixed so the
# runs are alike).
CLUSTER_ID = "cUJ4RmWlRQ2v8ZxmbsMFaw"


class Side:
    """One broker implementation: how to start it on a fresh data directory,
    as one combined node or as a cluster of combined nodes."""

    def __init__(self, kind, label, binary_sha256, start):
        self.kind, self.label, self.binary_sha256 = kind, label, binary_sha256
        self._start = start

    def start(self, workdir, cpus, log_path, account=None, nodes=1, quota=None, kafka_heap=None):
        """Starts `nodes` combined broker+controller nodes (ids 1..nodes, all
        of them voters) and waits until each listens; returns the processes
        and the bootstrap list. `log_path` gets a node suffix when nodes > 1.
        `kafka_heap` (a JVM size) sets a Kafka node's heap; krabka has none."""
        ports = []
        while len(ports) < 2 * nodes:
            port = free_port()
            if port not in ports:
                ports.append(port)
        voters = ",".join(f"{i + 1}@127.0.0.1:{ports[2 * i + 1]}" for i in range(nodes))
        started = []
        for i in range(nodes):
            port, controller_port = ports[2 * i], ports[2 * i + 1]
            overrides = cluster_overrides(i + 1, voters) if nodes > 1 else []
            node_dir = workdir if nodes == 1 else os.path.join(workdir, f"node-{i + 1}")
            os.makedirs(node_dir, exist_ok=True)
            node_log = log_path if nodes == 1 else log_path.replace(".log", f"-{i + 1}.log")
            log = open(node_log, "w")
            command, env = self._start(node_dir, port, controller_port, overrides, kafka_heap)
            # The heap a Kafka node ran with is in its environment, not its command.
            heap = f"KAFKA_HEAP_OPTS={shlex.quote(env['KAFKA_HEAP_OPTS'])} " if self.kind == "kafka" else ""
            log.write(f"$ {heap}{shlex.join(command)}\n")
            log.flush()
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=pinned(cpus, account, quota),
            )
            log.close()
            started.append((proc, port, node_log))
        for proc, port, node_log in started:
            wait_port(port, proc, node_log)
        return [proc for proc, _, _ in started], ",".join(f"127.0.0.1:{port}" for _, port, _ in started)


def cluster_overrides(node_id, voters):
    """A node of a replicated cluster: its id, the voters, and Kafka's
    production settings for acknowledged writes (RF3 topics, two in sync)."""
    return [
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        "offsets.topic.replication.factor=3",
        "min.insync.replicas=2",
    ]


def krabka_side(label, broker_bin, format_bin):
    def start(workdir, port, controller_port, overrides, _kafka_heap):
        data = os.path.join(workdir, "data")
        config = os.path.join(workdir, "server.properties")
        write_config(config, port, controller_port, data)
        with open(config, "a") as f:
            # As tools/kafka-reference/run-kafka configures Kafka: the
            # workload's consumer joins without the 3 s default delay.
            f.write("group.initial.rebalance.delay.ms=0\n")
            # Later lines win, as in Kafka's server.properties.
            f.writelines(f"{kv}\n" for kv in overrides)
        run([format_bin, "format", "-c", config, "--cluster-id", CLUSTER_ID])
        # KRABKA_BENCH_LOG: the brokers' log filter when diagnosing a run.
        return [broker_bin, config], dict(os.environ, KRABKA_LOG=os.environ.get("KRABKA_BENCH_LOG", "warn"))

    return Side("krabka", label, sha256(broker_bin), start)


def kafka_side(repo):
    script = os.path.join(repo, "tools", "kafka-reference", "run-kafka")
    libs = os.path.join(repo, "target", "kafka-4.3.1", "libs")

    def start(workdir, port, controller_port, overrides, kafka_heap):
        heap = kafka_heap or "1g"
        env = dict(
            os.environ, KAFKA_HEAP_OPTS=f"-Xms{heap} -Xmx{heap}", KAFKA_LOG_LEVEL="WARN", KAFKA_CLUSTER_ID=CLUSTER_ID
        )
        return [script, os.path.join(workdir, "kafka"), str(port), str(controller_port)] + overrides, env

    return Side("kafka", "kafka 4.3.1", classpath_digest(libs), start)


def classpath_digest(libs):
    """Kafka has no single binary: the digest of its jars (name and SHA-256 of
    each, sorted) identifies the class path it ran from."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(libs)):
        if name.endswith(".jar"):
            digest.update(f"{name} {sha256(os.path.join(libs, name))}\n".encode())
    return digest.hexdigest()


def stop_brokers(procs, timeout=60):
    """SIGTERM to every node at once (one at a time, the last ones would wait
    for a quorum already gone), then their exit codes (None: killed)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append(None)
    return codes


# --------------------------------------------------------------------------
# The workload

class Workload:
    def __init__(self, repo, cpus, java, heap, properties=()):
        self.repo, self.cpus, self.java, self.heap = repo, cpus, java, heap
        # -D flags of every run (the transactional mode's).
        self.properties = list(properties)
        self.classpath = ":".join(
            [os.path.join(repo, "target", "perf-workload"), os.path.join(repo, "target", "kafka-4.3.1", "libs", "*")]
        )

    def run(self, bootstrap, topic, cell, records, rate, log_path, idle_ms=0):
        timeout = max(120, int(records * max(cell["record_bytes"], 100) / (4 * MIB)) + 120)
        command = [self.java, f"-Xmx{self.heap}", "-XX:+UseParallelGC"] + self.properties
        if idle_ms:
            command.append(f"-Dworkload.idleMillis={idle_ms}")
        command += [
            "-cp",
            self.classpath,
            "BrokerPerformanceWorkload",
            bootstrap,
            topic,
            f"{topic}-group",
            str(records),
            str(cell["record_bytes"]),
            str(rate),
            str(timeout),
            cell["compression"],
            cell["payload"],
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        with open(log_path, "a") as log:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            result = subprocess.run(
                command, stdout=subprocess.PIPE, stderr=log, text=True, preexec_fn=pinned(self.cpus), cwd=self.repo
            )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic() - started
        client_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise BenchError(f"workload printed no result (exit {result.returncode}); see {log_path}")
        outcome = json.loads(lines[-1])
        # Whether the client set the pace: the workload reports the cores it
        # used while producing (client_cpu_cores, 1.0 = its CPU saturated);
        # the whole process's CPU over its wall time includes start-up and
        # the group join.
        outcome["client_process_cores"] = client_cpu / wall if wall else 0.0
        return outcome


def run_pairs(workload, bootstrap, topics, cell, loads, log_path):
    """One producer/consumer pair per topic, all at once, each with its
    (records, records/s or 0 for flat out) from `loads`: the reference
    experiment's checks of concurrent clients. Records/s is the total over
    the whole wall time (start-ups included), latencies are the worst
    pair's, counts are summed."""
    results = [None] * len(topics)

    def one(index):
        records, rate = loads[index]
        log = log_path.replace(".log", f"-{index}.log")
        results[index] = workload.run(bootstrap, topics[index], cell, records, rate, log)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(topics))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if any(r is None for r in results):
        raise BenchError(f"a producer/consumer pair gave no result; see {log_path}")
    total = sum(r["records"] for r in results)

    def worst(key, quantiles):
        return {q: max(r[key][q] for r in results) for q in quantiles}

    client_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "records": total,
        "errors": sum(r["errors"] for r in results),
        "records_per_second": total / wall,
        "mib_per_second": total * cell["record_bytes"] / MIB / wall,
        "produce_latency_ms": worst("produce_latency_ms", ("p50", "p95", "p99")),
        "end_to_end_latency_ms": worst("end_to_end_latency_ms", ("p50", "p99")),
        "duplicates": sum(r["duplicates"] for r in results),
        "missing": sum(r["missing"] for r in results),
        "ok": all(r.get("ok") for r in results),
        "client_cpu_cores": sum(r.get("client_cpu_cores", float("nan")) for r in results),
        "client_process_cores": client_cpu / wall if wall else 0.0,
    }


# --------------------------------------------------------------------------
# One trial

def cell_label(name, args):
    """The contract's cell name; with RF3 or transactions a cell of its own
    (`-rf3`, `-txn100ms`, `-txn10rec`), since its figures are not comparable
    with the contract's cell's."""
    if args.partitions:
        name = name.replace("-p12-", f"-p{args.partitions}-")
    label = name if args.replication_factor == 1 else f"{name}-rf{args.replication_factor}"
    if args.transaction_ms:
        label += f"-txn{args.transaction_ms}ms"
    if args.transaction_records:
        label += f"-txn{args.transaction_records}rec"
    return label


def workload_properties(args):
    """The workload's -D flags for --transaction-ms / --transaction-records."""
    flags = []
    if args.transaction_ms:
        flags.append(f"-Dworkload.transactionMillis={args.transaction_ms}")
    if args.transaction_records:
        flags.append(f"-Dworkload.transactionRecords={args.transaction_records}")
    return flags


def pair_loads(cell, scale):
    """(records, rate) of each pair of a Java cell: a mixed cell's flat-out
    pairs share its records, its rate pairs run RATE_SECONDS at their rate."""
    pairs = cell.get("pairs", 1)
    if cell["load"] != "mixed":
        rate = cell.get("target_records_per_second", 0) if cell["load"] == "rate" else 0
        return [(cell_records(cell, scale) // pairs, rate)] * pairs
    rate, rate_pairs = cell["target_records_per_second"], cell["rate_pairs"]
    flat_out = [(cell_records(cell, scale) // (pairs - rate_pairs), 0)] * (pairs - rate_pairs)
    return flat_out + [(max(1000, int(rate * RATE_SECONDS * scale)), rate)] * rate_pairs


def cell_records(cell, scale):
    if cell["load"] == "rate":
        return max(1000, int(cell["target_records_per_second"] * RATE_SECONDS * scale))
    return max(1000, int(BASE_RECORDS[cell["name"]] * scale))


def run_trial(args, side, cell, round_no, workload, logs):
    name = cell["name"]
    tag = f"r{round_no}-{name}-{side.kind}"
    workdir = os.path.join(args.workroot, tag)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    broker_log = os.path.join(logs, f"{tag}-broker.log")
    workload_log = os.path.join(logs, f"{tag}-workload.log")
    records = cell_records(cell, args.scale)
    loads = pair_loads(cell, args.scale)
    account = CpuAccount(tag) if CpuAccount.available() else None
    # A capacity cell measures the broker alone on its core: no quota.
    capacity = cell.get("workload") == "loadgen"
    quota = CpuQuota(args.broker_cpu_quota, tag) if args.broker_cpu_quota and not capacity else None
    rf = args.replication_factor
    procs, bootstrap = side.start(
        workdir, args.broker_cpus, broker_log, account, nodes=rf, quota=quota, kafka_heap=cell.get("kafka_heap")
    )
    sampler = None
    throttled = (0, 0)
    try:
        warm = cell["load"] != "idle_to_burst"
        pairs = cell.get("pairs", 1)
        measured = [f"bench-{name}"] if pairs == 1 else [f"bench-{name}-{i}" for i in range(pairs)]
        topics = measured + ([f"warmup-{name}"] if warm else [])
        partitions = args.partitions or cell["partitions"]
        create_topics(bootstrap, {t: partitions for t in topics}, retry_seconds=90, replication_factor=rf)
        sampler = Sampler([p.pid for p in procs], account)
        if warm and args.warmup:
            warm_records = max(100, min(records, WARMUP_BYTES // cell["record_bytes"]))
            if capacity:
                warmup = args.loadgen.run(bootstrap, f"warmup-{name}", cell, warm_records, workload_log, sampler.cpu_now)
            else:
                warmup = workload.run(bootstrap, f"warmup-{name}", cell, warm_records, 0, workload_log)
            if not warmup.get("ok"):
                say(f"  warm-up not ok: {warmup}")
        idle_ms = int(args.idle_seconds * 1000) if cell["load"] == "idle_to_burst" else 0
        cpu_before = sampler.cpu_now()
        t0 = time.monotonic()
        if capacity:
            result = args.loadgen.run(bootstrap, measured[0], cell, records, workload_log, sampler.cpu_now)
        elif pairs == 1:
            (pair_records, rate), = loads
            result = workload.run(bootstrap, measured[0], cell, pair_records, rate, workload_log, idle_ms=idle_ms)
        else:
            result = run_pairs(workload, bootstrap, measured, cell, loads, workload_log)
        wall = time.monotonic() - t0
        cpu_after = sampler.cpu_now()
        throttled = quota.throttled_periods() if quota else (0, 0)
    finally:
        if sampler:
            sampler.stop()
        codes = stop_brokers(procs)
        for group in (account, quota):
            if group:
                group.remove()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    # A capacity cell is charged its measured phase (produce, or a fan-out's
    # read-back); a Java cell the whole run, producing and consuming at once.
    acked = result.get("measured_records", result["records"] - result["errors"])
    cpu = result.get("broker_cpu_seconds", cpu_after - cpu_before)
    return {
        "round": round_no,
        "cell": cell_label(name, args),
        "workload": cell.get("workload", "java"),
        "replication_factor": rf,
        "side": side.kind,
        "label": side.label,
        "binary_sha256": side.binary_sha256,
        "records": result["records"],
        "record_bytes": cell["record_bytes"],
        "compression": cell["compression"],
        "payload": cell["payload"],
        # A rate pair's target (each pair's, in a cell of several).
        "target_rate": max(rate for _, rate in loads),
        "records_per_second": result["records_per_second"],
        "transactions_per_second": result.get("transactions_per_second", 0),
        "mib_per_second": result["mib_per_second"],
        "broker_cpu_seconds": round(cpu, 3),
        "cpu_us_per_record": cpu / acked * 1e6 if acked else float("nan"),
        "peak_rss_bytes": sampler.peak_rss,
        "p50_latency_ms": result["produce_latency_ms"]["p50"],
        "p95_latency_ms": result["produce_latency_ms"]["p95"],
        "p99_latency_ms": result["produce_latency_ms"]["p99"],
        "e2e_p50_ms": result["end_to_end_latency_ms"]["p50"],
        "e2e_p99_ms": result["end_to_end_latency_ms"]["p99"],
        "errors": result["errors"],
        "duplicates": result["duplicates"],
        "missing": result["missing"],
        "ok": bool(result.get("ok")),
        "workload_wall_seconds": round(wall, 2),
        "client_cpu_cores": round(result.get("client_cpu_cores", float("nan")), 2),
        "client_process_cores": round(result["client_process_cores"], 2),
        "broker_exit": codes[0] if len(codes) == 1 else " ".join(map(str, codes)),
        # Share of the quota's periods in which the broker was throttled
        # (warm-up included): how much the quota held it back.
        "broker_throttled_share": round(throttled[1] / throttled[0], 3) if throttled[0] else 0.0,
        "samples": len(sampler.samples),
    }


# --------------------------------------------------------------------------
# Reports

CSV_FIELDS = [
    "round", "order", "cell", "workload", "replication_factor", "side", "label", "binary_sha256", "records", "record_bytes", "compression",
    "payload", "target_rate", "records_per_second", "transactions_per_second", "mib_per_second", "broker_cpu_seconds", "cpu_us_per_record",
    "peak_rss_bytes", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "e2e_p50_ms", "e2e_p99_ms",
    "errors", "duplicates", "missing", "ok", "workload_wall_seconds", "client_cpu_cores", "client_process_cores", "broker_exit", "samples",
    "broker_throttled_share",
]


def is_produce_capacity(cell):
    """A capacity cell measuring the produce path (not a fan-out's reads)."""
    return cell.get("workload") == "loadgen" and cell.get("readers", 1) == 1


def run_write_baseline(args, cell, round_no, logs):
    """The cell's batches written with write(2) on the brokers' CPUs, once a
    round beside the trials: issue 22's floor for the produce path."""
    name = cell["name"]
    directory = os.path.join(args.workroot, f"r{round_no}-{name}-write-baseline")
    try:
        records = cell_records(cell, args.scale)
        log = os.path.join(logs, f"r{round_no}-{name}-write-baseline.log")
        summary = args.loadgen.write_baseline(cell, records, directory, args.broker_cpus, log)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    say(f"  write(2) baseline: {summary['cpu_us_per_record']:.3f} µs CPU/rec")
    fields = ("records", "bytes", "cpu_us_per_record", "records_per_second")
    return {"round": round_no, "cell": cell_label(name, args), **{k: summary[k] for k in fields}}


def write_baseline_markdown(rows, baselines):
    """The produce path's CPU per record against writing the same batches
    with write(2) in the same run (medians of per-round ratios)."""
    if not baselines:
        return ""
    lines = [
        "",
        "## Produce path against write(2)",
        "",
        "The capacity cells' batches appended with one write(2) each to a file per partition, by one thread on the "
        "brokers' CPU, once a round (`krabka-loadgen --write-baseline`). Ratios: broker CPU per record over the "
        "baseline's, medians of the per-round ratios; issue 22's goal is at most 2x.",
        "",
        "| cell | write(2) µs/rec | candidate µs/rec | ratio | reference µs/rec | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for cell in dict.fromkeys(b["cell"] for b in baselines):
        floor = {b["round"]: b["cpu_us_per_record"] for b in baselines if b["cell"] == cell}
        cells = []
        for role in ("candidate", "reference"):
            mine = {r["round"]: r["cpu_us_per_record"] for r in rows if r["cell"] == cell and r["role"] == role}
            ratios = [mine[k] / floor[k] for k in mine if k in floor and floor[k]]
            cells += [f"{statistics.median(mine.values()):.3f}", f"{statistics.median(ratios):.2f}x" if ratios else "-"]
        lines.append(f"| {cell} | {statistics.median(floor.values()):.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def ratios_by_round(rows, cell, metric):
    by_round = {}
    for row in rows:
        if row["cell"] == cell:
            by_round.setdefault(row["round"], {})[row["role"]] = row[metric]
    return [
        pair["candidate"] / pair["reference"]
        for pair in by_round.values()
        if "candidate" in pair and "reference" in pair and pair["reference"]
    ]


def quota_line(args, rows):
    """The summary's line on the broker CPU quota and how often it bound."""
    if not args.broker_cpu_quota:
        return "- broker CPU quota: none"
    quoted = [r for r in rows if r["workload"] != "loadgen"]
    shares = {
        role: statistics.median([r["broker_throttled_share"] for r in quoted if r["role"] == role] or [0.0])
        for role in ("candidate", "reference")
    }
    line = (
        f"- broker CPU quota: {args.broker_cpu_quota} cores each (cgroup); median share of periods throttled: "
        f"candidate {shares['candidate']:.0%}, reference {shares['reference']:.0%}"
    )
    if len(quoted) < len(rows):
        line += "; capacity cells (cap-*, krabka-loadgen) ran without the quota"
    return line


def summary_markdown(args, rows, cells, candidate, reference, meta):
    def median(cell, role, metric):
        values = [r[metric] for r in rows if r["cell"] == cell and r["role"] == role]
        return statistics.median(values) if values else float("nan")

    def ratio(cell, metric):
        values = ratios_by_round(rows, cell, metric)
        return statistics.median(values) if values else float("nan")

    out = [
        f"# Side by side: {candidate.label} vs {reference.label}",
        "",
        f"- command: `{meta['command']}`",
        f"- date: {meta['date']}, source {meta['git_head']}",
        f"- candidate `{candidate.label}` sha256 `{candidate.binary_sha256}`",
        f"- reference `{reference.label}` sha256 `{reference.binary_sha256}`",
    ]
    for role, entry in sorted(meta.get("builds", {}).items()):
        source = entry["source"]
        out.append(
            f"- {role} build (packaging/builds.json): commit {source['commit'][:12]}"
            f"{' with uncommitted changes' if source['dirty'] else ''}, inputs sha256 {source['inputs_sha256'][:12]}, "
            f"{entry['rustc']}"
        )
    out += [
        f"- rounds: {args.rounds} (first side alternates), scale {args.scale}, broker CPUs {meta['broker_cpus']}, "
        f"client CPUs {meta['client_cpus']}, open-file limit {meta['nofile']}"
        + (" (shared CPUs: outside the contract's disjoint-core rule)" if meta.get("cpus_shared") else ""),
        quota_line(args, rows),
        "",
        "Medians over the rounds; ratios are medians of the per-round candidate/reference ratios. "
        "Client cores: the workload JVM's CPU time over the produce window (1.00 = its CPU was saturated). "
        "chart.svg beside this file draws records/s and CPU per record with each side's spread over the rounds.",
    ]
    if args.replication_factor > 1:
        out += [
            "",
            f"Replication factor {args.replication_factor}, min.insync.replicas=2, acks=all: each side is "
            f"{args.replication_factor} combined broker+controller nodes on the broker CPUs. CPU per record is "
            "the nodes' total; peak RSS is the largest node's.",
        ]
    if args.transaction_ms or args.transaction_records:
        every = " or ".join(
            part
            for part in (
                f"{args.transaction_ms} ms" if args.transaction_ms else "",
                f"{args.transaction_records} records" if args.transaction_records else "",
            )
            if part
        )
        medians = ", ".join(
            f"{cell_label(c['name'], args)} {median(cell_label(c['name'], args), 'candidate', 'transactions_per_second'):,.0f}"
            f" / {median(cell_label(c['name'], args), 'reference', 'transactions_per_second'):,.0f}"
            for c in cells
        )
        out += [
            "",
            f"A transactional producer committing every {every}, read back with isolation.level=read_committed. "
            f"Records/s counts to the last commit. Transactions/s candidate / reference: {medians}.",
        ]
    out += [
        "",
        "| cell | records/s cand | records/s ref | ratio | CPU µs/rec cand | ref | ratio "
        "| peak RSS MiB cand | ref | ratio | p99 ms cand | ref | ratio | client cores cand / ref | errors/dup/missing |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for cell in cells:
        name = cell_label(cell["name"], args)
        bad = sum(r["errors"] + r["duplicates"] + r["missing"] for r in rows if r["cell"] == name)
        cols = [name]
        for metric, fmt, div in (
            ("records_per_second", "{:,.0f}", 1),
            ("cpu_us_per_record", "{:.2f}", 1),
            ("peak_rss_bytes", "{:,.1f}", MIB),
            ("p99_latency_ms", "{:.1f}", 1),
        ):
            cols.append(fmt.format(median(name, "candidate", metric) / div))
            cols.append(fmt.format(median(name, "reference", metric) / div))
            cols.append(f"{ratio(name, metric):.2f}x")
        cols.append(f"{median(name, 'candidate', 'client_cpu_cores'):.2f} / {median(name, 'reference', 'client_cpu_cores'):.2f}")
        cols.append(str(bad))
        out.append("| " + " | ".join(cols) + " |")
    out.append("")
    return "\n".join(out)


def performance_record(mode, contract_sha, candidate, reference, rows, quota_cores=None):
    trials = [
        {
            "cell": r["cell"],
            "round": r["round"],
            "side": r["role"],
            "order": r["order"],
            "metrics": {m: float(r[m]) for m in METRICS},
        }
        for r in rows
    ]
    return {
        "version": 1,
        "mode": mode,
        "contract_sha256": contract_sha,
        "broker_cpu_quota_cores": quota_cores,
        "sides": {
            "candidate": {"binary_sha256": candidate.binary_sha256, "label": candidate.label},
            "reference": {"binary_sha256": reference.binary_sha256, "label": reference.label},
        },
        "trials": trials,
    }


# --------------------------------------------------------------------------

def parse_cpus(text):
    cpus = set()
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return sorted(cpus)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--contract", help="default: packaging/performance/regression-contract.json")
    parser.add_argument("--mode", choices=["pinned_kafka", "before_after"], default="pinned_kafka")
    parser.add_argument("--candidate-bin", help="krabka-broker to measure (default: build the release one)")
    parser.add_argument("--reference-bin", help="before_after: the reference krabka-broker")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every cell's record count")
    parser.add_argument("--cells", help="comma-separated subset of the contract's cells")
    parser.add_argument("--broker-cpus", default="0", help="CPU list for either broker (taskset -c syntax)")
    parser.add_argument("--client-cpus", default="1", help="CPU list for the workload")
    parser.add_argument(
        "--share-cpus",
        action="store_true",
        help="allow broker and client CPU lists to overlap: outside the contract's disjoint-core rule, for "
        "measuring how much the client's CPU bounds a cell (summary.md and meta.json say so)",
    )
    parser.add_argument(
        "--broker-cpu-quota",
        type=float,
        help="CORES: each broker in a CPU cgroup of that many cores (default: the contract's broker_cpu_quota; "
        "0: none, outside a contract that names one, and parse-benches refuses the record)",
    )
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle-to-burst: idle time before the burst")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument("--out", help="output directory (default target/perf-runs/<UTC time>)")
    parser.add_argument("--workroot", help="where data directories go (default OUT/work)")
    parser.add_argument("--keep", action="store_true", help="keep data directories")
    parser.add_argument("--loadgen-bin", help="krabka-loadgen for the capacity cells (default: build the release one)")
    parser.add_argument("--java", default=os.environ.get("JAVA", "java"))
    parser.add_argument("--client-heap", default="2g")
    parser.add_argument(
        "--replication-factor",
        type=int,
        choices=[1, 3],
        default=1,
        help="3: each side is three combined nodes (all on --broker-cpus, one CPU account), topics RF3 with "
        "min.insync.replicas=2; cells are named CELL-rf3 and the record is record-rf3.json",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="topics of N partitions instead of the cell's 12 (cells are named with pN; outside the contract)",
    )
    parser.add_argument(
        "--transaction-ms",
        type=int,
        default=0,
        help="a transactional producer committing every MS ms (read back read_committed); cells are named "
        "CELL-txnMSms and the record is record-txn.json",
    )
    parser.add_argument(
        "--transaction-records",
        type=int,
        default=0,
        help="a transactional producer committing every N records (with --transaction-ms: whichever first); "
        "cells are named CELL-txnNrec",
    )
    args = parser.parse_args()

    repo = os.path.abspath(args.repo)
    contract_path = args.contract or os.path.join(repo, "packaging", "performance", "regression-contract.json")
    with open(contract_path, "rb") as f:
        contract_bytes = f.read()
    contract = json.loads(contract_bytes)
    contract_sha = hashlib.sha256(contract_bytes).hexdigest()
    cells = contract["cells"]
    if args.broker_cpu_quota is None:
        args.broker_cpu_quota = (contract.get("broker_cpu_quota") or {}).get("cores")
    args.broker_cpu_quota = args.broker_cpu_quota or None
    if args.broker_cpu_quota:
        CpuQuota.hierarchy()  # refuse early where quotas cannot be set
    if args.cells:
        wanted = args.cells.split(",")
        unknown = set(wanted) - {c["name"] for c in cells}
        if unknown:
            parser.error(f"unknown cells: {sorted(unknown)}")
        cells = [c for c in cells if c["name"] in wanted]
    args.broker_cpus = parse_cpus(args.broker_cpus)
    args.client_cpus = parse_cpus(args.client_cpus)
    shared_cpus = bool(set(args.broker_cpus) & set(args.client_cpus))
    if shared_cpus and not args.share_cpus:
        parser.error("--broker-cpus and --client-cpus must not overlap (--share-cpus to allow it)")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.abspath(args.out or os.path.join(repo, "target", "perf-runs", stamp))
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    args.workroot = os.path.abspath(args.workroot or os.path.join(out, "work"))

    nofile = raise_nofile()[0]
    run([os.path.join(repo, "packaging", "performance", "build-workload")])
    if args.candidate_bin:
        broker_bin = os.path.abspath(args.candidate_bin)
        format_bin = os.path.join(os.path.dirname(broker_bin), "krabka-format")
    else:
        broker_bin, format_bin = build(repo)
    candidate = krabka_side(f"krabka {git_head(repo)[:12]}", broker_bin, format_bin)
    if args.mode == "pinned_kafka":
        reference = kafka_side(repo)
    else:
        if not args.reference_bin:
            parser.error("--mode before_after needs --reference-bin")
        ref_bin = os.path.abspath(args.reference_bin)
        reference = krabka_side("krabka reference", ref_bin, os.path.join(os.path.dirname(ref_bin), "krabka-format"))
    workload = Workload(repo, args.client_cpus, args.java, args.client_heap, workload_properties(args))
    args.loadgen = None
    if any(c.get("workload") == "loadgen" for c in cells):
        args.loadgen = Loadgen(os.path.abspath(args.loadgen_bin or build_loadgen(repo)), args.client_cpus)
    meta = {
        "command": shlex.join(["packaging/performance/side-by-side"] + sys.argv[3:]),
        "date": stamp,
        "git_head": git_head(repo),
        "broker_cpus": ",".join(map(str, args.broker_cpus)),
        "client_cpus": ",".join(map(str, args.client_cpus)),
        "cpus_shared": shared_cpus,
        "broker_cpu_clock": "cpuacct cgroup (ns)" if CpuAccount.available() else "proc utime+stime (clock ticks)",
        "broker_cpu_quota_cores": args.broker_cpu_quota,
        "nofile": nofile,
        "contract_sha256": contract_sha,
        "replication_factor": args.replication_factor,
        "transaction_ms": args.transaction_ms,
        "transaction_records": args.transaction_records,
        "partitions": args.partitions,
    }
    meta["builds"] = record_builds(repo, args, broker_bin, format_bin)
    say(f"output in {out}; candidate {candidate.label} ({candidate.binary_sha256[:12]}), reference {reference.label}")

    rows, baselines = [], []
    csv_path = os.path.join(out, "runs.csv")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for round_no in range(args.rounds):
            order = [candidate, reference] if round_no % 2 == 0 else [reference, candidate]
            for cell in cells:
                for position, side in enumerate(order):
                    say(f"round {round_no} {cell['name']} {side.label}")
                    row = run_trial(args, side, cell, round_no, workload, logs)
                    row["order"] = position
                    row["role"] = "candidate" if side is candidate else "reference"
                    say(
                        f"  {row['records_per_second']:,.0f} rec/s, {row['cpu_us_per_record']:.2f} µs CPU/rec, "
                        f"peak RSS {row['peak_rss_bytes'] / MIB:.1f} MiB, p99 {row['p99_latency_ms']:.1f} ms, "
                        f"client {row['client_cpu_cores']:.2f} cores, ok={row['ok']}"
                    )
                    rows.append(row)
                    writer.writerow(row)
                    f.flush()
                if is_produce_capacity(cell):
                    baselines.append(run_write_baseline(args, cell, round_no, logs))
    with open(os.path.join(out, "write-baseline.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["round", "cell", "records", "bytes", "cpu_us_per_record", "records_per_second"])
        writer.writeheader()
        writer.writerows(baselines)

    summary = summary_markdown(args, rows, cells, candidate, reference, meta)
    summary += write_baseline_markdown(rows, baselines)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(summary)
    names = [cell_label(c["name"], args) for c in cells]
    labels = {"candidate": candidate.label, "reference": reference.label}
    title = f"{candidate.label} vs {reference.label}, {args.rounds} rounds, scale {args.scale}"
    with open(os.path.join(out, "chart.svg"), "w") as f:
        f.write(chart_svg(rows, names, labels, title))
    # parse-benches judges the contract's RF1 cells; an RF3 record is kept beside it.
    record_name = "record.json" if args.replication_factor == 1 else f"record-rf{args.replication_factor}.json"
    if args.transaction_ms or args.transaction_records:
        record_name = record_name.replace("record", "record-txn")
    if args.partitions:
        record_name = record_name.replace(".json", f"-p{args.partitions}.json")
    with open(os.path.join(out, record_name), "w") as f:
        record = performance_record(args.mode, contract_sha, candidate, reference, rows, args.broker_cpu_quota)
        json.dump(record, f, indent=1)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(summary)
    failed = [r for r in rows if not r["ok"]]
    if failed:
        say(f"{len(failed)} trial(s) had errors, duplicates or missing records: see runs.csv")
        return 1
    return 0


def record_builds(repo, args, broker_bin, format_bin):
    """Ties the measured krabka binaries to their builds in packaging/builds.json.

    A binary this run built from the working tree is recorded (commit, inputs
    hash, Cargo.lock hash, rustc, profile). A prebuilt one (--candidate-bin,
    --reference-bin) is looked up by its SHA-256; one that builds.json does
    not know is reported, since nothing here says what built it."""
    sys.path.insert(0, os.path.join(repo, "packaging"))
    import builds

    found = {}
    if not args.candidate_bin:
        entry = builds.describe_build(
            {"krabka-broker": broker_bin, "krabka-format": format_bin},
            profile="release",
            target=builds.host_target(),
            name="benchmark",
            root=repo,
        )
        builds.record(entry)
        found["candidate"] = entry
    known = builds.load()["builds"]
    for role, path in (("candidate", args.candidate_bin), ("reference", args.reference_bin)):
        if not path or role in found:
            continue
        digest = sha256(path)
        match = next((e for e in known if digest in e["binaries"].values()), None)
        if match:
            found[role] = match
        else:
            say(f"warning: the {role} binary {path} (sha256 {digest}) is not in packaging/builds.json")
    return {role: {"source": e["source"], "binaries": e["binaries"], "rustc": e["rustc"]} for role, e in found.items()}


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        say(f"error: {e}")
        sys.exit(1)
