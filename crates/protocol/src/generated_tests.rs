//! Tests over every generated message and every version it declares:
//! round trips of random values, and decoders that fail cleanly on truncated
//! or random input.

use bytes::{Bytes, BytesMut};

use crate::generated::for_each_message;
use crate::message::Message;
use crate::testing::Rng;

const CASES_PER_VERSION: u64 = 24;

/// decode(encode(m)) == m and encode(decode(bytes)) == bytes, for random `m`:
/// proptest draws the seeds, each generated message is valid at its version.
fn round_trip<T: Message>(random: fn(&mut Rng, i16) -> T) {
    use proptest::test_runner::{Config, TestRunner};
    for version in T::MIN_VERSION..=T::MAX_VERSION {
        let mut runner = TestRunner::new(Config { cases: CASES_PER_VERSION as u32, ..Config::default() });
        let outcome = runner.run(&proptest::prelude::any::<u64>(), |seed| {
            round_trip_one(random, version, seed);
            Ok(())
        });
        outcome.unwrap_or_else(|e| panic!("{} v{version}: {e}", T::NAME));
    }
}

fn round_trip_one<T: Message>(random: fn(&mut Rng, i16) -> T, version: i16, seed: u64) {
    let mut rng = Rng::new(seed);
    let message = random(&mut rng, version);
    let mut buf = BytesMut::new();
    message
        .encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("{} v{version} seed {seed}: encode failed: {e}", T::NAME));
    let encoded = buf.freeze();
    let mut input = encoded.clone();
    let decoded = T::decode(&mut input, version)
        .unwrap_or_else(|e| panic!("{} v{version} seed {seed}: decode failed: {e}", T::NAME));
    assert!(input.is_empty(), "{} v{version}: {} bytes left after decode", T::NAME, input.len());
    assert_eq!(decoded, message, "{} v{version} seed {seed}", T::NAME);
    let mut again = BytesMut::new();
    decoded.encode(&mut again, version).unwrap();
    assert_eq!(&again[..], &encoded[..], "{} v{version} seed {seed}: re-encoding differs", T::NAME);
}

/// Every strict prefix of a valid encoding is an error, never a panic or a
/// success: each decoder checks lengths before it reads.
fn truncations_fail<T: Message>(random: fn(&mut Rng, i16) -> T) {
    for version in T::MIN_VERSION..=T::MAX_VERSION {
        let mut rng = Rng::new(7 + version as u64);
        let encoded = random(&mut rng, version).to_bytes(version).unwrap();
        for cut in 0..encoded.len() {
            let mut prefix = encoded.slice(..cut);
            assert!(T::decode(&mut prefix, version).is_err(), "{} v{version}: a {cut}-byte prefix decoded", T::NAME);
        }
    }
}

/// Random bytes never panic a decoder.
fn random_bytes_never_panic<T: Message>(_: fn(&mut Rng, i16) -> T) {
    let mut rng = Rng::new(99);
    for version in T::MIN_VERSION..=T::MAX_VERSION {
        for _ in 0..16 {
            let length = rng.below(64) as usize;
            let data: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
            let _ = T::decode(&mut Bytes::from(data), version);
        }
    }
}

#[test]
fn every_message_round_trips_at_every_version() {
    for_each_message!(round_trip);
}

#[test]
fn every_truncated_message_fails_to_decode() {
    for_each_message!(truncations_fail);
}

#[test]
fn random_bytes_never_panic_any_decoder() {
    for_each_message!(random_bytes_never_panic);
}

#[test]
fn versions_outside_the_spec_are_refused() {
    use crate::ProduceRequest;
    let too_new = ProduceRequest::MAX_VERSION + 1;
    assert!(ProduceRequest::decode(&mut Bytes::new(), too_new).is_err());
    assert!(ProduceRequest::default().to_bytes(too_new).is_err());
}

/// The independent oracle: the `kafka-protocol` crate, generated separately
/// from Kafka's specs. For every version both know, our encoding of a random
/// message must decode there and re-encode to the very same bytes.
mod oracle {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::protocol::{Decodable, Encodable, Message as TheirMessage};

    use crate::generated::for_each_api_message;
    use crate::message::Message;
    use crate::testing::Rng;

    pub(super) fn agree<Ours: Message, Theirs: Decodable + Encodable + TheirMessage>(
        random: fn(&mut Rng, i16) -> Ours,
    ) -> usize {
        let low = Ours::MIN_VERSION.max(Theirs::VERSIONS.min);
        let high = Ours::MAX_VERSION.min(Theirs::VERSIONS.max);
        let mut compared = 0;
        for version in low..=high {
            for seed in 0..super::CASES_PER_VERSION {
                let mut rng = Rng::new(seed.wrapping_mul(31) ^ ((version as u64) << 40));
                let ours: Bytes = random(&mut rng, version).to_bytes(version).unwrap();
                let theirs = Theirs::decode(&mut ours.clone(), version)
                    .unwrap_or_else(|e| panic!("{} v{version}: kafka-protocol cannot decode ours: {e}", Ours::NAME));
                let mut again = BytesMut::new();
                theirs.encode(&mut again, version).unwrap();
                assert_eq!(&again[..], &ours[..], "{} v{version} seed {seed}: encodings differ", Ours::NAME);
                compared += 1;
            }
        }
        compared
    }

    #[test]
    fn every_shared_message_encodes_identically() {
        let mut compared = 0;
        let mut types = 0;
        macro_rules! check {
            // KIP-1071 streams groups are newer than kafka-protocol 0.18.
            (streams_group_describe_request, $name:ident) => {};
            (streams_group_describe_response, $name:ident) => {};
            (streams_group_heartbeat_request, $name:ident) => {};
            (streams_group_heartbeat_response, $name:ident) => {};
            ($module:ident, $name:ident) => {
                compared += agree::<crate::generated::$name, kafka_protocol::messages::$module::$name>(
                    crate::generated::$name::random,
                );
                types += 1;
            };
        }
        for_each_api_message!(check);
        // Both crates cover about 88 APIs (request and response) and the two headers.
        assert!(types >= 170, "only {types} message types compared");
        assert!(compared > 10_000, "only {compared} encodings compared");
    }
}

/// `ResponseBody::for_each_error` names each non-zero error with the topic
/// and partition around it, and nothing else.
#[test]
fn response_errors_are_found_with_their_topic_and_partition() {
    use crate::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use crate::{ProduceResponse, ResponseBody, ResponseError};
    let partition = |index, error_code| PartitionProduceResponse { index, error_code, ..Default::default() };
    let topic = TopicProduceResponse {
        name: "orders".into(),
        partition_responses: vec![partition(0, 0), partition(1, 6), partition(2, 0)],
        ..Default::default()
    };
    let response = ResponseBody::Produce(Box::new(ProduceResponse { responses: vec![topic], ..Default::default() }));
    let mut seen = Vec::new();
    response.for_each_error(&mut |e: ResponseError<'_>| seen.push((e.topic.map(String::from), e.partition, e.code)));
    assert_eq!(seen, vec![(Some("orders".to_string()), Some(1), 6)]);
    let ok = ResponseBody::Produce(Box::default());
    ok.for_each_error(&mut |e| panic!("no error expected: {e:?}"));
}
