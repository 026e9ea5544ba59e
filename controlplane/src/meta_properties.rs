//! `<data_dir>/meta.properties` (Kafka's format): the cluster id, generated once when the
//! data directory is first used, and the node id the directory belongs to.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;

pub const META_PROPERTIES_FILE: &str = "meta.properties";

#[derive(Debug, thiserror::Error)]
pub enum MetaPropertiesError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("{path}: stored node.id {stored} does not match the configured node id {configured}")]
    NodeIdMismatch {
        path: PathBuf,
        stored: i32,
        configured: i32,
    },
}

/// Kafka's form of a uuid: the 16 bytes in URL-safe base64 without padding (22 chars).
pub fn uuid_to_kafka_base64(id: uuid::Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// A new random cluster id. Like Kafka's `Uuid.randomUuid()` it never starts with `-`
/// (command-line tools would take it for an option) and is never the zero uuid.
pub fn new_cluster_id(mut random: impl FnMut() -> uuid::Uuid) -> String {
    loop {
        let id = random();
        let s = uuid_to_kafka_base64(id);
        if !id.is_nil() && !s.starts_with('-') {
            return s;
        }
    }
}

/// Reads the cluster id from `<data_dir>/meta.properties`, or creates the file with a
/// new random cluster id. Fails when the file names another node id.
pub fn load_or_create_cluster_id(
    data_dir: &Path,
    node_id: i32,
) -> Result<String, MetaPropertiesError> {
    let path = data_dir.join(META_PROPERTIES_FILE);
    let io = |source| MetaPropertiesError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&path, &text, node_id),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let cluster_id = new_cluster_id(uuid::Uuid::new_v4);
            write_meta(data_dir, &cluster_id, node_id)?;
            tracing::info!(%cluster_id, path = %path.display(), "formatted data directory with a new cluster id");
            Ok(cluster_id)
        }
        Err(e) => Err(io(e)),
    }
}

/// Writes `meta.properties` durably: a temporary file, fsync, rename, fsync the directory,
/// so the file is either absent or complete after a crash.
fn write_meta(data_dir: &Path, cluster_id: &str, node_id: i32) -> Result<(), MetaPropertiesError> {
    let path = data_dir.join(META_PROPERTIES_FILE);
    let io = |source| MetaPropertiesError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(data_dir).map_err(io)?;
    // Kafka's directory.id: this log directory's own uuid (KIP-858), which a dynamic
    // quorum names its voters by.
    let directory_id = new_cluster_id(uuid::Uuid::new_v4);
    let text = format!(
        "version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={directory_id}\n"
    );
    let tmp = data_dir.join(format!("{META_PROPERTIES_FILE}.tmp"));
    let tmp_io = |source| MetaPropertiesError::Io {
        path: tmp.clone(),
        source,
    };
    let mut f = std::fs::File::create(&tmp).map_err(tmp_io)?;
    f.write_all(text.as_bytes()).map_err(tmp_io)?;
    f.sync_all().map_err(tmp_io)?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(io)?;
    std::fs::File::open(data_dir)
        .and_then(|d| d.sync_all())
        .map_err(io)
}

/// The `directory.id` of `<data_dir>/meta.properties`, if it has one (directories
/// formatted before it was written have none: the zero uuid stands for them).
pub fn directory_id(data_dir: &Path) -> Option<uuid::Uuid> {
    let text = std::fs::read_to_string(data_dir.join(META_PROPERTIES_FILE)).ok()?;
    let value = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "directory.id")?
        .1
        .trim()
        .to_string();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// What [`format`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Formatted {
    /// `meta.properties` was written with this cluster id.
    Now(String),
    /// The directory already had one (`--ignore-formatted`): its cluster id.
    Already(String),
}

/// Kafka's cluster-id check (`Uuid.fromString`): 22 characters of URL-safe base64 for 16
/// bytes, not the zero uuid.
pub fn check_cluster_id(id: &str) -> Result<(), String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id)
        .map_err(|_| {
            format!("cluster id {id:?} is not a base64-encoded uuid (see `twinlog random-uuid`)")
        })?;
    if bytes.len() != 16 {
        return Err(format!(
            "cluster id {id:?} is not 16 bytes of base64 (see `twinlog random-uuid`)"
        ));
    }
    if bytes.iter().all(|b| *b == 0) {
        return Err("the cluster id may not be the zero uuid".into());
    }
    Ok(())
}

