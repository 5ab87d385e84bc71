#!/usr/bin/env python3
"""Black-box check with kafka-python (pure Python client).

  check_kafka_python.py produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
  check_kafka_python.py consume BOOTSTRAP TOPIC PARTITIONS COUNT
  check_kafka_python.py group-member BOOTSTRAP TOPIC GROUP classic OUTPUT_FILE [IDLE_EXIT_SECONDS]

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
    from kafka import errors as kafka_errors  # noqa: E402
    from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener  # noqa: E402
    from kafka.structs import OffsetAndMetadata  # noqa: E402
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


# Commit failures that mean "the group moved on or is moving": the offsets stay
# pending and are retried with the next batch or committed on revocation.
_COMMIT_RETRY_LATER = (
    kafka_errors.CommitFailedError,
    kafka_errors.RebalanceInProgressError,
    kafka_errors.IllegalGenerationError,
    kafka_errors.UnknownMemberIdError,
)


def group_member(bootstrap, topic, group, protocol, out_path, idle_s):
    """A classic consumer group member (kafka-python has no KIP-848 client).

    Loop: poll; append "partition offset key" lines to out_path and fsync;
    commit every processed-but-uncommitted offset synchronously. kafka-python
    3.x runs rebalance listeners on its IO thread (only while poll() drives a
    rebalance, so never concurrently with the processing here); a blocking
    commit there raises, so the listener is an AsyncConsumerRebalanceListener
    that awaits the coordinator's async commit for pending offsets of revoked
    partitions. Returns the exit status.
    """
    if protocol != "classic":
        sys.stderr.write("%s group-member: kafka-python %s supports only the classic group "
                         "protocol, not %r (KIP-848)\n" % (PROG, kafka.__version__, protocol))
        return 2
    st = kc.GroupMemberState("kafka-python", protocol, out_path, idle_s)
    pending = {}  # TopicPartition -> next offset, processed but not committed
    owned = set()
    holder = {}

    def remember_member_id(c):
        try:
            mid = c.group_metadata().member_id
        except Exception:  # noqa: BLE001
            mid = None
        if mid:
            st.member_id = mid

    def offsets_of(todo):
        return {tp: OffsetAndMetadata(o, "", -1) for tp, o in todo.items()}

    def forget_committed(todo):
        for tp, o in todo.items():
            if pending.get(tp) == o:
                del pending[tp]

    class Listener(AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            parts = {tp.partition for tp in revoked}
            owned.difference_update(parts)
            todo = {tp: o for tp, o in pending.items() if tp in revoked}
            st.log("revoked %s now %s%s" % (kc.partitions_str(parts), kc.partitions_str(owned),
                                            ", committing pending %s" % {tp.partition: o for tp, o in todo.items()}
                                            if todo else ""))
            if todo:
                try:
                    # The coroutine behind KafkaConsumer.commit(); awaiting it
                    # keeps heartbeats going on the IO loop.
                    await holder["c"]._coordinator._commit_offsets_sync_async(offsets_of(todo), timeout_ms=15000)
                    forget_committed(todo)
                except Exception as e:  # noqa: BLE001
                    st.log("commit (revoke) failed: %s: %s" % (type(e).__name__, e))
            for tp in revoked:
                pending.pop(tp, None)

        async def on_partitions_assigned(self, assigned):
            owned.update(tp.partition for tp in assigned)
            remember_member_id(holder["c"])
            st.log("assigned %s now %s member %s" % (kc.partitions_str(tp.partition for tp in assigned),
                                                     kc.partitions_str(owned), st.member_id))

        async def on_partitions_lost(self, lost):
            parts = {tp.partition for tp in lost}
            owned.difference_update(parts)
            for tp in lost:
                pending.pop(tp, None)
            st.log("lost %s now %s" % (kc.partitions_str(parts), kc.partitions_str(owned)))

    def commit(c, why):
        todo = dict(pending)
        if not todo:
            return
        try:
            c.commit(offsets=offsets_of(todo), timeout_ms=30000)
            forget_committed(todo)
        except _COMMIT_RETRY_LATER as e:
            st.log("commit (%s) of %s failed: %s: %s; kept pending"
                   % (why, {tp.partition: o for tp, o in todo.items()}, type(e).__name__, e))

    c = None
    try:
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="group-member-kafka-python-%d" % os.getpid(),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        holder["c"] = c
        c.subscribe([topic], listener=Listener())
        st.log("subscribed to %s in group %s" % (topic, group))
        while not st.stop:
            batches = c.poll(timeout_ms=500, max_records=500)
            rows = [(r.partition, r.offset, r.key) for records in batches.values() for r in records]
            if not rows:
                if st.idle_expired():
                    break
                continue
            st.write_batch(rows)
            for records in batches.values():
                for r in records:
                    pending[TopicPartition(r.topic, r.partition)] = r.offset + 1
            commit(c, "batch")
            remember_member_id(c)
        if st.stop:
            st.log("stop requested (signal)")
        remember_member_id(c)
        commit(c, "final")
        c.close(autocommit=False)  # revokes the assignment (listener) and leaves the group
        c = None
        return st.finish()
    except Exception as e:  # noqa: BLE001 - any error ends the member with status 1
        if c is not None:
            try:
                c.close(autocommit=False, timeout_ms=5000)
            except Exception:  # noqa: BLE001
                pass
        return st.finish("%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    # kafka-python logs through `logging`; show only real problems on stderr.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr,
                        format="kafka-python %(levelname)s %(name)s: %(message)s")
    if len(sys.argv) > 1 and sys.argv[1] == "group-member":
        sys.exit(group_member(*kc.parse_group_member_args(PROG, sys.argv[2:])))
    kc.run(PROG, produce, consume)
