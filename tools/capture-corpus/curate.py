#!/usr/bin/env python3
"""Turns a raw proxy capture into a small golden corpus (stdlib only).

    curate.py RAW_DIR OUT_DIR [--plan PLAN.json] [--broker-out DIR] [--max-per-kind 3]

Keeps at most --max-per-kind request/response pairs per kind (one if a frame
is over 8 KiB), where a kind is
(api key, api version) refined for Produce requests and Fetch responses by the
codecs and batch flags their record batches carry (so every codec survives),
and by whether records were present at all. Every distinct api+version is
kept. Frames the broker sent to itself through the proxy (transaction markers,
AddPartitionsToTxn verification: client ids "broker-N-..." and
"AddPartitionsManager-...") go to --broker-out, or are dropped without it.

Files are renumbered in capture order. Produce requests whose batches match
a plan topic (same codec, same partition) get the records the client sent,
copied from the plan; uncompressed and gzip batches are decoded and checked
against them here (all codecs were already checked by the client reading its
records back).
"""

import argparse
import collections
import gzip
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kafka_wire as kw  # noqa: E402

# Pairs with a frame bigger than this are kept once per kind, not
# --max-per-kind times (DescribeConfigs of a broker is ~15 KiB).
LARGE_FRAME_BYTES = 8192
BROKER_CLIENT_ID = re.compile(r"^(broker-\d+-|AddPartitionsManager-)")


def decode_records(batch, info):
    """Decodes the records of an uncompressed or gzip batch; None for other codecs."""
    body = batch[61:]
    if info["codec"] == "gzip":
        body = gzip.decompress(body)
    elif info["codec"] != "none":
        return None
    r = kw.Reader(body)
    out = []
    for _ in range(info["record_count"]):
        length = r.varint()
        rec = kw.Reader(r.take(length))
        rec.i8()  # attributes
        ts_delta = rec.varint()
        offset_delta = rec.varint()

        def blob():
            n = rec.varint()
            return None if n < 0 else rec.take(n)

        key, value = blob(), blob()
        headers = []
        for _ in range(rec.varint()):
            hk = blob()
            headers.append([hk.decode(), None if (hv := blob()) is None else hv.hex()])
        out.append({"offset_delta": offset_delta, "timestamp_delta": ts_delta,
                    "key": None if key is None else key.hex(),
                    "value": None if value is None else value.hex(), "headers": headers})
    return out


def batch_summaries(parts):
    out = []
    for topic, partition, records in parts:
        entry = {"topic_id" if re.fullmatch(r"[0-9a-f]{32}", topic or "") else "topic": topic,
                 "partition": partition,
                 "records_bytes": 0 if records is None else len(records),
                 "batches": [info for _, info in kw.split_batches(records or b"")]}
        out.append((entry, records))
    return out


