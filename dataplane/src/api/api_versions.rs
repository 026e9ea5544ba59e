//! ApiVersions (18). The v3 encoder of kafka-protocol omits default-valued tagged fields,
//! which Debian's librdkafka 2.0.2 (kcat) needs: keep SupportedFeatures empty and
//! FinalizedFeaturesEpoch at its default. The mirror keys (94-104, v0 only) follow the
//! Kafka keys.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::ResponseError;

use crate::api::SUPPORTED;
use crate::wire::mirror::keys as mirror_keys;

fn api_keys() -> Vec<ApiVersion> {
    let kafka = SUPPORTED
        .iter()
        .map(|(k, min, max)| (*k as i16, *min, *max));
    let mirror = mirror_keys::ALL.iter().map(|k| (*k, 0, 0));
    kafka
        .chain(mirror)
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

pub fn handle(_version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// The v0 answer to an ApiVersions request of a version we do not serve: as Kafka does
/// (KIP-511), UNSUPPORTED_VERSION with only ApiVersions' own range, so that the client
/// retries with a version from it.
pub fn unsupported_version_response() -> kafka_protocol::messages::ResponseKind {
    let own = api_keys()
        .into_iter()
        .filter(|v| v.api_key == kafka_protocol::messages::ApiKey::ApiVersions as i16)
        .collect();
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(own),
    )
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::protocol::{Decodable, Encodable};

    use super::*;

    fn versions(response: &ApiVersionsResponse, key: i16) -> Option<(i16, i16)> {
        response
            .api_keys
            .iter()
            .find(|v| v.api_key == key)
            .map(|v| (v.min_version, v.max_version))
    }

    #[test]
    fn mirror_keys_are_advertised_at_v0() {
        let response = handle(3);
        assert_eq!(versions(&response, 94), Some((0, 0)));
        for key in [94, 95, 96, 98, 99, 100, 101, 102, 103, 104] {
            assert_eq!(versions(&response, key), Some((0, 0)), "key {key}");
        }
        assert_eq!(versions(&response, 97), None);
        assert_eq!(versions(&response, 18), Some((0, 3)));
    }

    #[test]
    fn mirror_keys_survive_encoding() {
        for version in [0, 3] {
            let mut buf = BytesMut::new();
            handle(version)
                .encode(&mut buf, version)
                .expect("ApiVersions encodes");
            let decoded = ApiVersionsResponse::decode(&mut buf.freeze(), version).expect("decodes");
            assert_eq!(versions(&decoded, 94), Some((0, 0)), "v{version}");
            assert_eq!(versions(&decoded, 104), Some((0, 0)), "v{version}");
        }
        let kafka_protocol::messages::ResponseKind::ApiVersions(r) = unsupported_version_response()
        else {
            panic!("an ApiVersions response");
        };
        assert_eq!(r.api_keys.len(), 1, "only ApiVersions' own range");
        assert_eq!(versions(&r, 18), Some((0, 3)));
    }
}
