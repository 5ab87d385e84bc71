//! Fetch responses with holes for record bytes the caller sends itself.
//!
//! A broker answers a Fetch with record bytes straight from its segment
//! files (sendfile(2)), so the frame is encoded as byte parts with a
//! placeholder where each partition's records go. The frame is
//! byte-identical to [`FetchResponse`](crate::FetchResponse)'s generated
//! encoder given the same records inline (tested for every version). This
//! module knows only lengths: what stands for the records (a file range, a
//! buffer) is the caller's type, never read here.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::EncodeError;
use crate::fetch_response::{EpochEndOffset, LeaderIdAndEpoch, NodeEndpoint, PartitionData, SnapshotId};
use crate::frame::SIZE_PREFIX_BYTES;
use crate::generated::{ApiKey, ResponseHeader};
use crate::message::Message;
use crate::primitives::{
    put_array, put_array_length, put_string, put_tagged_fields, put_unsigned_varint, put_uuid, EncodeResult,
};
use crate::{FetchResponse, Uuid};

/// The first version with a top-level error code and session id.
const FIRST_SESSION_VERSION: i16 = 7;
/// The first version that names topics by id instead of by name.
const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// The first version with NodeEndpoints (KIP-951).
const FIRST_NODE_ENDPOINTS_VERSION: i16 = 16;
/// Headers of a frame rarely pass this: a few dozen bytes per partition.
const FIRST_BUFFER_BYTES: usize = 256;

/// The response's top-level fields.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SplicedFetchHeader<'a> {
    pub version: i16,
    pub correlation_id: i32,
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub session_id: i32,
    /// The leaders a partition's error names (KIP-951, v16+).
    pub node_endpoints: &'a [NodeEndpoint],
}

/// A response topic: by name before v13, by id from v13.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplicedTopic<'a> {
    pub name: &'a str,
    pub id: Uuid,
}

/// One partition of the response, as the caller holds it.
pub trait SplicedPartition {
    /// What stands for the record bytes (a file range, say).
    type Records;

    /// The partition's topic, an index into the topics given to the encoder.
    fn topic_index(&self) -> usize;

    /// The partition's fields. When [`SplicedPartition::records`] is `Some`,
    /// `records` here must be null or empty and no tagged field may be set:
    /// the spliced bytes take the place of the records field, which the
    /// generated encoder writes just before the tagged fields.
    fn data(&self) -> &PartitionData;

    /// The records spliced into the frame, with their length in bytes.
    fn records(&self) -> Option<(&Self::Records, u32)>;
}

/// A piece of the frame: bytes to send, or a partition's records.
#[derive(Debug)]
pub enum FramePart<'p, R> {
    Bytes(Bytes),
    Records(&'p R),
}