/// `twinlog format` (Kafka's `kafka-storage format`): writes `meta.properties` with
/// `cluster_id` and `node_id` into `data_dir`. A directory that already has one is an
/// error, or with `ignore_formatted` left as it is (Kafka's `--ignore-formatted`).
pub fn format(
    data_dir: &Path,
    cluster_id: &str,
    node_id: i32,
    ignore_formatted: bool,
) -> Result<Formatted, MetaPropertiesError> {
    let path = data_dir.join(META_PROPERTIES_FILE);
    let invalid = |reason: String| MetaPropertiesError::Invalid {
        path: path.clone(),
        reason,
    };
    check_cluster_id(cluster_id).map_err(invalid)?;
    if node_id < 0 {
        return Err(invalid(format!(
            "node.id must not be negative, got {node_id}"
        )));
    }
    match std::fs::read_to_string(&path) {
        Ok(text) if ignore_formatted => Ok(Formatted::Already(parse(&path, &text, node_id)?)),
        Ok(_) => Err(invalid(
            "the log directory is already formatted; use --ignore-formatted to leave it as it is"
                .into(),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_meta(data_dir, cluster_id, node_id)?;
            Ok(Formatted::Now(cluster_id.to_string()))
        }
        Err(source) => Err(MetaPropertiesError::Io { path, source }),
    }
}

fn parse(path: &Path, text: &str, node_id: i32) -> Result<String, MetaPropertiesError> {
    let invalid = |reason: String| MetaPropertiesError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let mut cluster_id = None;
    let mut stored_node = None;
    let mut version = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(invalid(format!("line without `=`: {line:?}")));
        };
        match k.trim() {
            "cluster.id" => cluster_id = Some(v.trim().to_string()),
            "node.id" => {
                let n = v
                    .trim()
                    .parse::<i32>()
                    .map_err(|_| invalid(format!("node.id is not an integer: {v:?}")))?;
                stored_node = Some(n);
            }
            "version" => version = Some(v.trim().to_string()),
            _ => {}
        }
    }
    match version.as_deref() {
        Some("1") => {}
        other => {
            return Err(invalid(format!(
                "unsupported version {other:?} (expected 1)"
            )))
        }
    }
    let cluster_id = cluster_id
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid("no cluster.id".to_string()))?;
    if let Some(stored) = stored_node {
        if stored != node_id {
            return Err(MetaPropertiesError::NodeIdMismatch {
                path: path.to_path_buf(),
                stored,
                configured: node_id,
            });
        }
    }
    Ok(cluster_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_is_kafka_form_and_stable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = load_or_create_cluster_id(dir.path(), 0).expect("create");
        assert_eq!(id.len(), 22);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let text = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).expect("read");
        let directory = directory_id(dir.path()).expect("a directory id");
        assert_eq!(
            text,
            format!(
                "version=1\ncluster.id={id}\nnode.id=0\ndirectory.id={}\n",
                uuid_to_kafka_base64(directory)
            )
        );
        assert_eq!(
            load_or_create_cluster_id(dir.path(), 0).expect("read back"),
            id
        );
        assert!(matches!(
            load_or_create_cluster_id(dir.path(), 1),
            Err(MetaPropertiesError::NodeIdMismatch {
                stored: 0,
                configured: 1,
                ..
            })
        ));
    }

    #[test]
    fn format_writes_once_and_checks_the_cluster_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = new_cluster_id(uuid::Uuid::new_v4);
        assert_eq!(
            format(dir.path(), &id, 3, false).expect("format"),
            Formatted::Now(id.clone())
        );
        assert_eq!(load_or_create_cluster_id(dir.path(), 3).expect("read"), id);
        assert!(matches!(
            format(dir.path(), &id, 3, false),
            Err(MetaPropertiesError::Invalid { .. })
        ));
        assert_eq!(
            format(dir.path(), &id, 3, true).expect("ignored"),
            Formatted::Already(id.clone())
        );
        let fresh = tempfile::tempdir().expect("tempdir");
        for bad in ["x", "AAAAAAAAAAAAAAAAAAAAAA", ""] {
            assert!(format(fresh.path(), bad, 0, false).is_err(), "{bad:?}");
        }
        assert!(format(fresh.path(), &id, -1, false).is_err());
        assert!(!fresh.path().join(META_PROPERTIES_FILE).exists());
    }

    #[test]
    fn each_formatted_directory_has_its_own_directory_id() {
        let (a, b) = (
            tempfile::tempdir().expect("tempdir"),
            tempfile::tempdir().expect("tempdir"),
        );
        assert_eq!(directory_id(a.path()), None, "not formatted");
        for d in [&a, &b] {
            format(d.path(), "MkU3OEVBNTcwNTJENDM2Qg", 1, false).expect("format");
        }
        let (ia, ib) = (directory_id(a.path()), directory_id(b.path()));
        assert!(ia.is_some_and(|i| !i.is_nil()), "{ia:?}");
        assert_ne!(ia, ib);
        // Still read by the cluster-id check.
        assert_eq!(
            load_or_create_cluster_id(a.path(), 1).expect("load"),
            "MkU3OEVBNTcwNTJENDM2Qg"
        );
    }

    #[test]
    fn cluster_id_never_starts_with_dash() {
        // 0xf8.. encodes to a leading '-' in URL-safe base64.
        let mut ids = vec![
            uuid::Uuid::from_u128(7),
            uuid::Uuid::from_u128(0xf800 << 112),
            uuid::Uuid::nil(),
        ];
        let id = new_cluster_id(|| ids.pop().expect("ids"));
        assert_eq!(id, uuid_to_kafka_base64(uuid::Uuid::from_u128(7)));
    }

    #[test]
    fn reads_kafka_written_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(META_PROPERTIES_FILE),
            "#\n#Thu Jan 01 00:00:00 UTC 2025\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\ndirectory.id=abc\nnode.id=0\nversion=1\n",
        )
        .expect("write");
        assert_eq!(
            load_or_create_cluster_id(dir.path(), 0).expect("read"),
            "MkU3OEVBNTcwNTJENDM2Qk"
        );
    }
}
