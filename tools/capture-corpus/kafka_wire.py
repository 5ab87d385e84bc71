"""Minimal Kafka wire helpers for the corpus tools (stdlib only).

API names come from Apache Kafka 4.3.1's message specs (clients module):
api_key -> (name, first flexible request version, first flexible response
version), -1 when never flexible.
"""

import struct

API = {
    0: ("Produce", 9, 9), 1: ("Fetch", 12, 12), 2: ("ListOffsets", 6, 6),
    3: ("Metadata", 9, 9), 4: ("LeaderAndIsr", -1, -1), 5: ("StopReplica", -1, -1),
    6: ("UpdateMetadata", -1, -1), 7: ("ControlledShutdown", -1, -1),
    8: ("OffsetCommit", 8, 8), 9: ("OffsetFetch", 6, 6), 10: ("FindCoordinator", 3, 3),
    11: ("JoinGroup", 6, 6), 12: ("Heartbeat", 4, 4), 13: ("LeaveGroup", 4, 4),
    14: ("SyncGroup", 4, 4), 15: ("DescribeGroups", 5, 5), 16: ("ListGroups", 3, 3),
    17: ("SaslHandshake", -1, -1), 18: ("ApiVersions", 3, 3), 19: ("CreateTopics", 5, 5),
    20: ("DeleteTopics", 4, 4), 21: ("DeleteRecords", 2, 2), 22: ("InitProducerId", 2, 2),
    23: ("OffsetForLeaderEpoch", 4, 4), 24: ("AddPartitionsToTxn", 3, 3),
    25: ("AddOffsetsToTxn", 3, 3), 26: ("EndTxn", 3, 3), 27: ("WriteTxnMarkers", 1, 1),
    28: ("TxnOffsetCommit", 3, 3), 29: ("DescribeAcls", 2, 2), 30: ("CreateAcls", 2, 2),
    31: ("DeleteAcls", 2, 2), 32: ("DescribeConfigs", 4, 4), 33: ("AlterConfigs", 2, 2),
    34: ("AlterReplicaLogDirs", 2, 2), 35: ("DescribeLogDirs", 2, 2),
    36: ("SaslAuthenticate", 2, 2), 37: ("CreatePartitions", 2, 2),
    38: ("CreateDelegationToken", 2, 2), 39: ("RenewDelegationToken", 2, 2),
    40: ("ExpireDelegationToken", 2, 2), 41: ("DescribeDelegationToken", 2, 2),
    42: ("DeleteGroups", 2, 2), 43: ("ElectLeaders", 2, 2),
    44: ("IncrementalAlterConfigs", 1, 1), 45: ("AlterPartitionReassignments", 0, 0),
    46: ("ListPartitionReassignments", 0, 0), 47: ("OffsetDelete", -1, -1),
    48: ("DescribeClientQuotas", 1, 1), 49: ("AlterClientQuotas", 1, 1),
    50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0),
    52: ("Vote", 0, 0), 53: ("BeginQuorumEpoch", 1, 1), 54: ("EndQuorumEpoch", 1, 1),
    55: ("DescribeQuorum", 0, 0), 56: ("AlterPartition", 0, 0), 57: ("UpdateFeatures", 0, 0),
    58: ("Envelope", 0, 0), 59: ("FetchSnapshot", 0, 0), 60: ("DescribeCluster", 0, 0),
    61: ("DescribeProducers", 0, 0), 62: ("BrokerRegistration", 0, 0),
    63: ("BrokerHeartbeat", 0, 0), 64: ("UnregisterBroker", 0, 0),
    65: ("DescribeTransactions", 0, 0), 66: ("ListTransactions", 0, 0),
    67: ("AllocateProducerIds", 0, 0), 68: ("ConsumerGroupHeartbeat", 0, 0),
    69: ("ConsumerGroupDescribe", 0, 0), 70: ("ControllerRegistration", 0, 0),
    71: ("GetTelemetrySubscriptions", 0, 0), 72: ("PushTelemetry", 0, 0),
    73: ("AssignReplicasToDirs", 0, 0), 74: ("ListConfigResources", 0, 0),
    75: ("DescribeTopicPartitions", 0, 0), 76: ("ShareGroupHeartbeat", 0, 0),
    77: ("ShareGroupDescribe", 0, 0), 78: ("ShareFetch", 0, 0),
    79: ("ShareAcknowledge", 0, 0), 80: ("AddRaftVoter", 0, 0),
    81: ("RemoveRaftVoter", 0, 0), 82: ("UpdateRaftVoter", 0, 0),
    83: ("InitializeShareGroupState", 0, 0), 84: ("ReadShareGroupState", 0, 0),
    85: ("WriteShareGroupState", 0, 0), 86: ("DeleteShareGroupState", 0, 0),
    87: ("ReadShareGroupStateSummary", 0, 0), 88: ("StreamsGroupHeartbeat", 0, 0),
    89: ("StreamsGroupDescribe", 0, 0), 90: ("DescribeShareGroupOffsets", 0, 0),
    91: ("AlterShareGroupOffsets", 0, 0), 92: ("DeleteShareGroupOffsets", 0, 0),
}

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def api_name(api_key):
    entry = API.get(api_key)
    return entry[0] if entry else f"api{api_key}"


