#!/usr/bin/env python3
"""Drives librdkafka (confluent-kafka) through the recording proxy.

    capture_librdkafka.py BOOTSTRAP PLAN.json

Admin create/describe, an idempotent acks=all producer per codec producing
the plan's records, an assign/seek consumer reading them back (checked byte
for byte), classic and KIP-848 (group.protocol=consumer) group consumers
committing offsets, list offsets, delete records and delete topics.
"""

import json
import sys
import time

from confluent_kafka import Consumer, OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

TIMEOUT_S = 30


def step(what):
    print(f"capture: {what}", flush=True)


def unhex(v):
    return None if v is None else bytes.fromhex(v)


def wait_all(futures):
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)


def read_all(consumer, want):
    got = []
    deadline = time.time() + TIMEOUT_S
    while len(got) < want:
        if time.time() > deadline:
            sys.exit(f"capture: timed out with {len(got)} of {want} records")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                continue
            sys.exit(f"capture: consumer error: {msg.error()}")
        got.append(msg)
    return got


def verify(plan, got):
    by_tp = {}
    for m in got:
        by_tp.setdefault((m.topic(), m.partition()), []).append(m)
    total = 0
    for t in plan["topics"]:
        for p in range(t["partitions"]):
            want = [r for r in t["records"] if r["partition"] == p]
            have = by_tp.get((t["topic"], p), [])
            if len(have) != len(want):
                sys.exit(f"capture: {t['topic']}/{p}: read {len(have)} records, planned {len(want)}")
            for i, (m, r) in enumerate(zip(have, want)):
                headers = [[k, None if v is None else v.hex()] for k, v in (m.headers() or [])]
                ok = (m.offset() == i and m.timestamp()[1] == r["timestamp"]
                      and m.key() == unhex(r["key"]) and m.value() == unhex(r["value"])
                      and headers == r["headers"])
                if not ok:
                    sys.exit(f"capture: {t['topic']}/{p} offset {m.offset()}: mismatch with plan record {r}")
            total += len(want)
    if total != len(got):
        sys.exit(f"capture: read {len(got)} records, planned {total}")


def main():
    bootstrap, plan_path = sys.argv[1], sys.argv[2]
    plan = json.load(open(plan_path))
    client = plan["client"]
    topics = [t["topic"] for t in plan["topics"]]
    planned = sum(len(t["records"]) for t in plan["topics"])
    base = {"bootstrap.servers": bootstrap, "client.id": f"krabka-corpus-{client}"}

    admin = AdminClient(dict(base))
    step("admin: create topics, describe cluster, topics and configs")
    wait_all(admin.create_topics([NewTopic(t, num_partitions=3, replication_factor=1) for t in topics]))
    admin.list_topics(timeout=TIMEOUT_S)
    admin.describe_cluster().result(timeout=TIMEOUT_S)
    wait_all(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topics[0]),
                                     ConfigResource(ConfigResource.Type.BROKER, "1")]))

    for t in plan["topics"]:
        step(f"producer: idempotent, acks=all, compression.type={t['codec']}")
        producer = Producer({**base, "client.id": f"krabka-corpus-{client}-producer-{t['codec']}",
                             "compression.type": t["codec"], "enable.idempotence": True,
                             "acks": "all", "linger.ms": 200})
        errors = []
        producer.list_topics(t["topic"], timeout=TIMEOUT_S)  # metadata first: one produce request
        for r in t["records"]:
            producer.produce(t["topic"], value=unhex(r["value"]), key=unhex(r["key"]),
                             partition=r["partition"], timestamp=r["timestamp"],
                             headers=[(k, unhex(v)) for k, v in r["headers"]],
                             on_delivery=lambda err, _msg: err and errors.append(err))
        if producer.flush(TIMEOUT_S) != 0 or errors:
            sys.exit(f"capture: produce failed: {errors}")

    step("consumer: assign from offset 0, read everything back")
    consumer = Consumer({**base, "client.id": f"krabka-corpus-{client}-assign",
                         "group.id": f"krabka-corpus-{client}-assign", "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(3)])
    verify(plan, read_all(consumer, planned))
    step("list offsets: watermarks, by timestamp")
    for t in topics:
        for p in range(3):
            consumer.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT_S, cached=False)
    consumer.offsets_for_times([TopicPartition(t, p, 1_700_000_000_000) for t in topics for p in range(3)],
                               timeout=TIMEOUT_S)
    consumer.close()

    for protocol in ("classic", "consumer"):
        step(f"consumer group: group.protocol={protocol}, subscribe, commit, leave")
        conf = {**base, "client.id": f"krabka-corpus-{client}-group-{protocol}",
                "group.id": f"krabka-corpus-{client}-{protocol}", "group.protocol": protocol,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "classic":
            conf["session.timeout.ms"] = 10000
        consumer = Consumer(conf)
        consumer.subscribe(topics)
        verify(plan, read_all(consumer, planned))
        consumer.commit(asynchronous=False)
        consumer.committed([TopicPartition(t, p) for t in topics for p in range(3)], timeout=TIMEOUT_S)
        consumer.close()

    step("admin: list and describe groups, delete records, delete topics")
    admin.list_consumer_groups().result(timeout=TIMEOUT_S)
    wait_all(admin.describe_consumer_groups([f"krabka-corpus-{client}-classic"]))
    wait_all(admin.delete_records([TopicPartition(topics[0], 0, 1)]))
    wait_all(admin.delete_topics(topics, operation_timeout=TIMEOUT_S))
    print(f"capture: {client} client done")


if __name__ == "__main__":
    main()
