#!/usr/bin/env python3
"""Writes the record plan a capture client must produce (stdlib only).

    plan.py CLIENT OUT.json

One topic per compression codec, named <client>-<codec>, 3 partitions, two
records per partition with keys, values and headers (including a null key, a
null value, an empty value, binary bytes and a null header value), with
CreateTime timestamps from the capture's start time on. Drivers
produce exactly these records (explicit partition and CreateTime timestamp),
then read them back and compare; curate.py copies the records of each
partition into the manifest of the produce frame that carried them.
"""

import json
import sys
import time

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
# Timestamps start at the capture's whole second: records far in the past
# would be deleted by the broker's time-based retention (7 days) mid-capture.
TIMESTAMP_BASE_MS = int(time.time()) * 1000


def hx(b):
    return None if b is None else b.hex()


def records_for(client, codec, codec_index):
    out = []
    for p in range(PARTITIONS):
        for i in range(2):
            n = p * 2 + i
            key = f"{client}-{codec}-key-{p}-{i}".encode()
            value = (f"{client} {codec} p{p} r{i}: " + "krabka " * 8).encode()
            headers = [["trace-id", f"{codec}-{n:04d}".encode()], ["origin", client.encode()]]
            if n == 1:
                key = None  # null key
            if n == 2:
                value = b""  # empty value
                headers = []  # no headers
            if n == 3:
                value = None  # tombstone
                headers = [["nullable", None]]  # header with a null value
            if n == 4:
                value = bytes(range(256))[::7]  # binary, not UTF-8
            out.append({
                "partition": p,
                "timestamp": TIMESTAMP_BASE_MS + codec_index * 1000 + n,
                "key": hx(key),
                "value": hx(value),
                "headers": [[k, hx(v)] for k, v in headers],
            })
    return out


def plan(client):
    return {
        "client": client,
        "note": "key, value and header values are hex (null = absent); timestamps are CreateTime ms",
        "topics": [
            {"topic": f"{client}-{codec}", "codec": codec, "partitions": PARTITIONS,
             "records": records_for(client, codec, i)}
            for i, codec in enumerate(CODECS)
        ],
    }


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plan.py CLIENT OUT.json")
    with open(sys.argv[2], "w") as f:
        json.dump(plan(sys.argv[1]), f, indent=1)
