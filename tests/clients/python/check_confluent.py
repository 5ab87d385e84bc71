#!/usr/bin/env python3
"""Black-box check with confluent-kafka (librdkafka bundled in the wheel).

  check_confluent.py produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC
  check_confluent.py consume BOOTSTRAP TOPIC PARTITIONS COUNT
  check_confluent.py group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]
  check_confluent.py transactions BOOTSTRAP TOPIC PARTITIONS

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


def group_member(bootstrap, topic, group, protocol, out_path, idle_s):
    """A consumer group member (group.protocol classic or consumer, KIP-848).

    Loop: consume a batch; append "partition offset key" lines to out_path and
    fsync; commit every processed-but-uncommitted offset synchronously. A
    commit that fails (e.g. REBALANCE_IN_PROGRESS) leaves the offsets pending:
    the next batch's commit retries them and on_revoke commits them before
    the partitions go, so a graceful rebalance redelivers nothing. Returns
    the exit status.
    """
    st = kc.GroupMemberState("confluent", protocol, out_path, idle_s)
    errors = []
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "client.id": "group-member-confluent-%d" % os.getpid(),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "error_cb": _error_cb(errors),
    }
    if protocol == "classic":
        # With group.protocol=consumer the broker decides; librdkafka rejects these.
        conf["session.timeout.ms"] = 6000
        conf["heartbeat.interval.ms"] = 1000
    pending = {}  # partition -> next offset, processed but not committed
    owned = set()

    def remember_member_id(c):
        try:
            mid = c.memberid()
        except (ck.KafkaException, RuntimeError):
            mid = None
        if mid:
            st.member_id = mid

    def commit(c, offsets, why):
        """offsets: {partition: next offset}; True when committed."""
        if not offsets:
            return True
        try:
            c.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in sorted(offsets.items())],
                     asynchronous=False)
        except ck.KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, ck.KafkaError) and err.fatal():
                raise
            st.log("commit (%s) of %s failed: %s; kept pending" % (why, offsets, e))
            return False
        for p, o in offsets.items():
            if pending.get(p) == o:
                del pending[p]
        return True

    def on_assign(c, parts):
        owned.update(tp.partition for tp in parts)
        remember_member_id(c)
        st.log("assigned %s now %s member %s" % (kc.partitions_str(tp.partition for tp in parts),
                                                 kc.partitions_str(owned), st.member_id))

    def on_revoke(c, parts):
        revoked = {tp.partition for tp in parts}
        owned.difference_update(revoked)
        todo = {p: o for p, o in pending.items() if p in revoked}
        st.log("revoked %s now %s%s" % (kc.partitions_str(revoked), kc.partitions_str(owned),
                                        ", committing pending %s" % todo if todo else ""))
        try:
            commit(c, todo, "revoke")
        except ck.KafkaException as e:  # fatal: reported by the main loop via error_cb
            st.log("commit (revoke) failed: %s" % e)
        for p in revoked:
            pending.pop(p, None)

    def on_lost(c, parts):
        lost = {tp.partition for tp in parts}
        owned.difference_update(lost)
        for p in lost:
            pending.pop(p, None)
        st.log("lost %s now %s" % (kc.partitions_str(lost), kc.partitions_str(owned)))

    c = None
    try:
        c = ck.Consumer(conf)
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        st.log("subscribed to %s in group %s" % (topic, group))
        while not st.stop:
            msgs = c.consume(num_messages=500, timeout=0.5)
            _raise_fatal(errors)
            rows = []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.fatal():
                        raise kc.CheckFailed("consume error: %s" % err)
                    st.log("consume error (not fatal): %s" % err)
                    continue
                rows.append((m.partition(), m.offset(), m.key()))
            if not rows:
                if st.idle_expired():
                    break
                continue
            st.write_batch(rows)
            for p, off, _ in rows:
                pending[p] = off + 1
            commit(c, dict(pending), "batch")
            remember_member_id(c)
        if st.stop:
            st.log("stop requested (signal)")
        remember_member_id(c)
        commit(c, dict(pending), "final")
        c.close()  # revokes the assignment (on_revoke) and leaves the group
        c = None
        return st.finish()
    except Exception as e:  # noqa: BLE001 - any error ends the member with status 1
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
        return st.finish("%s: %s" % (type(e).__name__, e))


def transactions(bootstrap, topic, partitions):
    """A transactional producer commits 50 records over every partition,
    aborts 50 (flushed first, so they are in the log), commits 50 more; a
    read_committed consumer must read exactly the committed ones."""
    errors = []
    p = ck.Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": "check-confluent-transactions",
        "error_cb": _error_cb(errors),
    })
    p.init_transactions(60)
    committed, aborted = [], []
    for label, commit in (("first", True), ("aborted", False), ("second", True)):
        p.begin_transaction()
        values = ["%s-%d" % (label, i) for i in range(50)]
        for i, value in enumerate(values):
            p.produce(topic, value=value.encode(), partition=i % partitions)
        if p.flush(60) != 0:
            raise kc.CheckFailed("records of %s not delivered" % label)
        if commit:
            p.commit_transaction(60)
            committed.extend(values)
        else:
            p.abort_transaction(60)
            aborted.extend(values)
    _raise_fatal(errors)
    c = ck.Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "check-confluent-transactions-reader",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
    })
    c.assign([ck.TopicPartition(topic, part, ck.OFFSET_BEGINNING) for part in range(partitions)])
    read = []
    deadline = time.monotonic() + 60
    while len(read) < len(committed) and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            read.append(msg.value().decode())
    # Anything past the committed records (an aborted one) would show now.
    extra_deadline = time.monotonic() + 2
    while time.monotonic() < extra_deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            read.append(msg.value().decode())
    c.close()
    if sorted(read) != sorted(committed):
        raise kc.CheckFailed("read_committed read %d records, %d were committed; aborted among them: %d"
                             % (len(read), len(committed), len(set(read) & set(aborted))))
    print('{"committed":%d,"aborted":%d,"read_committed":%d}' % (len(committed), len(aborted), len(read)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "transactions":
        try:
            sys.exit(transactions(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        except kc.CheckFailed as e:
            sys.stderr.write("%s transactions: FAIL: %s\n" % (PROG, e))
            sys.exit(1)
    if len(sys.argv) > 1 and sys.argv[1] == "group-member":
        sys.exit(group_member(*kc.parse_group_member_args(PROG, sys.argv[2:])))
    kc.run(PROG, produce, consume)
