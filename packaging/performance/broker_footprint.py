"""Krabka broker footprint: memory, start-up time, per-connection memory and
produce/consume throughput with librdkafka, against one local broker.

Run through the `broker-footprint` wrapper next to this file, which picks the
Python that has confluent-kafka. Progress goes to stderr; the report (a
markdown table, then one JSON line) goes to stdout.

Phases, all on one broker and one data directory:
  1. idle RSS after creating TOPICS x PARTITIONS partitions;
  2. SIGTERM, restart, time to the "serving" log line and to the first
     metadata response that lists every partition with a leader (median);
  3. RSS delta per idle connection after CONNECTIONS ApiVersions handshakes;
  4. produce RECORDS records to a 12-partition topic (acks=all, idempotent,
     lz4), consume them back with assign(); records/s and broker CPU per
     record for each phase, client CPU alongside.
"""

import argparse
import json
import logging
import os
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

from benchlib import (
    MIB,
    WANTED_NOFILE,
    BenchError,
    build,
    create_topics,
    free_port,
    git_head,
    run,
    proc_cpu_seconds,
    proc_status,
    raise_nofile,
    say,
    sha256,
    write_config,
)


# --------------------------------------------------------------------------
# /proc readings

def proc_fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_nofile_limit(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                parts = line.split()
                return int(parts[3])
    return None


def self_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------
# Kafka wire helpers (hand-encoded, non-flexible versions only)

def recv_exact(sock, n):
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise BenchError("connection closed by the broker mid-frame")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def send_request(sock, api_key, version, correlation, body=b"", client_id=b"footprint"):
    header = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def read_frame(sock):
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 4 or size > 64 * MIB:
        raise BenchError(f"implausible response size {size}")
    return recv_exact(sock, size)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        value = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        value = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return value

    def array(self, item):
        n = self.i32()
        return [] if n < 0 else [item() for _ in range(n)]


API_VERSIONS, METADATA = 18, 3


def check_api_versions_v0(frame, correlation):
    r = Reader(frame)
    got = r.i32()
    if got != correlation:
        raise BenchError(f"ApiVersions: correlation id {got}, expected {correlation}")
    error = r.i16()
    if error != 0:
        raise BenchError(f"ApiVersions v0: error code {error}")
    keys = r.array(lambda: (r.i16(), r.i16(), r.i16()))
    if not keys:
        raise BenchError("ApiVersions v0: empty api list")


def metadata_v1(sock, correlation):
    """Metadata v1 for all topics: (broker count, {topic: [(error, leader), ...]}, topic errors)."""
    send_request(sock, METADATA, 1, correlation, struct.pack(">i", -1))
    r = Reader(read_frame(sock))
    got = r.i32()
    if got != correlation:
        raise BenchError(f"Metadata: correlation id {got}, expected {correlation}")
    brokers = r.array(lambda: (r.i32(), r.string(), r.i32(), r.string()))
    r.i32()  # controller id
    topics, topic_errors = {}, {}

    def partition():
        error, _index, leader = r.i16(), r.i32(), r.i32()
        r.array(r.i32)
        r.array(r.i32)
        return error, leader

    for _ in range(r.i32()):
        error, name, _internal = r.i16(), r.string(), r.i8()
        partitions = r.array(partition)
        topics[name] = partitions
        if error:
            topic_errors[name] = error
    return len(brokers), topics, topic_errors


def metadata_ready(result, expected):
    """True when every expected topic is listed with all its partitions led."""
    broker_count, topics, topic_errors = result
    if broker_count < 1:
        return False
    for name, count in expected.items():
        parts = topics.get(name)
        if name in topic_errors or parts is None or len(parts) != count:
            return False
        if any(error != 0 or leader < 0 for error, leader in parts):
            return False
    return True


def wait_metadata(port, expected, deadline, broker=None, retry_sleep=0.002):
    """Polls until a Metadata response shows every expected partition led.

    Connection refused (listener not bound yet) retries after `retry_sleep`;
    a bound listener holds the request until the broker answers it. Returns
    the monotonic time of the first good response.
    """
    correlation = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BenchError("timed out waiting for a metadata response listing every partition")
        if broker is not None and not broker.alive():
            broker.reader.join(2)
            raise BenchError(f"broker exited with code {broker.proc.returncode}\n{broker.tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=remaining) as sock:
                while time.monotonic() < deadline:
                    correlation += 1
                    result = metadata_v1(sock, correlation)
                    if metadata_ready(result, expected):
                        return time.monotonic()
                    time.sleep(0.01)
        except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, BenchError, socket.timeout):
            time.sleep(retry_sleep)


# --------------------------------------------------------------------------
# The broker process

class Broker:
    def __init__(self, binary, config_path, log_path, port, cpu):
        self.binary, self.config_path, self.log_path = binary, config_path, log_path
        self.port, self.cpu = port, cpu
        self.proc = None
        self.starts = 0
        self.warning_lines = []  # across every start

    def start(self, overrides):
        self.starts += 1
        self.serving = threading.Event()
        self.t_serving = None
        self.storage_loaded_ms = None
        self.lines = []
        command = [self.binary, self.config_path]
        for entry in overrides:
            command += ["--override", entry]
        cpu = self.cpu

        def pin():
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        log = open(self.log_path, "a")
        log.write(f"===== start {self.starts}: {shlex.join(command)}\n")
        log.flush()
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=pin,
        )
        marker = f"address=127.0.0.1:{self.port}"

        def pump(proc=self.proc):
            for raw in proc.stdout:
                now = time.monotonic()
                line = raw.decode(errors="replace")
                log.write(line)
                self.lines.append(line)
                if " WARN " in line or " ERROR " in line:
                    self.warning_lines.append(f"[start {self.starts}] {line}")
                if not self.serving.is_set() and "krabka broker serving" in line and marker in line:
                    self.t_serving = now
                    self.serving.set()
                m = re.search(r"storage loaded.*elapsed_ms=(\d+)", line)
                if m:
                    self.storage_loaded_ms = int(m.group(1))
            log.flush()
            log.close()

        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()

    @property
    def pid(self):
        return self.proc.pid

    def wait_serving(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.serving.wait(0.05):
            if self.proc.poll() is not None:
                self.reader.join(2)
                raise BenchError(f"broker exited with code {self.proc.returncode} before serving\n{self.tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"broker not serving after {timeout} s\n{self.tail()}")
        return self.t_serving - self.t_spawn

    def stop(self, timeout=60):
        """SIGTERM; returns (exit code, seconds to exit)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.reader.join(5)
            raise BenchError(f"broker still running {timeout} s after SIGTERM (killed)\n{self.tail()}")
        elapsed = time.monotonic() - t0
        self.reader.join(5)
        return code, elapsed

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def tail(self, n=40):
        return "".join(self.lines[-n:])

    def warnings(self):
        return self.warning_lines


# --------------------------------------------------------------------------
# Setup helpers

class ClientLog:
    """Collects librdkafka log lines and error callbacks into a file and counters."""

    def __init__(self, path):
        self.logger = logging.getLogger("librdkafka")
        self.logger.propagate = False
        self.logger.setLevel(logging.INFO)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self.logger.addHandler(handler)
        self.errors = []

    def error_cb(self, err):
        self.errors.append(str(err))
        self.logger.error("error_cb: %s", err)


# --------------------------------------------------------------------------
# Phases

def phase_idle(args, broker, bootstrap, clog, results):
    broker.start(args.broker_override)
    startup = broker.wait_serving(60)
    say(f"broker pid {broker.pid} serving after {startup * 1000:.0f} ms (fresh data dir)")
    time.sleep(2)
    empty = proc_status(broker.pid)
    results["empty_rss_bytes"] = empty["VmRSS"]

    topics = {f"footprint-{i:04d}": args.partitions_per_topic for i in range(args.topics)}
    total = args.topics * args.partitions_per_topic
    say(f"creating {args.topics} topics x {args.partitions_per_topic} partitions")
    t0 = time.monotonic()
    create_topics(bootstrap, topics, {"logger": clog.logger, "error_cb": clog.error_cb})
    results["create_topics_seconds"] = time.monotonic() - t0
    say(f"{total} partitions led after {results['create_topics_seconds']:.2f} s; settling {args.settle} s")
    time.sleep(args.settle)
    status = proc_status(broker.pid)
    results.update(
        idle_partitions=total,
        idle_rss_bytes=status["VmRSS"],
        idle_hwm_bytes=status["VmHWM"],
        idle_rss_anon_bytes=status["RssAnon"],
        idle_rss_file_bytes=status["RssFile"],
        idle_threads=status["Threads"],
        idle_fds=proc_fd_count(broker.pid),
    )
    say(f"idle RSS {status['VmRSS'] / MIB:.1f} MiB (HWM {status['VmHWM'] / MIB:.1f} MiB)")
    return topics


def timed_restart(args, broker, topics, stop, timeout=60):
    """Stops the broker with `stop` and starts it again: (serving, first
    metadata with every partition led, the broker's own 'storage loaded' ms)."""
    stop()
    broker.start(args.broker_override)
    t_meta = wait_metadata(broker.port, topics, broker.t_spawn + timeout, broker)
    serving = broker.wait_serving(timeout)
    return serving, t_meta - broker.t_spawn, broker.storage_loaded_ms


def phase_startup(args, broker, topics, results):
    serving, first_metadata, shutdowns, loaded, codes = [], [], [], [], []

    def sigterm():
        code, took = broker.stop()
        codes.append(code)
        shutdowns.append(took)
        if code != 0:
            raise BenchError(f"clean shutdown exited with code {code}\n{broker.tail()}")

    for i in range(args.startup_runs):
        if i:
            time.sleep(1)  # let the previous start settle before the next SIGTERM
        timing = timed_restart(args, broker, topics, sigterm)
        for series, value in zip((serving, first_metadata, loaded), timing):
            series.append(value)
        say(
            f"restart {i + 1}: shutdown {shutdowns[-1] * 1000:.0f} ms, serving after {serving[-1] * 1000:.0f} ms, "
            f"metadata after {first_metadata[-1] * 1000:.0f} ms (storage loaded {loaded[-1]} ms)"
        )
    results.update(
        startup_runs=args.startup_runs,
        startup_serving_seconds=serving,
        startup_metadata_seconds=first_metadata,
        startup_serving_median_seconds=statistics.median(serving),
        startup_metadata_median_seconds=statistics.median(first_metadata),
        startup_storage_loaded_ms=loaded,
        shutdown_seconds=shutdowns,
        shutdown_exit_codes=codes,
    )
    time.sleep(args.settle)
    status = proc_status(broker.pid)
    results.update(
        restarted_idle_rss_bytes=status["VmRSS"],
        restarted_idle_rss_anon_bytes=status["RssAnon"],
        restarted_idle_rss_file_bytes=status["RssFile"],
    )


def phase_recovery(args, broker, bootstrap, topics, clog, results):
    """kill -9 with a record in every partition, then restart: each log is
    re-read from its recovery point. Times serving, the first metadata
    answer with every partition led, and the broker's own storage load."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "logger": clog.logger, "error_cb": clog.error_cb})
    for topic, partitions in topics.items():
        for partition in range(partitions):
            producer.produce(topic, b"recovery", partition=partition)
    if producer.flush(120):
        raise BenchError("records for the recovery phase were not all acknowledged")
    serving, first_metadata, loaded = [], [], []
    for i in range(args.recovery_runs):
        timing = timed_restart(args, broker, topics, broker.kill, timeout=300)
        for series, value in zip((serving, first_metadata, loaded), timing):
            series.append(value)
        say(
            f"recovery {i + 1} after kill -9: serving after {serving[-1] * 1000:.0f} ms, "
            f"metadata after {first_metadata[-1] * 1000:.0f} ms (storage loaded {loaded[-1]} ms)"
        )
    results.update(
        recovery_runs=args.recovery_runs,
        recovery_serving_seconds=serving,
        recovery_metadata_seconds=first_metadata,
        recovery_storage_loaded_ms=loaded,
    )


def phase_connections(args, broker, nofile, results):
    n = args.connections
    need = n + 64
    if nofile < need:
        raise BenchError(f"fd limit {nofile} is below the {need} this phase needs; lower --connections")
    time.sleep(1)
    before = proc_status(broker.pid)["VmRSS"]
    fds_before = proc_fd_count(broker.pid)
    say(f"opening {n} connections (ApiVersions v0 on each); broker RSS before {before / MIB:.1f} MiB")
    socks = []
    t0 = time.monotonic()
    batch = 100
    try:
        for start in range(0, n, batch):
            group = [socket.create_connection(("127.0.0.1", broker.port), timeout=30) for _ in range(min(batch, n - start))]
            socks.extend(group)
            for i, sock in enumerate(group):
                send_request(sock, API_VERSIONS, 0, start + i)
            for i, sock in enumerate(group):
                check_api_versions_v0(read_frame(sock), start + i)
        opened = time.monotonic() - t0
        time.sleep(args.settle)
        after = proc_status(broker.pid)
        fds_after = proc_fd_count(broker.pid)
        say(f"{n} connections open in {opened:.1f} s; broker RSS {after['VmRSS'] / MIB:.1f} MiB, fds +{fds_after - fds_before}")
    finally:
        for sock in socks:
            sock.close()
    time.sleep(args.settle)
    closed = proc_status(broker.pid)["VmRSS"]
    results.update(
        connections=n,
        connections_open_seconds=opened,
        connections_rss_before_bytes=before,
        connections_rss_after_bytes=after["VmRSS"],
        connections_rss_after_close_bytes=closed,
        connections_broker_fd_delta=fds_after - fds_before,
        bytes_per_connection=(after["VmRSS"] - before) / n,
        broker_nofile_limit=proc_nofile_limit(broker.pid),
    )


def value_pool(size, count, seed, kind):
    """`count` distinct pseudo-random values of `size` bytes, sliced from one seeded pool.

    "random" bytes do not compress, so librdkafka sends such batches
    uncompressed whatever compression.type says; "compressible" is text of
    words drawn from a small random vocabulary, which LZ4 shrinks.
    """
    rng = random.Random(seed)
    length = 4 * MIB + size
    if kind == "random":
        pool = rng.randbytes(length)
    else:
        letters = "abcdefghijklmnopqrstuvwxyz"
        vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(512)]
        words, total = [], 0
        while total < length:
            word = rng.choice(vocabulary)
            words.append(word)
            total += len(word) + 1
        pool = " ".join(words).encode()[:length]
    step = max(1, (len(pool) - size) // count)
    return [pool[i * step:i * step + size] for i in range(count)]


CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


STORED_BATCHES = 200


def stored_codecs(data_dir, topic, parts, max_batches=STORED_BATCHES):
    """Compression codecs of the first record batches stored in each partition's first segment."""
    counts = {}
    for p in range(parts):
        path = os.path.join(data_dir, f"{topic}-{p}", "00000000000000000000.log")
        try:
            with open(path, "rb") as f:
                for _ in range(max_batches):
                    head = f.read(61)
                    if len(head) < 61:
                        break
                    (length,) = struct.unpack_from(">i", head, 8)
                    (attributes,) = struct.unpack_from(">h", head, 21)
                    codec = CODECS.get(attributes & 7, str(attributes & 7))
                    counts[codec] = counts.get(codec, 0) + 1
                    f.seek(12 + length - 61, os.SEEK_CUR)
        except OSError:
            pass
    return counts


def phase_throughput(args, broker, bootstrap, clog, results):
    topic, parts, n = "footprint-load", args.load_partitions, args.records
    create_topics(bootstrap, {topic: parts, "footprint-warmup": 1}, {"logger": clog.logger, "error_cb": clog.error_cb})
    values = value_pool(args.value_size, 4096, args.seed, args.values)
    mask = len(values) - 1

    delivered = [0, 0]  # ok, failed
    first_failure = []

    def on_delivery(err, _msg):
        if err is None:
            delivered[0] += 1
        else:
            delivered[1] += 1
            if not first_failure:
                first_failure.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": args.compression,
            "linger.ms": 5,
            "batch.size": 65536,
            "batch.num.messages": 10000,
            "on_delivery": on_delivery,
            "logger": clog.logger,
            "error_cb": clog.error_cb,
        }
    )
    # Client start-up (connections, producer id) happens on a warm-up record
    # to another topic, outside the measured window.
    producer.produce("footprint-warmup", b"warm-up")
    if producer.flush(30) != 0 or delivered != [1, 0]:
        raise BenchError(f"warm-up record not delivered: {delivered} {first_failure}\n{broker.tail()}")
    delivered[0] = 0

    say(f"producing {n} records of {args.value_size} B to {parts} partitions")
    produce, poll = producer.produce, producer.poll
    cpu0, client0, t0 = proc_cpu_seconds(broker.pid), self_cpu_seconds(), time.monotonic()
    for i in range(n):
        value = values[i & mask]
        while True:
            try:
                produce(topic, value, partition=i % parts)
                break
            except BufferError:
                poll(0.005)
        if i & 1023 == 0:
            poll(0)
    left = producer.flush(300)
    t1, cpu1, client1 = time.monotonic(), proc_cpu_seconds(broker.pid), self_cpu_seconds()
    if left or delivered[1] or delivered[0] != n:
        raise BenchError(
            f"produce: {delivered[0]} delivered, {delivered[1]} failed ({first_failure}), {left} still queued\n{broker.tail()}"
        )
    wall = t1 - t0
    results.update(
        produce_records=n,
        produce_seconds=wall,
        produce_records_per_second=n / wall,
        produce_mib_per_second=n * args.value_size / MIB / wall,
        produce_broker_cpu_seconds=cpu1 - cpu0,
        produce_broker_cpu_us_per_record=(cpu1 - cpu0) / n * 1e6,
        produce_client_cpu_seconds=client1 - client0,
    )
    say(f"produced in {wall:.1f} s: {n / wall:,.0f} records/s, broker CPU {(cpu1 - cpu0) / n * 1e6:.1f} µs/record")
    del producer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "krabka-footprint",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "logger": clog.logger,
            "error_cb": clog.error_cb,
        }
    )
    stored = 0
    for p in range(parts):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        stored += high - low
    results["stored_records_by_watermarks"] = stored

    say(f"consuming {n} records with assign() from the beginning")
    count, value_bytes, consume_errors = 0, 0, []
    cpu0, client0, t0 = proc_cpu_seconds(broker.pid), self_cpu_seconds(), time.monotonic()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(parts)])
    last_progress = t0
    while count < n:
        batch = consumer.consume(num_messages=10000, timeout=1.0)
        for msg in batch:
            if msg.error():
                consume_errors.append(str(msg.error()))
                continue
            count += 1
            value_bytes += len(msg.value())
        now = time.monotonic()
        if batch:
            last_progress = now
        elif now - last_progress > 60:
            raise BenchError(f"consume stalled at {count}/{n} records for 60 s\n{broker.tail()}")
    t1, cpu1, client1 = time.monotonic(), proc_cpu_seconds(broker.pid), self_cpu_seconds()
    # Anything beyond n would be a duplicate: give it a moment to show up.
    for msg in consumer.consume(num_messages=10000, timeout=1.0):
        if not msg.error():
            count += 1
    consumer.close()
    wall = t1 - t0
    results.update(
        consume_records=count,
        consume_value_bytes=value_bytes,
        consume_errors=consume_errors[:5],
        consume_error_count=len(consume_errors),
        consume_seconds=wall,
        consume_records_per_second=n / wall,
        consume_mib_per_second=n * args.value_size / MIB / wall,
        consume_broker_cpu_seconds=cpu1 - cpu0,
        consume_broker_cpu_us_per_record=(cpu1 - cpu0) / n * 1e6,
        consume_client_cpu_seconds=client1 - client0,
        throughput_broker_hwm_bytes=proc_status(broker.pid)["VmHWM"],
        stored_batch_codecs=stored_codecs(args.data_dir, topic, parts),
    )
    say(f"consumed {count} in {wall:.1f} s: {n / wall:,.0f} records/s, broker CPU {(cpu1 - cpu0) / n * 1e6:.1f} µs/record")