def request_is_flexible(api_key, api_version):
    entry = API.get(api_key)
    return bool(entry) and entry[1] >= 0 and api_version >= entry[1]


def response_header_is_flexible(api_key, api_version):
    # ApiVersions responses always use header v0 (clients must parse them
    # before they know the broker's versions).
    if api_key == 18:
        return False
    entry = API.get(api_key)
    return bool(entry) and entry[2] >= 0 and api_version >= entry[2]


class Reader:
    """Bounds-checked reader over a bytes object; raises ValueError on overrun."""

    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def varint(self):
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def string(self, flexible):
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def bytes_(self, flexible):
        n = self.uvarint() - 1 if flexible else self.i32()
        return None if n < 0 else self.take(n)

    def array_len(self, flexible):
        return self.uvarint() - 1 if flexible else self.i32()

    def tagged_fields(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def parse_request_header(frame):
    """Returns (api_key, api_version, correlation_id, client_id, body_offset)."""
    r = Reader(frame)
    api_key, api_version, correlation_id = r.i16(), r.i16(), r.i32()
    client_id = r.string(False)  # client_id is never a compact string
    if request_is_flexible(api_key, api_version):
        r.tagged_fields()
    return api_key, api_version, correlation_id, client_id, r.pos


def response_body_offset(frame, api_key, api_version):
    r = Reader(frame, 4)
    if response_header_is_flexible(api_key, api_version):
        r.tagged_fields()
    return r.pos


def split_batches(records):
    """Splits a records blob into (batch_bytes, info) for each magic-2 batch."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        r = Reader(records, pos)
        base_offset, batch_length = r.i64(), r.i32()
        end = pos + 12 + batch_length
        if batch_length < 49 or end > len(records):
            break  # a partial trailing batch (fetch responses may end with one)
        r.i32()  # partition leader epoch
        magic = r.i8()
        if magic != 2:
            break
        r.take(4)  # crc
        attributes = r.i16()
        last_offset_delta = r.i32()
        base_timestamp, max_timestamp = r.i64(), r.i64()
        producer_id, producer_epoch, base_sequence = r.i64(), r.i16(), r.i32()
        count = r.i32()
        out.append((records[pos:end], {
            "base_offset": base_offset,
            "codec": CODECS.get(attributes & 7, f"codec{attributes & 7}"),
            "transactional": bool(attributes & 0x10),
            "control": bool(attributes & 0x20),
            "record_count": count,
            "last_offset_delta": last_offset_delta,
            "base_timestamp": base_timestamp,
            "max_timestamp": max_timestamp,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "base_sequence": base_sequence,
        }))
        pos = end
    return out


def parse_produce_request(frame):
    """Returns [(topic name or topic id hex, partition, records bytes or None)]."""
    api_key, version, _, _, pos = parse_request_header(frame)
    assert api_key == 0
    flex = version >= 9
    r = Reader(frame, pos)
    r.string(flex)  # transactional id
    r.i16(), r.i32()  # acks, timeout
    out = []
    for _ in range(r.array_len(flex)):
        topic = r.take(16).hex() if version >= 13 else r.string(flex)
        for _ in range(r.array_len(flex)):
            partition = r.i32()
            out.append((topic, partition, r.bytes_(flex)))
            if flex:
                r.tagged_fields()
        if flex:
            r.tagged_fields()
    return out


def parse_fetch_response(frame, version):
    """Returns [(topic name or topic id hex, partition, records bytes or None)]."""
    flex = version >= 12
    r = Reader(frame, response_body_offset(frame, 1, version))
    r.i32()  # throttle time (v1+; Fetch is v4+ in 4.x)
    if version >= 7:
        r.i16(), r.i32()  # error code, session id
    out = []
    for _ in range(r.array_len(flex)):
        topic = r.take(16).hex() if version >= 13 else r.string(flex)
        for _ in range(r.array_len(flex)):
            partition = r.i32()
            r.i16(), r.i64(), r.i64()  # error, high watermark, last stable offset
            if version >= 5:
                r.i64()  # log start offset
            n = r.array_len(flex)
            for _ in range(max(n, 0)):
                r.i64(), r.i64()
                if flex:
                    r.tagged_fields()
            if version >= 11:
                r.i32()  # preferred read replica
            out.append((topic, partition, r.bytes_(flex)))
            if flex:
                r.tagged_fields()
        if flex:
            r.tagged_fields()
    return out
