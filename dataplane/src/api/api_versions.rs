//! ApiVersions (18). The v3 encoder of kafka-protocol omits default-valued tagged fields,
//! which Debian's librdkafka 2.0.2 (kcat) needs: keep SupportedFeatures empty and
//! FinalizedFeaturesEpoch at its default.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::ResponseError;

use crate::api::SUPPORTED;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(k, min, max)| {
            ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect()
}

pub fn handle(_version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// The v0 answer to an ApiVersions request of a version we do not serve.
pub fn unsupported_version_response() -> kafka_protocol::messages::ResponseKind {
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(api_keys()),
    )
}