# --------------------------------------------------------------------------
# Report

def fmt_mib(b):
    return f"{b / MIB:.1f} MiB"


def report(args, meta, results, failures):
    rows = []

    def row(metric, value, goal="", met=None):
        rows.append((metric, value, goal, "" if met is None else ("yes" if met else "**no**")))

    r = results
    if "idle_rss_bytes" in r:
        row(f"Idle RSS, {r['idle_partitions']:,} partitions (VmRSS)", fmt_mib(r["idle_rss_bytes"]), "< 64 MiB", r["idle_rss_bytes"] < 64 * MIB)
        row("  of which anonymous / file-backed", f"{fmt_mib(r['idle_rss_anon_bytes'])} / {fmt_mib(r['idle_rss_file_bytes'])}")
        row("  peak so far (VmHWM)", fmt_mib(r["idle_hwm_bytes"]))
        row("  broker threads / open fds", f"{r['idle_threads']} / {r['idle_fds']}")
        row("RSS of the empty broker (fresh data dir)", fmt_mib(r["empty_rss_bytes"]))
        row(f"Create {args.topics} topics and see every partition led", f"{r['create_topics_seconds']:.2f} s")
    if "startup_serving_median_seconds" in r:
        runs = ", ".join(f"{s * 1000:.0f}" for s in r["startup_serving_seconds"])
        row(
            f"Start-up to 'serving' log line, median of {r['startup_runs']} ({runs} ms)",
            f"{r['startup_serving_median_seconds'] * 1000:.0f} ms",
            "< 1 s",
            r["startup_serving_median_seconds"] < 1,
        )
        runs = ", ".join(f"{s * 1000:.0f}" for s in r["startup_metadata_seconds"])
        row(
            f"Start-up to first metadata response with every partition led, median ({runs} ms)",
            f"{r['startup_metadata_median_seconds'] * 1000:.0f} ms",
            "< 1 s",
            r["startup_metadata_median_seconds"] < 1,
        )
        row("  broker's own 'storage loaded' (ms)", ", ".join(str(x) for x in r["startup_storage_loaded_ms"]))
        row(
            "  clean shutdown on SIGTERM (exit codes)",
            ", ".join(f"{s * 1000:.0f} ms" for s in r["shutdown_seconds"]) + f" ({', '.join(map(str, r['shutdown_exit_codes']))})",
        )
        row(
            "Idle RSS after the last restart (anonymous / file-backed)",
            f"{fmt_mib(r['restarted_idle_rss_bytes'])} ({fmt_mib(r['restarted_idle_rss_anon_bytes'])} / {fmt_mib(r['restarted_idle_rss_file_bytes'])})",
        )
    if "recovery_runs" in r:
        runs = ", ".join(f"{x * 1000:.0f}" for x in r["recovery_metadata_seconds"])
        row(
            f"Restart after kill -9, a record in each of {r['idle_partitions']:,} partitions: first metadata with every partition led ({runs} ms)",
            f"{statistics.median(r['recovery_metadata_seconds']) * 1000:.0f} ms",
        )
        row("  serving / broker's own 'storage loaded' (ms)", ", ".join(f"{a * 1000:.0f} / {b}" for a, b in zip(r["recovery_serving_seconds"], r["recovery_storage_loaded_ms"])))
    if "bytes_per_connection" in r:
        row(
            f"Memory per idle connection ({r['connections']:,} connections, RSS delta / N)",
            f"{r['bytes_per_connection'] / 1024:.1f} KiB",
            "< 16 KiB",
            r["bytes_per_connection"] < 16 * 1024,
        )
        row(
            "  RSS before / with connections / after closing",
            f"{fmt_mib(r['connections_rss_before_bytes'])} / {fmt_mib(r['connections_rss_after_bytes'])} / {fmt_mib(r['connections_rss_after_close_bytes'])}",
        )
        row("  broker fds added / fd limit (broker, script)", f"{r['connections_broker_fd_delta']:,} / {r['broker_nofile_limit']:,}, {meta['nofile_limit']:,}"
            + ("" if meta["nofile_limit"] >= WANTED_NOFILE else f" (wanted {WANTED_NOFILE:,}; the hard limit allows no more)"),
        )
        row("  time to open and handshake all", f"{r['connections_open_seconds']:.1f} s")
    if "produce_records_per_second" in r:
        n = r["produce_records"]
        row(f"Produce {n:,} x {args.value_size} B ({args.values}), {args.load_partitions} partitions, acks=all, idempotent, {args.compression}", f"{r['produce_records_per_second']:,.0f} records/s, {r['produce_mib_per_second']:.1f} MiB/s")
        row("  broker CPU per produced record", f"{r['produce_broker_cpu_us_per_record']:.2f} µs ({r['produce_broker_cpu_seconds']:.1f} s CPU in {r['produce_seconds']:.1f} s)")
        row("  client CPU (script + librdkafka)", f"{r['produce_client_cpu_seconds']:.1f} s ({r['produce_client_cpu_seconds'] / r['produce_seconds']:.0%} of one core)")
        row("  broker CPU utilisation", f"{r['produce_broker_cpu_seconds'] / r['produce_seconds']:.0%} of one core")
    if "consume_records_per_second" in r:
        row("Consume all back, assign() from the beginning", f"{r['consume_records_per_second']:,.0f} records/s, {r['consume_mib_per_second']:.1f} MiB/s")
        row("  broker CPU per consumed record", f"{r['consume_broker_cpu_us_per_record']:.2f} µs ({r['consume_broker_cpu_seconds']:.1f} s CPU in {r['consume_seconds']:.1f} s)")
        row("  client CPU (script + librdkafka)", f"{r['consume_client_cpu_seconds']:.1f} s ({r['consume_client_cpu_seconds'] / r['consume_seconds']:.0%} of one core)")
        row("  broker CPU utilisation", f"{r['consume_broker_cpu_seconds'] / r['consume_seconds']:.0%} of one core")
        ok = r["consume_records"] == r["produce_records"] == r["stored_records_by_watermarks"] and r["consume_value_bytes"] == r["produce_records"] * args.value_size
        row(
            "Sanity: delivered = stored (watermarks) = consumed",
            f"{r['produce_records']:,} = {r['stored_records_by_watermarks']:,} = {r['consume_records']:,}"
            + (f" ({r['consume_error_count']} consume errors)" if r["consume_error_count"] else ""),
            "equal",
            ok,
        )
        row("  broker peak RSS after the load (VmHWM)", fmt_mib(r["throughput_broker_hwm_bytes"]))
        codecs = r.get("stored_batch_codecs") or {}
        row(
            f"  codec of stored batches ({args.values} values; first {STORED_BATCHES} batches of each partition)",
            ", ".join(f"{name}: {count}" for name, count in sorted(codecs.items())) or "unknown",
            args.compression,
            set(codecs) == {args.compression},
        )
    for phase, error in failures:
        row(f"**{phase} FAILED**", error.splitlines()[0][:200])

    out = ["", "## Krabka broker footprint", ""]
    out.append(f"- command: `{meta['command']}`")
    out.append(f"- git HEAD: `{meta['git_head']}`")
    out.append(f"- broker binary: `{meta['broker_bin']}` sha256 `{meta['broker_sha256']}`")
    out.append(f"- date: {meta['date']}, wall time {meta['wall_seconds']:.0f} s")
    out.append(
        f"- machine: {meta['cpus']} CPUs, load average {meta['load_start']} at start, {meta['load_end']} at end; "
        + (f"broker pinned to CPU {meta['broker_cpu']}, client to CPU {meta['client_cpu']} (sched_setaffinity)" if meta["pinned"] else "not pinned")
    )
    out.append(f"- client: confluent-kafka {meta['confluent_kafka']}, librdkafka {meta['librdkafka']}, Python {meta['python_version']}")
    out.append("")
    out.append("| metric | value | goal | met? |")
    out.append("|---|---|---|---|")
    for metric, value, goal, met in rows:
        out.append(f"| {metric} | {value} | {goal} | {met} |")
    print("\n".join(out))
    if results.get("broker_warnings"):
        print(f"\nBroker WARN/ERROR lines: {len(results['broker_warnings'])}, first:")
        for line in results["broker_warnings"][:5]:
            print(f"    {line.rstrip()}")
    if results.get("client_errors"):
        print(f"\nClient error callbacks: {results['client_error_count']}, first: {results['client_errors'][:3]}")
    print()
    print(json.dumps({"krabka_broker_footprint": {"meta": meta, "results": results, "failures": failures}}, sort_keys=True))


