#!/usr/bin/env python3
"""Black-box check with kafka-python (pure Python client).

  check_kafka_python.py produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
  check_kafka_python.py consume BOOTSTRAP TOPIC PARTITIONS COUNT

See krabka_contract.py and tests/clients/README-python-go.md.
"""

import logging
import os
import sys
import time

sys.dont_write_bytecode = True  # keep tests/clients/python free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import krabka_contract as kc  # noqa: E402

kc.ensure_venv()

try:
    import kafka  # noqa: E402
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
    from kafka import codec as kafka_codec  # noqa: E402
except ImportError as e:
    sys.stderr.write("check_kafka_python: cannot import kafka (kafka-python) (%s); "
                     "run tests/clients/python/install first\n" % e)
    sys.exit(1)

PROG = "check_kafka_python"

_CODEC_AVAILABLE = {
    "none": lambda: True,
    "gzip": kafka_codec.has_gzip,
    "snappy": kafka_codec.has_snappy,
    "lz4": kafka_codec.has_lz4,
    "zstd": kafka_codec.has_zstd,
}


def produce(bootstrap, topic, partitions, count, codec):
    if not _CODEC_AVAILABLE[codec]():
        raise kc.CheckFailed("kafka-python has no %s support installed "
                             "(run tests/clients/python/install)" % codec)
    cfg = dict(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        compression_type=None if codec == "none" else codec,
        request_timeout_ms=30000,
        max_block_ms=int(kc.PRODUCE_TIMEOUT_S * 1000),
    )
    # Idempotence arrived in kafka-python 2.1; older releases fall back to acks=all only.
    if "enable_idempotence" in KafkaProducer.DEFAULT_CONFIG:
        cfg["enable_idempotence"] = True
    p = KafkaProducer(**cfg)
    try:
        if "enable_idempotence" in cfg and not p.config["enable_idempotence"]:
            raise kc.CheckFailed("kafka-python turned idempotence off (broker too old?)")
        futures = []
        for i in range(count):
            futures.append(p.send(topic, value=kc.value_of(i), key=kc.key_of(i),
                                  headers=kc.headers_of(i),
                                  partition=kc.partition_of(i, partitions),
                                  timestamp_ms=kc.timestamp_of(i)))
        p.flush(timeout=kc.PRODUCE_TIMEOUT_S)
        delivered = []
        for i, f in enumerate(futures):
            if not f.is_done:
                raise kc.CheckFailed("record %d not delivered after %.0fs" % (i, kc.PRODUCE_TIMEOUT_S))
            if f.failed():
                raise kc.CheckFailed("record %d: delivery failed: %r" % (i, f.exception))
            md = f.get(timeout=0)
            if md.topic != topic:
                raise kc.CheckFailed("record %d delivered to topic %r" % (i, md.topic))
            delivered.append((md.partition, md.offset))
        kc.check_delivery_offsets(delivered, partitions)
    finally:
        p.close(timeout=10)


def consume(bootstrap, topic, partitions, count):
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        check_crcs=True,
    )
    v = kc.Verifier(topic, partitions, count)
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()

        def poll_until(deadline, stop_when_done):
            while time.monotonic() < deadline:
                if stop_when_done and v.done():
                    return
                batches = c.poll(timeout_ms=200, max_records=1000)
                for tp, records in batches.items():
                    for r in records:
                        v.check(r.topic, r.partition, r.offset, r.key, r.value, r.headers,
                                r.timestamp_type == 0, r.timestamp)

        poll_until(time.monotonic() + kc.CONSUME_TIMEOUT_S, True)
        if not v.done():
            v.finish()
        poll_until(time.monotonic() + kc.LINGER_AFTER_S, False)
        v.finish()
    finally:
        c.close(autocommit=False)


if __name__ == "__main__":
    # kafka-python logs through `logging`; show only real problems on stderr.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr,
                        format="kafka-python %(levelname)s %(name)s: %(message)s")
    kc.run(PROG, produce, consume)