/// Encodes a Fetch response frame (size prefix included) as parts, each
/// turned into the caller's chunk type by `part`, in the order to send.
///
/// `partitions` must be grouped by topic in topic order (their topic
/// indexes non-decreasing and below `topics.len()`); every topic is
/// written, with its run of partitions (maybe none).
///
/// # Panics
///
/// When `partitions` are not grouped so: the caller's bug, not bad input.
pub fn encode_spliced_fetch_response<'p, P: SplicedPartition, C>(
    header: &SplicedFetchHeader,
    topics: &[SplicedTopic<'_>],
    partitions: &'p [P],
    part: impl FnMut(FramePart<'p, P::Records>) -> C,
) -> EncodeResult<Vec<C>> {
    let version = header.version;
    if !FetchResponse::supports_version(version) {
        return Err(EncodeError::UnsupportedVersion { message: FetchResponse::NAME, version });
    }
    let flexible = FetchResponse::is_flexible(version);
    let spliced = partitions.iter().filter(|p| p.records().is_some()).count();
    let mut frame = FrameWriter::new(part, 2 * spliced + 1);
    let buf = &mut frame.buf;
    buf.put_i32(0); // the size, patched when the frame is complete
    ResponseHeader { correlation_id: header.correlation_id, ..Default::default() }
        .encode(buf, ApiKey::Fetch.info().response_header_version(version))?;
    buf.put_i32(header.throttle_time_ms);
    if version >= FIRST_SESSION_VERSION {
        buf.put_i16(header.error_code);
        buf.put_i32(header.session_id);
    }
    put_array_length(buf, Some(topics.len()), flexible)?;
    let mut rest = partitions;
    for (topic_index, topic) in topics.iter().enumerate() {
        if version >= FIRST_TOPIC_ID_VERSION {
            put_uuid(&mut frame.buf, &topic.id);
        } else {
            put_string(&mut frame.buf, topic.name, flexible)?;
        }
        let run = rest.iter().take_while(|p| p.topic_index() == topic_index).count();
        let (these, later) = rest.split_at(run);
        rest = later;
        put_array_length(&mut frame.buf, Some(run), flexible)?;
        for partition in these {
            frame.partition(partition, version, flexible)?;
        }
        if flexible {
            put_unsigned_varint(&mut frame.buf, 0); // the topic's tagged fields
        }
    }
    assert!(rest.is_empty(), "fetch response partitions not grouped by topic in topic order");
    if flexible {
        // The response's tagged fields: NodeEndpoints is tag 0 from v16.
        let mut tagged = Vec::new();
        if version >= FIRST_NODE_ENDPOINTS_VERSION && !header.node_endpoints.is_empty() {
            let mut data = BytesMut::new();
            put_array(&mut data, header.node_endpoints, true, |buf, item| item.encode_body(buf, version))?;
            tagged.push((0, data));
        }
        put_tagged_fields(&mut frame.buf, tagged, &[])?;
    }
    frame.finish()
}

/// Collects the parts, keeping the first one open until the frame's size is
/// known (it starts with the size prefix).
struct FrameWriter<'p, R, F, C> {
    part: F,
    records: PhantomData<fn(FramePart<'p, R>)>,
    parts: Vec<C>,
    buf: BytesMut,
    first: Option<BytesMut>,
    frame_bytes: u64,
}

impl<'p, R, C, F: FnMut(FramePart<'p, R>) -> C> FrameWriter<'p, R, F, C> {
    fn new(part: F, capacity: usize) -> Self {
        FrameWriter {
            part,
            records: PhantomData,
            parts: Vec::with_capacity(capacity),
            buf: BytesMut::with_capacity(FIRST_BUFFER_BYTES),
            first: None,
            frame_bytes: 0,
        }
    }

    /// Writes one partition's fields, and its records as their own part.
    fn partition<P: SplicedPartition<Records = R>>(
        &mut self,
        partition: &'p P,
        version: i16,
        flexible: bool,
    ) -> EncodeResult<()> {
        let data = partition.data();
        data.encode_body(&mut self.buf, version)?;
        let Some((records, length)) = partition.records() else { return Ok(()) };
        check_spliceable(data, version, flexible)?;
        // What the generated encoder wrote last: a null or empty records
        // field (compact: one varint byte; else an i32), then, when
        // flexible, a tagged-field count of 0.
        let tail = if flexible { 2 } else { 4 };
        self.buf.truncate(self.buf.len() - tail);
        let too_long = || EncodeError::TooLong { what: "spliced records", length: length as usize };
        if flexible {
            put_unsigned_varint(&mut self.buf, length.checked_add(1).ok_or_else(too_long)?);
        } else {
            self.buf.put_i32(i32::try_from(length).map_err(|_| too_long())?);
        }
        let head = self.buf.split();
        self.push_bytes(head);
        self.parts.push((self.part)(FramePart::Records(records)));
        self.frame_bytes += u64::from(length);
        if flexible {
            put_unsigned_varint(&mut self.buf, 0); // the partition's tagged fields
        }
        Ok(())
    }

    fn push_bytes(&mut self, bytes: BytesMut) {
        self.frame_bytes += bytes.len() as u64;
        if self.first.is_none() {
            self.first = Some(bytes);
            // Replaced by the first bytes, size and all, in `finish`.
            self.parts.push((self.part)(FramePart::Bytes(Bytes::new())));
        } else if !bytes.is_empty() {
            self.parts.push((self.part)(FramePart::Bytes(bytes.freeze())));
        }
    }

    fn finish(mut self) -> EncodeResult<Vec<C>> {
        let tail = self.buf.split();
        self.push_bytes(tail);
        let body_bytes = self.frame_bytes - SIZE_PREFIX_BYTES as u64;
        let size = i32::try_from(body_bytes)
            .map_err(|_| EncodeError::TooLong { what: "fetch response", length: body_bytes as usize })?;
        let mut first = self.first.take().expect("the size prefix was written first");
        first[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
        self.parts[0] = (self.part)(FramePart::Bytes(first.freeze()));
        Ok(self.parts)
    }
}

