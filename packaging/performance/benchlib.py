"""Helpers shared by the performance scripts in this directory: /proc
readings, process-level limits, building and hashing the release binaries,
and krabka's single-node configuration."""

import hashlib
import json
import os
import resource
import shlex
import socket
import subprocess
import sys
import time

MIB = 1024 * 1024
WANTED_NOFILE = 131072
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    pass


def say(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def proc_status(pid):
    """VmRSS, VmHWM, RssAnon, RssFile (bytes) and Threads of a process."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                fields[key] = int(rest.split()[0]) * 1024
            elif key == "Threads":
                fields[key] = int(rest.split()[0])
    return fields


def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # Fields after the command name, which is in parentheses and may hold spaces.
    rest = text[text.rindex(")") + 2:].split()
    utime, stime = int(rest[11]), int(rest[12])
    return (utime + stime) / CLK_TCK


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command, cwd=None, capture=True):
    result = subprocess.run(command, cwd=cwd, text=True, capture_output=capture)
    if result.returncode != 0:
        detail = (result.stdout or "") + (result.stderr or "") if capture else ""
        raise BenchError(f"{shlex.join(command)} failed with {result.returncode}\n{detail}")
    return result.stdout if capture else ""


def build(repo):
    say("building: cargo build --release --locked -p krabka-broker -p krabka-format")
    t0 = time.monotonic()
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-p", "krabka-broker", "-p", "krabka-format"],
        cwd=repo,
        check=True,
        stdout=sys.stderr,
    )
    meta = json.loads(run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"], cwd=repo))
    target = os.path.join(meta["target_directory"], "release")
    say(f"built in {time.monotonic() - t0:.0f} s")
    return os.path.join(target, "krabka-broker"), os.path.join(target, "krabka-format")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_head(repo):
    try:
        head = run(["git", "-C", repo, "rev-parse", "HEAD"]).strip()
        dirty = bool(run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"]).strip())
        return head + ("+dirty" if dirty else "")
    except (BenchError, FileNotFoundError):
        return "unknown"


def raise_nofile():
    """Raises the soft (and, if allowed, hard) fd limit toward 131072; children inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (WANTED_NOFILE, max(hard, WANTED_NOFILE)))
    except (ValueError, OSError):
        # Without CAP_SYS_RESOURCE the hard limit caps us.
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def write_config(path, port, controller_port, data_dir):
    with open(path, "w") as f:
        f.write(
            "\n".join(
                [
                    "# written by packaging/performance (benchlib.write_config)",
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={data_dir}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "",
                ]
            )
        )


def create_topics(bootstrap, topics, admin_config=None, retry_seconds=0, replication_factor=1):
    """Creates {name: partitions} with confluent-kafka's AdminClient and waits
    until every partition has a leader and every replica in sync.
    retry_seconds > 0 retries failed creations that long (a broker still
    starting); 0 fails at once."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **(admin_config or {})})
    deadline = time.monotonic() + max(retry_seconds, 60)
    pending = dict(topics)
    retrying = False
    while pending:
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=n, replication_factor=replication_factor) for name, n in pending.items()],
            operation_timeout=60,
            request_timeout=120,
        )
        failures = {}
        for name, future in futures.items():
            try:
                future.result()
            except Exception as e:  # noqa: BLE001 - retried or reported below
                # A retry after a timed-out attempt may find the topic that
                # attempt created: that is success, not a failure to retry.
                code = e.args[0].code() if e.args and isinstance(e.args[0], KafkaError) else None
                if not (retrying and code == KafkaError.TOPIC_ALREADY_EXISTS):
                    failures[name] = e
        if failures and (retry_seconds <= 0 or time.monotonic() > deadline):
            name, error = next(iter(failures.items()))
            raise BenchError(f"{len(failures)} topic(s) not created, first: {name}: {error}")
        pending = {name: topics[name] for name in failures}
        if pending:
            retrying = True
            time.sleep(0.5)
    while True:
        metadata = admin.list_topics(timeout=10)
        if all(
            name in metadata.topics
            and len(metadata.topics[name].partitions) == n
            and all(
                p.leader >= 0 and len(p.isrs) == replication_factor
                for p in metadata.topics[name].partitions.values()
            )
            for name, n in topics.items()
        ):
            return
        if time.monotonic() > deadline:
            raise BenchError(f"topics {sorted(topics)} have partitions without a leader or a whole ISR")
        time.sleep(0.05)