def variant(entries):
    flags = set()
    for e, _ in entries:
        for b in e["batches"]:
            flags.add(b["codec"] + ("+txn" if b["transactional"] else "") + ("+control" if b["control"] else ""))
    return ",".join(sorted(flags)) or "empty"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw_dir")
    p.add_argument("out_dir")
    p.add_argument("--plan")
    p.add_argument("--broker-out", help="where frames the broker sent to itself go (default: dropped)")
    p.add_argument("--max-per-kind", type=int, default=3)
    args = p.parse_args()

    raw = json.load(open(os.path.join(args.raw_dir, "manifest.json")))
    frames = raw["frames"]
    plan = json.load(open(args.plan)) if args.plan else {"topics": []}
    plan_by_codec = {t["codec"]: t for t in plan["topics"]}

    # Pair up requests and responses.
    by_file = {f["file"]: f for f in frames}
    response_of = {f["request_file"]: f for f in frames if f["direction"] == "response" and f.get("request_file")}
    out_dirs = {"client": args.out_dir, "broker": args.broker_out}
    kept = collections.defaultdict(list)  # dest -> [(request, response)]
    counts = collections.Counter()
    problems = []

    for req in frames:
        if req["direction"] != "request":
            continue
        resp = response_of.get(req["file"])
        dest = "broker" if BROKER_CLIENT_ID.match(req.get("client_id") or "") else "client"
        if out_dirs[dest] is None:
            continue
        data = open(os.path.join(args.raw_dir, req["file"]), "rb").read()
        annotations = {}
        kind = (dest, req["api_key"], req["api_version"])
        if req["api_key"] == 0:
            parts = batch_summaries(kw.parse_produce_request(data))
            kind += ("produce", variant(parts))
            annotations["request"] = parts
        if req["api_key"] == 1 and resp is not None:
            rdata = open(os.path.join(args.raw_dir, resp["file"]), "rb").read()
            parts = batch_summaries(kw.parse_fetch_response(rdata, resp["api_version"]))
            kind += ("fetch", variant(parts))
            annotations["response"] = parts
        counts[kind] += 1
        large = max(req["size"], resp["size"] if resp else 0) > LARGE_FRAME_BYTES
        if counts[kind] > (1 if large else args.max_per_kind):
            continue
        kept[dest].append((req, resp, annotations))

    for dest, pairs in kept.items():
        out = out_dirs[dest]
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        manifest = {"client": raw["client"] if dest == "client" else "kafka-broker",
                    "captured_through": raw["client"], "frames": []}
        files = []
        for req, resp, ann in pairs:
            files.append((req, ann.get("request")))
            if resp is not None:
                files.append((resp, ann.get("response")))
        files.sort(key=lambda fa: fa[0]["file"])  # capture order
        renamed = {}
        for n, (f, _) in enumerate(files, 1):
            renamed[f["file"]] = f"{n:04d}-" + f["file"].split("-", 1)[1]
        for f, parts in files:
            entry = {
                "file": renamed[f["file"]],
                "direction": f["direction"],
                "api_key": f["api_key"],
                "api_name": f["api_name"],
                "api_version": f["api_version"],
                "correlation_id": f["correlation_id"],
                "client": manifest["client"],
                "client_id": f.get("client_id") or by_file.get(f.get("request_file"), {}).get("client_id"),
                "connection": f["connection"],
                "size": f["size"],
            }
            if f["direction"] == "request":
                resp = response_of.get(f["file"])
                entry["response_file"] = renamed.get(resp["file"]) if resp else None
            else:
                entry["request_file"] = renamed.get(f.get("request_file"))
            if parts is not None:
                entry["partitions"] = []
                for e, records in parts:
                    codecs = sorted({b["codec"] for b in e["batches"]})
                    if codecs:
                        e["codec"] = codecs[0] if len(codecs) == 1 else "mixed"
                    topic = plan_by_codec.get(e.get("codec"))
                    if topic and not any(b["transactional"] or b["control"] for b in e["batches"]):
                        e["plan_topic"] = topic["topic"]
                        sent = [r for r in topic["records"] if r["partition"] == e["partition"]]
                        if f["direction"] == "request":
                            e["records_sent"] = sent
                            check_sent(records, e, sent, entry["file"], problems)
                    entry["partitions"].append(e)
            manifest["frames"].append(entry)
            shutil.copyfile(os.path.join(args.raw_dir, f["file"]), os.path.join(out, entry["file"]))
        with open(os.path.join(out, "manifest.json"), "w") as fh:
            # One frame per line: small, greppable, diffable.
            fh.write('{"client": %s, "captured_through": %s, "frames": [\n' % (
                json.dumps(manifest["client"]), json.dumps(manifest["captured_through"])))
            fh.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in manifest["frames"]))
            fh.write("\n]}\n")
        total = sum(e["size"] for e in manifest["frames"])
        print(f"curate: {out}: {len(manifest['frames'])} frames, {total} bytes", file=sys.stderr)
    for p_ in problems:
        print("curate: PROBLEM:", p_, file=sys.stderr)
    sys.exit(1 if problems else 0)


def check_sent(records, entry, sent, file, problems):
    count = sum(b["record_count"] for b in entry["batches"])
    if count != len(sent):
        problems.append(f"{file}: partition {entry['partition']} carries {count} records, plan has {len(sent)}")
        return
    decoded = []
    for batch, info in kw.split_batches(records or b""):
        d = decode_records(batch, info)
        if d is None:
            return  # snappy/lz4/zstd: not decodable with the stdlib
        for rec in d:
            rec["timestamp"] = info["base_timestamp"] + rec["timestamp_delta"]
        decoded += d
    for got, want in zip(decoded, sent):
        if (got["key"], got["value"], got["headers"], got["timestamp"]) != \
                (want["key"], want["value"], want["headers"], want["timestamp"]):
            problems.append(f"{file}: partition {entry['partition']}: decoded {got} != sent {want}")


if __name__ == "__main__":
    main()
