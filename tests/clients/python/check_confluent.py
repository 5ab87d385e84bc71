#!/usr/bin/env python3
"""Black-box check with confluent-kafka (librdkafka bundled in the wheel).

  check_confluent.py produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
  check_confluent.py consume BOOTSTRAP TOPIC PARTITIONS COUNT

See krabka_contract.py and tests/clients/README-python-go.md.
"""

import os
import sys
import time

sys.dont_write_bytecode = True  # keep tests/clients/python free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import krabka_contract as kc  # noqa: E402

kc.ensure_venv()

try:
    import confluent_kafka as ck  # noqa: E402
except ImportError as e:
    sys.stderr.write("check_confluent: cannot import confluent_kafka (%s); "
                     "run tests/clients/python/install first\n" % e)
    sys.exit(1)

PROG = "check_confluent"


def _error_cb(errors):
    def cb(err):
        # librdkafka reports transient, self-healing conditions here too;
        # fatal ones (e.g. idempotence state loss) end the check.
        errors.append(err)
        sys.stderr.write("%s: client error: %s%s\n" % (PROG, err, " (FATAL)" if err.fatal() else ""))
    return cb


def _raise_fatal(errors):
    for err in errors:
        if err.fatal() or err.code() == ck.KafkaError._ALL_BROKERS_DOWN:
            raise kc.CheckFailed("client error: %s" % err)


def produce(bootstrap, topic, partitions, count, codec):
    errors = []
    p = ck.Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": codec,
        "message.timeout.ms": int(kc.PRODUCE_TIMEOUT_S * 1000),
        "error_cb": _error_cb(errors),
    })
    delivered = [None] * count
    failures = []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                failures.append("record %d: %s" % (i, err))
            else:
                delivered[i] = (msg.partition(), msg.offset())
        return cb

    for i in range(count):
        while True:
            try:
                p.produce(topic, value=kc.value_of(i), key=kc.key_of(i),
                          partition=kc.partition_of(i, partitions),
                          timestamp=kc.timestamp_of(i), headers=kc.headers_of(i),
                          on_delivery=on_delivery(i))
                break
            except BufferError:  # local queue full: serve delivery reports
                p.poll(0.05)
        p.poll(0)
        if failures:
            break
        _raise_fatal(errors)
    remaining = p.flush(kc.PRODUCE_TIMEOUT_S)
    _raise_fatal(errors)
    if failures:
        raise kc.CheckFailed("%d delivery failures, first: %s" % (len(failures), failures[0]))
    if remaining:
        raise kc.CheckFailed("%d records still undelivered after %.0fs" % (remaining, kc.PRODUCE_TIMEOUT_S))
    missing = [i for i, d in enumerate(delivered) if d is None]
    if missing:
        raise kc.CheckFailed("%d records without delivery report, first index %d" % (len(missing), missing[0]))
    kc.check_delivery_offsets(delivered, partitions)


def consume(bootstrap, topic, partitions, count):
    errors = []
    c = ck.Consumer({
        "bootstrap.servers": bootstrap,
        # librdkafka's consumer requires group.id; it is never used to commit
        # or join: partitions are assigned by hand and auto-commit is off.
        "group.id": "krabka-check-unused-%d" % os.getpid(),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "check.crcs": True,
        "error_cb": _error_cb(errors),
    })
    v = kc.Verifier(topic, partitions, count)
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])

        def poll_until(deadline, stop_when_done):
            while time.monotonic() < deadline:
                if stop_when_done and v.done():
                    return
                for msg in c.consume(num_messages=1000, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        raise kc.CheckFailed("consume error on %s [%s]: %s"
                                             % (msg.topic(), msg.partition(), err))
                    ts_type, ts = msg.timestamp()
                    v.check(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                            msg.headers(), ts_type == ck.TIMESTAMP_CREATE_TIME, ts)
                _raise_fatal(errors)

        poll_until(time.monotonic() + kc.CONSUME_TIMEOUT_S, True)
        if not v.done():
            v.finish()  # raises with the per-partition counts
        poll_until(time.monotonic() + kc.LINGER_AFTER_S, False)  # extras/duplicates
        v.finish()
    finally:
        c.close()


if __name__ == "__main__":
    kc.run(PROG, produce, consume)
