"""The capacity cells' client: tools/loadgen (krabka-loadgen) pinned to the
client CPUs, flat out, every record read back and verified.

The generator prints a marker on stderr when its produce phase ends; the
brokers' CPU is read when the run starts, at that marker and at the end, so
a produce cell is charged the produce phase's CPU and a fan-out cell
(readers > 1) the read-back's. A fan-out cell's readers verify by batch
header and CRC (`--verify batches`), the others decode every record. The
result has the Java workload's shape,
with `measured_records` and `broker_cpu_seconds` for the measured phase.
"""

import json
import os
import resource
import shlex
import subprocess
import threading
import time

from benchlib import MIB, BenchError, say

PRODUCE_DONE = "[loadgen] produce phase done"
NAN = float("nan")


def build_loadgen(repo):
    """The release krabka-loadgen, built when missing or stale (cargo decides)."""
    say("building: cargo build --release --locked -p krabka-loadgen")
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "krabka-loadgen"], cwd=repo, check=True)
    return os.path.join(repo, "target", "release", "krabka-loadgen")


class Loadgen:
    def __init__(self, binary, cpus):
        self.binary, self.cpus = binary, set(cpus)

    def command(self, bootstrap, topic, cell, records):
        return [
            self.binary,
            "--bootstrap", bootstrap,
            "--topic", topic,
            "--partitions", str(cell["partitions"]),
            "--records", str(records),
            "--record-size", str(cell["record_bytes"]),
            "--payload", cell["payload"],
            "--compression", cell["compression"],
            "--consume",
            "--readers", str(cell.get("readers", 1)),
            # A fan-out cell measures fetching: its readers check sequences
            # from batch headers and CRCs, so they keep up with the broker.
            "--verify", "batches" if cell.get("readers", 1) > 1 else "records",
        ]

    def run(self, bootstrap, topic, cell, records, log_path, broker_cpu):
        """Runs one generator; `broker_cpu()` reads the brokers' CPU seconds."""
        command = self.command(bootstrap, topic, cell, records)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(log_path, "a") as log:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            cpu = {"start": broker_cpu()}
            started = time.monotonic()
            proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=lambda: os.sched_setaffinity(0, self.cpus),
            )
            reader = threading.Thread(target=self._follow, args=(proc.stderr, log, cpu, broker_cpu), daemon=True)
            reader.start()
            stdout = proc.stdout.read()
            proc.wait()
            reader.join()
            cpu["end"] = broker_cpu()
            process_wall = time.monotonic() - started
            log.write(stdout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if not lines or "produced" not in cpu:
            raise BenchError(f"krabka-loadgen gave no result (exit {proc.returncode}); see {log_path}")
        client_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        result = self._result(json.loads(lines[-1]), cell, cpu)
        result["client_process_cores"] = client_cpu / process_wall if process_wall else NAN
        return result

    def write_baseline(self, cell, records, directory, cpus, log_path):
        """The same batches appended with write(2), one file per partition in
        `directory`, by one generator thread pinned to `cpus` (the broker's):
        the floor a capacity cell's produce path is compared with. Returns
        the generator's summary (`cpu_us_per_record`, `records_per_second`)."""
        os.makedirs(directory, exist_ok=True)
        command = [
            self.binary,
            "--partitions", str(cell["partitions"]),
            "--records", str(records),
            "--record-size", str(cell["record_bytes"]),
            "--payload", cell["payload"],
            "--compression", cell["compression"],
            "--write-baseline", directory,
        ]
        with open(log_path, "a") as log:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            result = subprocess.run(
                command, stdout=subprocess.PIPE, stderr=log, text=True, preexec_fn=lambda: os.sched_setaffinity(0, set(cpus))
            )
            log.write(result.stdout)
        if result.returncode != 0:
            raise BenchError(f"krabka-loadgen --write-baseline failed (exit {result.returncode}); see {log_path}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    @staticmethod
    def _follow(stream, log, cpu, broker_cpu):
        for line in stream:
            if line.startswith(PRODUCE_DONE):
                cpu["produced"] = broker_cpu()
            log.write(line)
        log.flush()

    @staticmethod
    def _result(summary, cell, cpu):
        fan_out = cell.get("readers", 1) > 1
        latency = summary["produce_latency_ms"]
        acked = summary["records_acked"]
        if fan_out:
            measured, rate = summary["records_consumed"] or 0, summary["consume_records_per_second"] or 0.0
            broker_seconds = cpu["end"] - cpu["produced"]
        else:
            measured, rate = acked, summary["records_per_second"]
            broker_seconds = cpu["produced"] - cpu["start"]
        return {
            "records": acked + summary["errors"],
            "errors": summary["errors"],
            "measured_records": measured,
            "broker_cpu_seconds": broker_seconds,
            "records_per_second": rate,
            "mib_per_second": rate * cell["record_bytes"] / MIB,
            "produce_latency_ms": {q: latency[q] if latency[q] is not None else NAN for q in ("p50", "p95", "p99")},
            "end_to_end_latency_ms": {"p50": NAN, "p99": NAN},
            "duplicates": summary["duplicates"] or 0,
            "missing": summary["missing"] or 0,
            "ok": bool(summary["ok"]),
            # The generator's own share of its core over the produce phase.
            "client_cpu_cores": summary["produce_cpu_seconds"] / summary["wall_seconds"] if summary["wall_seconds"] else NAN,
            "summary": summary,
        }