/// Refuses what the splice cannot represent: inline records beside spliced
/// ones, and tagged fields (written after the records field, so the splice
/// would have to find where they start).
fn check_spliceable(data: &PartitionData, version: i16, flexible: bool) -> EncodeResult<()> {
    let refused = |field| Err(EncodeError::FieldNotSupported { message: FetchResponse::NAME, field, version });
    if data.records.as_ref().is_some_and(|r| !r.is_empty()) {
        return refused("Records (both inline and spliced)");
    }
    let tagged = data.diverging_epoch != EpochEndOffset::default()
        || data.current_leader != LeaderIdAndEpoch::default()
        || data.snapshot_id != SnapshotId::default()
        || !data.unknown_tagged_fields.is_empty();
    if flexible && tagged {
        return refused("tagged fields beside spliced records");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch_response::{AbortedTransaction, FetchableTopicResponse};
    use crate::testing::Rng;

    /// A partition whose spliced records are bytes in memory.
    struct TestPartition {
        topic_index: usize,
        data: PartitionData,
        records: Option<Bytes>,
    }

    impl SplicedPartition for TestPartition {
        type Records = Bytes;
        fn topic_index(&self) -> usize {
            self.topic_index
        }
        fn data(&self) -> &PartitionData {
            &self.data
        }
        fn records(&self) -> Option<(&Bytes, u32)> {
            self.records.as_ref().map(|r| (r, r.len() as u32))
        }
    }

    /// The spliced frame with the records read in, and how many parts it had.
    fn spliced(
        header: &SplicedFetchHeader,
        topics: &[SplicedTopic<'_>],
        partitions: &[TestPartition],
    ) -> (Vec<u8>, usize) {
        let parts = encode_spliced_fetch_response(header, topics, partitions, |part| match part {
            FramePart::Bytes(bytes) => bytes,
            FramePart::Records(records) => records.clone(),
        })
        .expect("encodes");
        (parts.concat(), parts.len())
    }

    /// What the generated encoder writes with the records inline.
    fn generated(header: &SplicedFetchHeader, topics: &[SplicedTopic<'_>], partitions: &[TestPartition]) -> Vec<u8> {
        let version = header.version;
        let body = FetchResponse {
            throttle_time_ms: header.throttle_time_ms,
            error_code: if version >= 7 { header.error_code } else { 0 },
            session_id: if version >= 7 { header.session_id } else { 0 },
            responses: topics
                .iter()
                .enumerate()
                .map(|(t, topic)| FetchableTopicResponse {
                    topic: if version < 13 { topic.name.to_string() } else { String::new() },
                    topic_id: if version >= 13 { topic.id } else { Uuid::ZERO },
                    partitions: partitions
                        .iter()
                        .filter(|p| p.topic_index == t)
                        .map(|p| PartitionData {
                            records: p.records.clone().or_else(|| p.data.records.clone()),
                            ..p.data.clone()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            node_endpoints: if version >= 16 { header.node_endpoints.to_vec() } else { Vec::new() },
            ..Default::default()
        };
        let mut expected = BytesMut::new();
        crate::frame::encode_response(&mut expected, ApiKey::Fetch, version, header.correlation_id, &body)
            .expect("encodes");
        expected.to_vec()
    }

    fn records_of(length: usize) -> Bytes {
        (0..length).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
    }

    #[test]
    fn spliced_frame_matches_the_generated_encoder_for_every_version() {
        let topics =
            [SplicedTopic { name: "alpha", id: Uuid([1; 16]) }, SplicedTopic { name: "beta", id: Uuid([2; 16]) }];
        for version in FetchResponse::MIN_VERSION..=FetchResponse::MAX_VERSION {
            let leaders = [NodeEndpoint {
                node_id: 2,
                host: "b2".into(),
                port: 9092,
                rack: Some("r".into()),
                ..Default::default()
            }];
            let header = SplicedFetchHeader {
                version,
                correlation_id: 77,
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 9,
                node_endpoints: &leaders,
            };
            let partitions = vec![
                TestPartition {
                    topic_index: 0,
                    data: PartitionData {
                        partition_index: 0,
                        high_watermark: 10,
                        last_stable_offset: 10,
                        records: Some(Bytes::new()),
                        ..Default::default()
                    },
                    records: Some(records_of(100)),
                },
                TestPartition {
                    topic_index: 0,
                    data: PartitionData {
                        partition_index: 1,
                        aborted_transactions: Some(vec![AbortedTransaction {
                            producer_id: 4,
                            first_offset: 2,
                            ..Default::default()
                        }]),
                        ..Default::default()
                    },
                    records: Some(records_of(150)),
                },
                TestPartition {
                    topic_index: 1,
                    data: PartitionData {
                        partition_index: 3,
                        error_code: 1,
                        high_watermark: 7,
                        records: Some(Bytes::new()),
                        ..Default::default()
                    },
                    records: None,
                },
            ];
            let (ours, parts) = spliced(&header, &topics, &partitions);
            assert_eq!(ours, generated(&header, &topics, &partitions), "fetch v{version}");
            // Head, records, head, records, tail: the records are never copied.
            assert_eq!(parts, 5, "fetch v{version}");
        }
    }

    #[test]
    fn frames_without_spliced_records_are_one_part() {
        for version in FetchResponse::MIN_VERSION..=FetchResponse::MAX_VERSION {
            let header = SplicedFetchHeader { version, correlation_id: 3, error_code: 70, ..Default::default() };
            let (ours, parts) = spliced(&header, &[], &[]);
            assert_eq!(ours, generated(&header, &[], &[]), "fetch v{version}");
            assert_eq!(parts, 1);
        }
    }

    /// Random partition fields (tagged fields and inline records included
    /// where nothing is spliced), random splices, and topics left empty.
    #[test]
    fn random_spliced_frames_match_the_generated_encoder() {
        let mut rng = Rng::new(15);
        for round in 0..400 {
            let version = FetchResponse::MIN_VERSION + (round % 15) as i16;
            let names: Vec<String> = (0..1 + rng.below(3)).map(|i| format!("{i}{}", rng.string())).collect();
            let topics: Vec<SplicedTopic<'_>> =
                names.iter().map(|name| SplicedTopic { name: name.as_str(), id: rng.uuid() }).collect();
            let mut partitions: Vec<TestPartition> = (0..rng.below(6))
                .map(|_| {
                    let mut data = PartitionData::random(&mut rng, version);
                    let records = rng.bool().then(|| records_of(rng.below(300) as usize));
                    if records.is_some() {
                        data.records = if rng.bool() { None } else { Some(Bytes::new()) };
                        data.diverging_epoch = EpochEndOffset::default();
                        data.current_leader = LeaderIdAndEpoch::default();
                        data.snapshot_id = SnapshotId::default();
                        data.unknown_tagged_fields.clear();
                    }
                    TestPartition { topic_index: rng.below(topics.len() as u64) as usize, data, records }
                })
                .collect();
            partitions.sort_by_key(|p| p.topic_index);
            let header = SplicedFetchHeader {
                version,
                correlation_id: rng.next_u64() as i32,
                throttle_time_ms: rng.next_u64() as i32,
                error_code: rng.next_u64() as i16,
                session_id: rng.next_u64() as i32,
                node_endpoints: &[],
            };
            let (ours, _) = spliced(&header, &topics, &partitions);
            assert_eq!(ours, generated(&header, &topics, &partitions), "round {round}, fetch v{version}");
        }
    }

    #[test]
    fn what_cannot_be_spliced_is_refused() {
        let topics = [SplicedTopic { name: "t", id: Uuid([1; 16]) }];
        let header = SplicedFetchHeader { version: 12, ..Default::default() };
        let with = |data: PartitionData| [TestPartition { topic_index: 0, data, records: Some(records_of(5)) }];
        let encode = |partitions: &[TestPartition]| {
            encode_spliced_fetch_response(&header, &topics, partitions, |_| ()).map(|_| ())
        };
        assert!(encode(&with(PartitionData { records: Some(records_of(1)), ..Default::default() })).is_err());
        let leader = LeaderIdAndEpoch { leader_id: 1, leader_epoch: 2, ..Default::default() };
        assert!(encode(&with(PartitionData { current_leader: leader, ..Default::default() })).is_err());
        assert!(encode(&with(PartitionData::default())).is_ok());
        let old = SplicedFetchHeader { version: 3, ..header };
        assert!(encode_spliced_fetch_response(&old, &topics, &[] as &[TestPartition], |_| ()).is_err());
    }

    #[test]
    #[should_panic(expected = "not grouped by topic")]
    fn partitions_out_of_topic_order_are_a_bug() {
        let topics = [SplicedTopic { name: "a", id: Uuid([1; 16]) }, SplicedTopic { name: "b", id: Uuid([2; 16]) }];
        let partition = |topic_index| TestPartition { topic_index, data: PartitionData::default(), records: None };
        let header = SplicedFetchHeader { version: 12, ..Default::default() };
        let _ = encode_spliced_fetch_response(&header, &topics, &[partition(1), partition(0)], |_| ());
    }
}
