//! ApiVersions: the APIs and version ranges this broker serves.

use krabka_protocol::api_versions_response::ApiVersion;
use krabka_protocol::ApiVersionsResponse;

use super::supported_apis;

pub fn response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = supported_apis()
        .into_iter()
        .map(|(key, min, max)| ApiVersion {
            api_key: key as i16,
            min_version: min,
            max_version: max,
            ..Default::default()
        })
        .collect();
    ApiVersionsResponse { error_code, api_keys, ..Default::default() }
}
