//! What every listener writes on the wire, whoever serves it: response
//! frames, the API version ranges an ApiVersions answer lists, and the
//! APIs a broker forwards to the controller. The client listener's
//! handlers and the controller listener share it, and it knows nothing of
//! either.

use bytes::{BufMut, BytesMut};
use krabka_protocol::api_versions_response::ApiVersion;
use krabka_protocol::{ApiKey, ApiVersionsResponse, Message, ResponseBody, ResponseHeader};

/// The client requests only the active controller decides: a node that
/// is not the active controller forwards them to it in an Envelope, as
/// Kafka's brokers forward them (Kafka's `forwardable` APIs krabka
/// serves), and the controller listener serves them too (a Kafka broker
/// forwards only what its controller lists, and sends its own topic
/// creations there unwrapped).
pub const FORWARDED_APIS: [ApiKey; 14] = [
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeQuorum,
    ApiKey::UpdateFeatures,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::AlterUserScramCredentials,
    ApiKey::AlterClientQuotas,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
];

/// DescribeCluster's endpoint types (KIP-919): a broker listener lists the
/// brokers, a controller listener the controllers.
pub const ENDPOINT_BROKERS: i8 = 1;
pub const ENDPOINT_CONTROLLERS: i8 = 2;

/// size | response header | body, with the header version the API uses.
pub fn encode_frame(api_key: ApiKey, api_version: i16, correlation_id: i32, body: &ResponseBody) -> BytesMut {
    let mut buf = BytesMut::with_capacity(128);
    buf.put_i32(0);
    let header_version = api_key.info().response_header_version(api_version);
    let header = ResponseHeader { correlation_id, ..Default::default() };
    let encoded = header.encode(&mut buf, header_version).and_then(|_| body.encode(&mut buf, api_version));
    // Handlers only set fields their version has: a failure is a bug, and the
    // client is better served by a closed connection than a wrong frame.
    assert!(encoded.is_ok(), "{api_key:?} v{api_version} response does not encode: {encoded:?}");
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf
}

/// The versions of `key` krabka serves: Kafka 4.3.1's, without a latest
/// version Kafka marks unstable.
pub fn served_range(key: ApiKey) -> (ApiKey, i16, i16) {
    let info = key.info();
    let max = if info.latest_version_unstable { info.max_version - 1 } else { info.max_version };
    (key, info.min_version, max)
}

/// The feature ranges this node supports, as an ApiVersions response at
/// `version` lists them (v3 and later carry them). Below v4 a range
/// starting at 0 is left out, as Kafka leaves it out (KAFKA-17492): older
/// clients cannot read one.
pub fn supported_feature_keys(version: i16) -> Vec<krabka_protocol::api_versions_response::SupportedFeatureKey> {
    krabka_metadata::features::SUPPORTED_FEATURES
        .iter()
        .filter(|f| version >= 4 || f.min > 0)
        .map(|f| krabka_protocol::api_versions_response::SupportedFeatureKey {
            name: f.name.into(),
            min_version: f.min,
            max_version: f.max,
            ..Default::default()
        })
        .collect()
}

/// An ApiVersions response listing `apis` (key, min, max): the broker's, or
/// another listener's (the controller listener serves raft's).
pub fn api_versions_response(apis: &[(ApiKey, i16, i16)], error_code: i16) -> ApiVersionsResponse {
    let api_keys = apis
        .iter()
        .copied()
        .map(|(key, min, max)| ApiVersion {
            api_key: key as i16,
            min_version: min,
            max_version: max,
            ..Default::default()
        })
        .collect();
    ApiVersionsResponse { error_code, api_keys, ..Default::default() }
}