# --------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(
        prog="packaging/performance/broker-footprint",
        description="Measure the krabka broker's memory, start-up time and librdkafka throughput.",
    )
    parser.add_argument("--repo", required=True, help=argparse.SUPPRESS)
    parser.add_argument("--broker-bin", help="krabka-broker binary (default: build the release one)")
    parser.add_argument("--format-bin", help="krabka-format binary (default: next to --broker-bin, or build)")
    parser.add_argument("--topics", type=int, default=100, help="topics for the idle phases (default 100)")
    parser.add_argument("--partitions-per-topic", type=int, default=10, help="partitions per topic (default 10)")
    parser.add_argument("--startup-runs", type=int, default=3, help="restarts to time (default 3)")
    parser.add_argument("--recovery-runs", type=int, default=3, help="restarts after kill -9 to time (default 3)")
    parser.add_argument("--connections", type=int, default=10000, help="idle connections (default 10000)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce and consume (default 1000000)")
    parser.add_argument("--value-size", type=int, default=1024, help="record value bytes (default 1024)")
    parser.add_argument("--load-partitions", type=int, default=12, help="partitions of the load topic (default 12)")
    parser.add_argument("--seed", type=int, default=20261201, help="seed of the value pool")
    parser.add_argument(
        "--compression",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        default="lz4",
        help="producer compression.type (default lz4)",
    )
    parser.add_argument(
        "--values",
        choices=["random", "compressible"],
        default="random",
        help="random bytes (default; librdkafka then sends batches uncompressed) or compressible text",
    )
    parser.add_argument("--settle", type=float, default=5, help="seconds to let the broker settle before reading RSS (default 5)")
    parser.add_argument("--skip", default="", help="comma-separated phases to skip: recovery,connections,throughput")
    parser.add_argument("--no-pin", action="store_true", help="do not pin broker and client to separate CPUs")
    parser.add_argument("--workdir", help="data and log directory (default: a new temp dir, removed on success)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE", help="passed to the broker as --override")
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    started = time.monotonic()
    repo = os.path.abspath(args.repo)
    if args.broker_bin:
        broker_bin = os.path.abspath(args.broker_bin)
        format_bin = os.path.abspath(args.format_bin or os.path.join(os.path.dirname(broker_bin), "krabka-format"))
    else:
        broker_bin, built_format = build(repo)
        format_bin = os.path.abspath(args.format_bin or built_format)
    for path in (broker_bin, format_bin):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"broker-footprint: {path} is not an executable")

    nofile = raise_nofile()[0]
    cpus = sorted(os.sched_getaffinity(0))
    pinned = not args.no_pin and len(cpus) >= 2
    broker_cpu, client_cpu = (cpus[0], cpus[1]) if pinned else (None, None)
    if pinned:
        # Before any thread starts: librdkafka's threads inherit this mask.
        os.sched_setaffinity(0, {client_cpu})

    own_workdir = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="krabka-footprint-")
    os.makedirs(workdir, exist_ok=True)
    data_dir = os.path.join(workdir, "data")
    args.data_dir = data_dir
    config_path = os.path.join(workdir, "server.properties")
    port, controller_port = free_port(), free_port()
    while controller_port == port:
        controller_port = free_port()
    write_config(config_path, port, controller_port, data_dir)
    bootstrap = f"127.0.0.1:{port}"
    say(f"work dir {workdir}, broker on {bootstrap}, fd limit {nofile}, pinned={pinned}")
    run([format_bin, "format", "-c", config_path])

    meta = {
        "command": shlex.join(["packaging/performance/broker-footprint"] + sys.argv[3:]),
        "git_head": git_head(repo),
        "broker_bin": broker_bin,
        "broker_sha256": sha256(broker_bin),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "pinned": pinned,
        "broker_cpu": broker_cpu,
        "client_cpu": client_cpu,
        "nofile_limit": nofile,
        "confluent_kafka": getattr(confluent_kafka, "__version__", None) or str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "value_size": args.value_size,
        "values": args.values,
        "compression": args.compression,
        "workdir": workdir,
    }
    clog = ClientLog(os.path.join(workdir, "client.log"))
    broker = Broker(broker_bin, config_path, os.path.join(workdir, "broker.log"), port, broker_cpu)
    results, failures = {}, []
    try:
        topics = phase_idle(args, broker, bootstrap, clog, results)
        phase_startup(args, broker, topics, results)
        for name, phase in (
            ("recovery", lambda: phase_recovery(args, broker, bootstrap, topics, clog, results)),
            ("connections", lambda: phase_connections(args, broker, nofile, results)),
            ("throughput", lambda: phase_throughput(args, broker, bootstrap, clog, results)),
        ):
            if name in skip:
                continue
            try:
                phase()
            except BenchError as e:
                say(f"{name} phase failed: {e}")
                failures.append((name, str(e)))
                if not broker.alive():
                    raise
        code, took = broker.stop()
        results.update(final_shutdown_exit_code=code, final_shutdown_seconds=took)
        if code != 0:
            failures.append(("final shutdown", f"exit code {code}\n{broker.tail()}"))
    except BenchError as e:
        say(f"failed: {e}")
        failures.append(("run", str(e)))
    finally:
        broker.kill()
    results["broker_warnings"] = [line.rstrip() for line in broker.warnings()][:20]
    results["client_errors"] = clog.errors[:10]
    results["client_error_count"] = len(clog.errors)
    meta["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["wall_seconds"] = time.monotonic() - started
    report(args, meta, results, failures)
    if own_workdir and not args.keep and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        say(f"kept {workdir} (broker.log, client.log, data)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
