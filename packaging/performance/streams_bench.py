"""Kafka Streams exactly-once beside Apache Kafka 4.3.1: the records/s of the
counting app of tests/clients/java (`client-check streams-bench`: 1,000 keys
counted in an in-memory store, every count written out, exactly_once_v2,
commit.interval.ms=100) on one broker a side.

Run through the `streams-bench` wrapper next to this file. Each round starts
each side on a fresh data directory pinned to --broker-cpus (the side that
goes first alternates), creates the input and output topics, and runs the
app pinned to --client-cpus: it writes --records keyed records, then is
timed from its RUNNING state until its committed input offsets cover them
all. The broker's CPU time over that window comes from the same accounting
as side-by-side. Prints a markdown table of the medians and writes
runs.csv and summary.md to --out.
"""

import argparse
import csv
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

from benchlib import MIB, build, create_topics, git_head, raise_nofile, say
from side_by_side import CpuAccount, Sampler, kafka_side, krabka_side, parse_cpus, pinned, stop_brokers

FIELDS = ["round", "side", "label", "records", "seconds", "records_per_second", "commit_latency_ms",
          "produce_latency_ms", "broker_cpu_seconds", "cpu_us_per_record", "peak_rss_bytes", "ok"]


def run_app(repo, cpus, bootstrap, workdir, records, log_path):
    """`client-check streams-bench` pinned to `cpus`: its JSON answer."""
    command = [os.path.join(repo, "tests", "clients", "java", "run"), "streams-bench", bootstrap, "bench-input",
               "bench-output", "streams-bench", os.path.join(workdir, "state"), str(records)]
    with open(log_path, "a") as log:
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True, cwd=repo,
                                preexec_fn=pinned(cpus), timeout=900)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if result.returncode == 0 and lines else None


def trial(args, side, round_no, logs):
    tag = f"r{round_no}-{side.kind}"
    workdir = os.path.join(args.workroot, tag)
    os.makedirs(workdir, exist_ok=True)
    account = CpuAccount(tag) if CpuAccount.available() else None
    procs, bootstrap = side.start(workdir, args.broker_cpus, os.path.join(logs, f"{tag}-broker.log"), account)
    sampler = None
    try:
        create_topics(bootstrap, {"bench-input": args.partitions, "bench-output": args.partitions}, retry_seconds=90)
        sampler = Sampler([p.pid for p in procs], account)
        cpu_before = sampler.cpu_now()
        outcome = run_app(args.repo, args.client_cpus, bootstrap, workdir, args.records,
                          os.path.join(logs, f"{tag}-app.log"))
        cpu = sampler.cpu_now() - cpu_before
    finally:
        if sampler:
            sampler.stop()
        stop_brokers(procs)
        if account:
            account.remove()
    ok = outcome is not None
    return {
        "round": round_no,
        "side": side.kind,
        "label": side.label,
        "records": args.records,
        "seconds": outcome["seconds"] if ok else float("nan"),
        "records_per_second": outcome["records_per_second"] if ok else float("nan"),
        "commit_latency_ms": outcome["commit_latency_ms"] if ok else float("nan"),
        "produce_latency_ms": outcome["produce_latency_ms"] if ok else float("nan"),
        # The app's whole run (the producing before the timed window too).
        "broker_cpu_seconds": round(cpu, 3),
        "cpu_us_per_record": cpu / args.records * 1e6,
        "peak_rss_bytes": sampler.peak_rss if sampler else 0,
        "ok": ok,
    }


def summary(args, rows, candidate, reference):
    def median(kind, metric):
        values = [r[metric] for r in rows if r["side"] == kind and r["ok"]]
        return statistics.median(values) if values else float("nan")

    head = [
        f"# Kafka Streams exactly_once_v2: {candidate.label} vs {reference.label}",
        "",
        f"- command: `{args.command}`",
        f"- rounds {args.rounds}, {args.records:,} records, {args.partitions} partitions, broker CPUs "
        f"{','.join(map(str, args.broker_cpus))}, client CPUs {','.join(map(str, args.client_cpus))}",
        "",
        "| side | records/s | seconds | commit ms (mean) | produce request ms (mean) | broker CPU µs/rec (whole run) "
        "| peak RSS MiB | failed rounds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for side in (candidate, reference):
        failed = sum(1 for r in rows if r["side"] == side.kind and not r["ok"])
        head.append(
            f"| {side.label} | {median(side.kind, 'records_per_second'):,.0f} | {median(side.kind, 'seconds'):.2f} "
            f"| {median(side.kind, 'commit_latency_ms'):.1f} | {median(side.kind, 'produce_latency_ms'):.1f} "
            f"| {median(side.kind, 'cpu_us_per_record'):.2f} | {median(side.kind, 'peak_rss_bytes') / MIB:.1f} "
            f"| {failed} |"
        )
    return "\n".join(head) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--candidate-bin", help="krabka-broker to measure (default: build the release one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--broker-cpus", default="0")
    parser.add_argument("--client-cpus", default="1")
    parser.add_argument("--out", help="output directory (default target/perf-runs/streams-<UTC time>)")
    args = parser.parse_args()
    args.repo = os.path.abspath(args.repo)
    args.command = shlex.join(["packaging/performance/streams-bench"] + sys.argv[3:])
    args.broker_cpus, args.client_cpus = parse_cpus(args.broker_cpus), parse_cpus(args.client_cpus)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.abspath(args.out or os.path.join(args.repo, "target", "perf-runs", f"streams-{stamp}"))
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    args.workroot = os.path.join(out, "work")
    raise_nofile()
    if args.candidate_bin:
        broker_bin = os.path.abspath(args.candidate_bin)
        format_bin = os.path.join(os.path.dirname(broker_bin), "krabka-format")
    else:
        broker_bin, format_bin = build(args.repo)
    candidate = krabka_side(f"krabka {git_head(args.repo)[:12]}", broker_bin, format_bin)
    reference = kafka_side(args.repo)
    rows = []
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for round_no in range(args.rounds):
            for side in [candidate, reference] if round_no % 2 == 0 else [reference, candidate]:
                say(f"round {round_no} {side.label}")
                row = trial(args, side, round_no, logs)
                say(f"  {row['records_per_second']:,.0f} records/s in {row['seconds']} s, ok={row['ok']}")
                rows.append(row)
                writer.writerow(row)
                f.flush()
    text = summary(args, rows, candidate, reference)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
