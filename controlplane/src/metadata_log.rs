//! The metadata log: an append-only file of the records the controller commits,
//! `<data_dir>/__cluster_metadata/metadata.log`.
//!
//! Each record is one frame, `[u32 length][u32 crc32c][payload]` (big endian, the CRC
//! covers the payload). Records are appended in batches (one admin request = one batch)
//! with a single write and an fsync; the last record of a batch carries an end-of-batch
//! flag so that a crash in the middle of a batch never leaves half of a change behind:
//! replay keeps only whole batches. At the first torn or corrupt frame (or an unfinished
//! batch at the end) replay stops, the file is truncated there and a warning is logged.
//!
//! The payload format is ours (nothing outside Twinlog reads it):
//! `[u8 kind][u8 version = 0][u8 flags][fields]`, strings as `u16` length + UTF-8,
//! integers big endian, uuids as 16 bytes.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Directory of the metadata log inside the data directory.
pub const METADATA_DIR: &str = "__cluster_metadata";
/// File name of the metadata log.
pub const METADATA_LOG_FILE: &str = "metadata.log";
/// The largest payload a frame may carry; a larger length is treated as corruption.
pub const RECORD_BYTES_MAX: usize = 1 << 20;

const FRAME_HEADER_BYTES: usize = 8;
const RECORD_VERSION: u8 = 0;
const FLAG_END_OF_BATCH: u8 = 1;

const KIND_TOPIC: u8 = 1;
const KIND_PARTITION: u8 = 2;
const KIND_CONFIG: u8 = 3;
const KIND_REMOVE_TOPIC: u8 = 4;
const KIND_PRODUCER_IDS: u8 = 5;
const KIND_REGISTER_BROKER: u8 = 6;
const KIND_PARTITION_REPLICAS: u8 = 7;
const KIND_BROKER: u8 = 8;
const KIND_ALTER_PARTITION: u8 = 9;
const KIND_FENCE_BROKER: u8 = 10;
const KIND_UNFENCE_BROKER: u8 = 11;
const KIND_CONTROLLED_SHUTDOWN: u8 = 12;
const KIND_GUARD: u8 = 13;
const KIND_CLUSTER_ID: u8 = 14;
const KIND_VOTER_ENDPOINT: u8 = 15;
/// KIND_BROKER with the broker's named listeners after it.
const KIND_BROKER_LISTENERS: u8 = 16;
const KIND_SCRAM_CREDENTIAL: u8 = 17;
const KIND_ACL: u8 = 18;
/// An ACL made by a mirror's ACL sync: an ACL record plus the mirror and held flag.
const KIND_MIRRORED_ACL: u8 = 19;
/// Most listeners a broker registration may name.
const LISTENERS_MAX: usize = 64;
/// Longest replica list a partition record may carry.
const REPLICAS_MAX: usize = 1024;

/// Kafka's config resource types (`ConfigResource.Type`) as stored in a
/// [`MetadataRecord::Config`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigResourceType {
    Topic,
    Broker,
    /// Twinlog's mirror resources (not a Kafka type).
    Mirror,
}

impl ConfigResourceType {
    pub fn code(self) -> u8 {
        match self {
            ConfigResourceType::Topic => 2,
            ConfigResourceType::Broker => 4,
            ConfigResourceType::Mirror => 64,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            2 => Some(ConfigResourceType::Topic),
            4 => Some(ConfigResourceType::Broker),
            64 => Some(ConfigResourceType::Mirror),
            _ => None,
        }
    }
}

/// One committed change to the cluster's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A topic was created.
    Topic { name: String, id: uuid::Uuid },
    /// A partition was created or changed (leader, epochs, replicas, ISR).
    Partition(PartitionRecord),
    /// Kafka's AlterPartition, as a conditional record: the ISR of a partition whose
    /// leader epoch and partition epoch are still these becomes `isr` (and the partition
    /// epoch moves); against any other epochs it changes nothing. Every node applies it
    /// the same way, so the check needs no answer: the leader that asked sees the result
    /// in the next image, or asks again.
    AlterPartition {
        topic_id: uuid::Uuid,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// The controller fenced a broker (no heartbeat within `broker.session.timeout.ms`):
    /// it leads nothing and is in no ISR until it is unfenced.
    FenceBroker { node_id: i32 },
    /// A fenced broker is heard from again.
    UnfenceBroker { node_id: i32 },
    /// A broker asked to shut down: its leaderships move away before it exits.
    ControlledShutdown { node_id: i32 },
    /// The next `records` records apply only if the metadata has applied exactly
    /// `expected_applied` records when this one is reached (nothing committed since the
    /// change was planned); otherwise they are skipped. How a controller that does not
    /// lead forwards a planned change through the quorum (KIP-590's forwarding): `nonce`
    /// tells it whether its change took.
    Guard {
        nonce: u64,
        expected_applied: u64,
        records: u32,
    },
    /// The cluster's id, committed once by the first active controller of a quorum (from
    /// its `meta.properties`), so every node reports the same one.
    ClusterId { id: String },
    /// A controller of a dynamic quorum (KIP-853): its metadata directory id and the
    /// address its Raft transport listens on, committed before it is added as a voter so
    /// every member can dial it (Kafka's VotersRecord endpoints).
    VoterEndpoint {
        node_id: i32,
        directory_id: uuid::Uuid,
        host: String,
        port: i32,
    },
    /// A user's SCRAM credential for one mechanism was set (`Some`) or deleted
    /// (`None`): Kafka's UserScramCredentialRecord / RemoveUserScramCredentialRecord.
    ScramCredential {
        user: String,
        mechanism: dataplane::net::scram::ScramMechanism,
        credential: Option<dataplane::net::scram::ScramCredential>,
    },
    /// An ACL was created (`Some`) or deleted (`None`): Kafka's AccessControlEntryRecord
    /// / RemoveAccessControlEntryRecord, by the id the controller gave it. `origin` names
    /// the mirror whose ACL sync made it (and whether it is held); `None` for ACLs of
    /// CreateAcls.
    Acl {
        id: uuid::Uuid,
        binding: Option<dataplane::acl::AclBinding>,
        origin: Option<dataplane::acl::MirroredAcl>,
    },
    /// A config was set (`Some`) or removed (`None`).
    Config {
        resource_type: ConfigResourceType,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    /// A topic (with its partitions and configs) was deleted.
    RemoveTopic { id: uuid::Uuid },
    /// Producer ids below `next_block_start` have been handed out.
    ProducerIds { next_block_start: i64 },
    /// A node registered its broker and the address clients reach it at (Kafka's
    /// RegisterBrokerRecord, its Kafka listener only).
    RegisterBroker {
        node_id: i32,
        host: String,
        port: i32,
        /// `broker.rack`.
        rack: Option<String>,
        /// Every client listener by name and the address it advertises (Kafka's
        /// endpoints of RegisterBrokerRecord): a client is told the other brokers'
        /// addresses on the listener it connected to. Empty in records written before
        /// named listeners: `host:port` serves every listener then.
        listeners: Vec<(String, String, i32)>,
    },
}

/// Kafka's PartitionRecord: where a partition lives and who leads it. Which shard of a
/// node owns it is not part of it: every node places partitions on its own shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRecord {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    /// Node id of the leader, -1 while no replica can lead.
    pub leader: i32,
    pub leader_epoch: i32,
    /// Moves with every change of the record (leader, ISR, replicas).
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// A reassignment in progress: replicas being added (catching up) and being removed
    /// once the new ones are in sync. Both empty otherwise.
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("payload ends early (needs {needed} more bytes at byte {at})")]
    Truncated { at: usize, needed: usize },
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    #[error("unsupported record version {0}")]
    UnknownVersion(u8),
    #[error("unknown config resource type {0}")]
    UnknownResourceType(u8),
    #[error("string is not UTF-8")]
    NotUtf8,
    #[error("{0} bytes left after the record")]
    TrailingBytes(usize),
    #[error("invalid field: {0}")]
    InvalidField(&'static str),
}

/// Errors of the metadata log.
#[derive(Debug, thiserror::Error)]
pub enum MetadataLogError {
    #[error("metadata log {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A frame whose CRC matches but whose payload cannot be decoded: written by a newer
    /// version or by a bug. Refusing to start is safer than cutting committed metadata.
    #[error("metadata log {path}: record at byte {position} has a valid CRC but cannot be decoded: {source}")]
    UndecodableRecord {
        path: PathBuf,
        position: u64,
        #[source]
        source: DecodeError,
    },
    #[error("metadata record of {size} bytes exceeds the maximum of {RECORD_BYTES_MAX}")]
    RecordTooLarge { size: usize },
    #[error("metadata record field {field} is too long ({len} bytes)")]
    FieldTooLong { field: &'static str, len: usize },
}

impl MetadataRecord {
    /// Encodes the payload of one frame.
    pub fn encode(&self, end_of_batch: bool) -> Result<Vec<u8>, MetadataLogError> {
        let mut out = Vec::with_capacity(64);
        let flags = if end_of_batch { FLAG_END_OF_BATCH } else { 0 };
        match self {
            MetadataRecord::Topic { name, id } => {
                out.extend_from_slice(&[KIND_TOPIC, RECORD_VERSION, flags]);
                put_str(&mut out, "name", name)?;
                out.extend_from_slice(id.as_bytes());
            }
            MetadataRecord::Partition(p) => {
                out.extend_from_slice(&[KIND_PARTITION_REPLICAS, RECORD_VERSION, flags]);
                out.extend_from_slice(p.topic_id.as_bytes());
                for v in [p.partition, p.leader, p.leader_epoch, p.partition_epoch] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                put_ids(&mut out, "replicas", &p.replicas)?;
                put_ids(&mut out, "isr", &p.isr)?;
                put_ids(&mut out, "adding", &p.adding)?;
                put_ids(&mut out, "removing", &p.removing)?;
            }
            MetadataRecord::AlterPartition {
                topic_id,
                partition,
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                out.extend_from_slice(&[KIND_ALTER_PARTITION, RECORD_VERSION, flags]);
                out.extend_from_slice(topic_id.as_bytes());
                for v in [*partition, *leader_epoch, *partition_epoch] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                put_ids(&mut out, "isr", isr)?;
            }
            MetadataRecord::FenceBroker { node_id } => {
                out.extend_from_slice(&[KIND_FENCE_BROKER, RECORD_VERSION, flags]);
                out.extend_from_slice(&node_id.to_be_bytes());
            }
            MetadataRecord::UnfenceBroker { node_id } => {
                out.extend_from_slice(&[KIND_UNFENCE_BROKER, RECORD_VERSION, flags]);
                out.extend_from_slice(&node_id.to_be_bytes());
            }
            MetadataRecord::ControlledShutdown { node_id } => {
                out.extend_from_slice(&[KIND_CONTROLLED_SHUTDOWN, RECORD_VERSION, flags]);
                out.extend_from_slice(&node_id.to_be_bytes());
            }
            MetadataRecord::Guard {
                nonce,
                expected_applied,
                records,
            } => {
                out.extend_from_slice(&[KIND_GUARD, RECORD_VERSION, flags]);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.extend_from_slice(&expected_applied.to_be_bytes());
                out.extend_from_slice(&records.to_be_bytes());
            }
            MetadataRecord::ClusterId { id } => {
                out.extend_from_slice(&[KIND_CLUSTER_ID, RECORD_VERSION, flags]);
                put_str(&mut out, "cluster id", id)?;
            }
            MetadataRecord::VoterEndpoint {
                node_id,
                directory_id,
                host,
                port,
            } => {
                out.extend_from_slice(&[KIND_VOTER_ENDPOINT, RECORD_VERSION, flags]);
                out.extend_from_slice(&node_id.to_be_bytes());
                out.extend_from_slice(directory_id.as_bytes());
                put_str(&mut out, "host", host)?;
                out.extend_from_slice(&port.to_be_bytes());
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                out.extend_from_slice(&[KIND_CONFIG, RECORD_VERSION, flags, resource_type.code()]);
                put_str(&mut out, "resource_name", resource_name)?;
                put_str(&mut out, "name", name)?;
                match value {
                    None => out.push(0),
                    Some(v) => {
                        out.push(1);
                        put_str(&mut out, "value", v)?;
                    }
                }
            }
            MetadataRecord::ScramCredential {
                user,
                mechanism,
                credential,
            } => {
                out.extend_from_slice(&[KIND_SCRAM_CREDENTIAL, RECORD_VERSION, flags]);
                put_str(&mut out, "user", user)?;
                out.push(mechanism.code() as u8);
                match credential {
                    None => out.push(0),
                    Some(c) => {
                        out.push(1);
                        for (field, bytes) in [
                            ("salt", &c.salt),
                            ("stored key", &c.stored_key),
                            ("server key", &c.server_key),
                        ] {
                            put_bytes(&mut out, field, bytes)?;
                        }
                        out.extend_from_slice(&c.iterations.to_be_bytes());
                    }
                }
            }
            MetadataRecord::Acl {
                id,
                binding,
                origin,
            } => {
                let kind = if origin.is_some() && binding.is_some() {
                    KIND_MIRRORED_ACL
                } else {
                    KIND_ACL
                };
                out.extend_from_slice(&[kind, RECORD_VERSION, flags]);
                out.extend_from_slice(id.as_bytes());
                match binding {
                    None => out.push(0),
                    Some(b) => {
                        out.extend_from_slice(&[
                            1,
                            b.resource_type.code() as u8,
                            b.pattern_type.code() as u8,
                            b.operation.code() as u8,
                            b.permission.code() as u8,
                        ]);
                        put_str(&mut out, "resource name", &b.resource_name)?;
                        put_str(&mut out, "principal", &b.principal)?;
                        put_str(&mut out, "host", &b.host)?;
                        if let Some(o) = origin {
                            put_str(&mut out, "mirror", &o.mirror)?;
                            out.push(o.held as u8);
                        }
                    }
                }
            }
            MetadataRecord::RemoveTopic { id } => {
                out.extend_from_slice(&[KIND_REMOVE_TOPIC, RECORD_VERSION, flags]);
                out.extend_from_slice(id.as_bytes());
            }
            MetadataRecord::ProducerIds { next_block_start } => {
                out.extend_from_slice(&[KIND_PRODUCER_IDS, RECORD_VERSION, flags]);
                out.extend_from_slice(&next_block_start.to_be_bytes());
            }
            MetadataRecord::RegisterBroker {
                node_id,
                host,
                port,
                rack,
                listeners,
            } => {
                let kind = if listeners.is_empty() {
                    KIND_BROKER
                } else {
                    KIND_BROKER_LISTENERS
                };
                out.extend_from_slice(&[kind, RECORD_VERSION, flags]);
                out.extend_from_slice(&node_id.to_be_bytes());
                put_str(&mut out, "host", host)?;
                out.extend_from_slice(&port.to_be_bytes());
                match rack {
                    None => out.push(0),
                    Some(r) => {
                        out.push(1);
                        put_str(&mut out, "rack", r)?;
                    }
                }
                if !listeners.is_empty() {
                    if listeners.len() > LISTENERS_MAX {
                        return Err(MetadataLogError::FieldTooLong {
                            field: "listeners",
                            len: listeners.len(),
                        });
                    }
                    out.extend_from_slice(&(listeners.len() as u16).to_be_bytes());
                    for (name, host, port) in listeners {
                        put_str(&mut out, "listener name", name)?;
                        put_str(&mut out, "listener host", host)?;
                        out.extend_from_slice(&port.to_be_bytes());
                    }
                }
            }
        }
        if out.len() > RECORD_BYTES_MAX {
            return Err(MetadataLogError::RecordTooLarge { size: out.len() });
        }
        Ok(out)
    }

    /// Decodes one frame's payload; returns the record and its end-of-batch flag.
    pub fn decode(payload: &[u8]) -> Result<(MetadataRecord, bool), DecodeError> {
        let mut r = Reader {
            buf: payload,
            pos: 0,
        };
        let kind = r.u8()?;
        let version = r.u8()?;
        if version != RECORD_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let flags = r.u8()?;
        let record = match kind {
            KIND_TOPIC => MetadataRecord::Topic {
                name: r.string()?,
                id: r.uuid()?,
            },
            // Written before replication: the leader was the only replica, and the shard
            // it names is placed again locally.
            KIND_PARTITION => {
                let topic_id = r.uuid()?;
                let partition = r.i32()?;
                let leader = r.i32()?;
                let leader_epoch = r.i32()?;
                let _shard = r.u32()?;
                MetadataRecord::Partition(PartitionRecord {
                    topic_id,
                    partition,
                    leader,
                    leader_epoch,
                    partition_epoch: 0,
                    replicas: vec![leader],
                    isr: vec![leader],
                    adding: Vec::new(),
                    removing: Vec::new(),
                })
            }
            KIND_PARTITION_REPLICAS => MetadataRecord::Partition(PartitionRecord {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader: r.i32()?,
                leader_epoch: r.i32()?,
                partition_epoch: r.i32()?,
                replicas: r.ids()?,
                isr: r.ids()?,
                adding: r.ids()?,
                removing: r.ids()?,
            }),
            KIND_ALTER_PARTITION => MetadataRecord::AlterPartition {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader_epoch: r.i32()?,
                partition_epoch: r.i32()?,
                isr: r.ids()?,
            },
            KIND_FENCE_BROKER => MetadataRecord::FenceBroker { node_id: r.i32()? },
            KIND_UNFENCE_BROKER => MetadataRecord::UnfenceBroker { node_id: r.i32()? },
            KIND_CONTROLLED_SHUTDOWN => MetadataRecord::ControlledShutdown { node_id: r.i32()? },
            KIND_GUARD => MetadataRecord::Guard {
                nonce: r.i64()? as u64,
                expected_applied: r.i64()? as u64,
                records: r.u32()?,
            },
            KIND_CLUSTER_ID => MetadataRecord::ClusterId { id: r.string()? },
            KIND_VOTER_ENDPOINT => MetadataRecord::VoterEndpoint {
                node_id: r.i32()?,
                directory_id: r.uuid()?,
                host: r.string()?,
                port: r.i32()?,
            },
            KIND_CONFIG => {
                let code = r.u8()?;
                let resource_type = ConfigResourceType::from_code(code)
                    .ok_or(DecodeError::UnknownResourceType(code))?;
                let resource_name = r.string()?;
                let name = r.string()?;
                let value = match r.u8()? {
                    0 => None,
                    1 => Some(r.string()?),
                    _ => return Err(DecodeError::InvalidField("config value presence")),
                };
                MetadataRecord::Config {
                    resource_type,
                    resource_name,
                    name,
                    value,
                }
            }
            KIND_REMOVE_TOPIC => MetadataRecord::RemoveTopic { id: r.uuid()? },
            KIND_ACL | KIND_MIRRORED_ACL => {
                use dataplane::acl::{
                    AclBinding, Operation, PatternType, Permission, ResourceType,
                };
                let id = r.uuid()?;
                let binding = match r.u8()? {
                    0 => None,
                    1 => {
                        let resource_type = ResourceType::from_code(r.u8()? as i8)
                            .ok_or(DecodeError::InvalidField("ACL resource type"))?;
                        let pattern_type = PatternType::from_code(r.u8()? as i8)
                            .ok_or(DecodeError::InvalidField("ACL pattern type"))?;
                        let operation = Operation::from_code(r.u8()? as i8)
                            .ok_or(DecodeError::InvalidField("ACL operation"))?;
                        let permission = Permission::from_code(r.u8()? as i8)
                            .ok_or(DecodeError::InvalidField("ACL permission"))?;
                        Some(AclBinding {
                            resource_type,
                            resource_name: r.string()?,
                            pattern_type,
                            principal: r.string()?,
                            host: r.string()?,
                            operation,
                            permission,
                        })
                    }
                    _ => return Err(DecodeError::InvalidField("ACL presence")),
                };
                let origin = if kind == KIND_MIRRORED_ACL && binding.is_some() {
                    let mirror = r.string()?;
                    let held = match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return Err(DecodeError::InvalidField("ACL held flag")),
                    };
                    Some(dataplane::acl::MirroredAcl { mirror, held })
                } else {
                    None
                };
                MetadataRecord::Acl {
                    id,
                    binding,
                    origin,
                }
            }
            KIND_SCRAM_CREDENTIAL => MetadataRecord::ScramCredential {
                user: r.string()?,
                mechanism: dataplane::net::scram::ScramMechanism::from_code(r.u8()? as i8)
                    .ok_or(DecodeError::InvalidField("SCRAM mechanism"))?,
                credential: match r.u8()? {
                    0 => None,
                    1 => Some(dataplane::net::scram::ScramCredential {
                        salt: r.bytes()?,
                        stored_key: r.bytes()?,
                        server_key: r.bytes()?,
                        iterations: r.i32()?,
                    }),
                    _ => return Err(DecodeError::InvalidField("credential presence")),
                },
            },
            KIND_PRODUCER_IDS => MetadataRecord::ProducerIds {
                next_block_start: r.i64()?,
            },
            KIND_REGISTER_BROKER => MetadataRecord::RegisterBroker {
                node_id: r.i32()?,
                host: r.string()?,
                port: r.i32()?,
                rack: None,
                listeners: Vec::new(),
            },
            KIND_BROKER | KIND_BROKER_LISTENERS => MetadataRecord::RegisterBroker {
                node_id: r.i32()?,
                host: r.string()?,
                port: r.i32()?,
                rack: match r.u8()? {
                    0 => None,
                    1 => Some(r.string()?),
                    _ => return Err(DecodeError::InvalidField("rack presence")),
                },
                listeners: if kind == KIND_BROKER_LISTENERS {
                    let n = usize::from(r.u16()?);
                    if n > LISTENERS_MAX {
                        return Err(DecodeError::InvalidField("listener count"));
                    }
                    (0..n)
                        .map(|_| Ok((r.string()?, r.string()?, r.i32()?)))
                        .collect::<Result<_, DecodeError>>()?
                } else {
                    Vec::new()
                },
            },
            other => return Err(DecodeError::UnknownKind(other)),
        };
        let left = payload.len() - r.pos;
        if left != 0 {
            return Err(DecodeError::TrailingBytes(left));
        }
        Ok((record, flags & FLAG_END_OF_BATCH != 0))
    }
}

/// A list of node ids: `u16` count, then each id.
fn put_ids(out: &mut Vec<u8>, field: &'static str, ids: &[i32]) -> Result<(), MetadataLogError> {
    if ids.len() > REPLICAS_MAX {
        return Err(MetadataLogError::FieldTooLong {
            field,
            len: ids.len(),
        });
    }
    out.extend_from_slice(&(ids.len() as u16).to_be_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_be_bytes());
    }
    Ok(())
}

fn put_bytes(out: &mut Vec<u8>, field: &'static str, b: &[u8]) -> Result<(), MetadataLogError> {
    let len = u16::try_from(b.len()).map_err(|_| MetadataLogError::FieldTooLong {
        field,
        len: b.len(),
    })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b);
    Ok(())
}

fn put_str(out: &mut Vec<u8>, field: &'static str, s: &str) -> Result<(), MetadataLogError> {
    let len = u16::try_from(s.len()).map_err(|_| MetadataLogError::FieldTooLong {
        field,
        len: s.len(),
    })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let left = self.buf.len() - self.pos;
        if left < n {
            return Err(DecodeError::Truncated {
                at: self.pos,
                needed: n - left,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn ids(&mut self) -> Result<Vec<i32>, DecodeError> {
        let n = u16::from_be_bytes(self.array()?) as usize;
        if n > REPLICAS_MAX {
            return Err(DecodeError::InvalidField("replica list length"));
        }
        (0..n).map(|_| self.i32()).collect()
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let len = usize::from(self.u16()?);
        Ok(self.take(len)?.to_vec())
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn uuid(&mut self) -> Result<uuid::Uuid, DecodeError> {
        Ok(uuid::Uuid::from_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let len = u16::from_be_bytes(self.array()?) as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NotUtf8)
    }
}

/// The open metadata log, positioned at its end.
#[derive(Debug)]
pub struct MetadataLog {
    path: PathBuf,
    file: File,
    /// Bytes of whole, valid batches in the file.
    len_bytes: u64,
    /// Records in the file.
    record_count: u64,
}

impl MetadataLog {
    /// Opens (creating it and its directory if needed) the metadata log of `data_dir`,
    /// replays it and returns the log and every record of every whole batch, in order.
    /// A torn or corrupt tail is cut off (with a warning) so the next append follows the
    /// last whole batch.
    pub fn open(data_dir: &Path) -> Result<(MetadataLog, Vec<MetadataRecord>), MetadataLogError> {
        let dir = data_dir.join(METADATA_DIR);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MetadataLogError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let path = dir.join(METADATA_LOG_FILE);
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        if !existed {
            // Make the new file's directory entry durable before anything relies on it.
            sync_dir(&dir).map_err(io(&dir))?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent).map_err(io(parent))?;
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(&path))?;
        let scan = scan(&bytes, &path)?;
        if scan.valid_bytes < bytes.len() as u64 {
            tracing::warn!(
                path = %path.display(),
                position = scan.valid_bytes,
                file_bytes = bytes.len(),
                reason = scan.stop_reason.as_deref().unwrap_or("unknown"),
                "metadata log has a torn or corrupt tail; truncating it"
            );
            file.set_len(scan.valid_bytes).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        let log = MetadataLog {
            path,
            file,
            len_bytes: scan.valid_bytes,
            record_count: scan.records.len() as u64,
        };
        Ok((log, scan.records))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// Records in the log (replayed plus appended).
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// Appends `batch` as one unit: one write, then fsync. On error the file is cut back
    /// to where it was, so a failed append leaves nothing behind (best effort: if even
    /// the truncation fails, replay drops the unfinished batch at the next start).
    pub fn append(&mut self, batch: &[MetadataRecord]) -> Result<(), MetadataLogError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for (i, record) in batch.iter().enumerate() {
            let payload = record.encode(i + 1 == batch.len())?;
            let len =
                u32::try_from(payload.len()).map_err(|_| MetadataLogError::RecordTooLarge {
                    size: payload.len(),
                })?;
            buf.extend_from_slice(&len.to_be_bytes());
            buf.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
            buf.extend_from_slice(&payload);
        }
        let result = self
            .file
            .write_all_at(&buf, self.len_bytes)
            .and_then(|()| self.file.sync_data());
        if let Err(source) = result {
            tracing::error!(path = %self.path.display(), error = %source, "metadata log append failed");
            if let Err(e) = self.file.set_len(self.len_bytes) {
                tracing::error!(path = %self.path.display(), error = %e, "could not cut back a failed append");
            }
            return Err(MetadataLogError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.len_bytes += buf.len() as u64;
        self.record_count += batch.len() as u64;
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

struct Scan {
    records: Vec<MetadataRecord>,
    valid_bytes: u64,
    stop_reason: Option<String>,
}

/// Walks the frames of `bytes`, keeping whole batches only.
fn scan(bytes: &[u8], path: &Path) -> Result<Scan, MetadataLogError> {
    let mut records = Vec::new();
    let mut pending = Vec::new();
    let mut pos = 0usize;
    let mut valid = 0usize;
    let mut stop_reason = None;
    while pos < bytes.len() {
        let left = bytes.len() - pos;
        if left < FRAME_HEADER_BYTES {
            stop_reason = Some(format!("torn frame header at byte {pos}"));
            break;
        }
        let mut len_bytes = [0u8; 4];
        len_bytes.copy_from_slice(&bytes[pos..pos + 4]);
        let mut crc_bytes = [0u8; 4];
        crc_bytes.copy_from_slice(&bytes[pos + 4..pos + 8]);
        let len = u32::from_be_bytes(len_bytes) as usize;
        let crc = u32::from_be_bytes(crc_bytes);
        if len > RECORD_BYTES_MAX {
            stop_reason = Some(format!("frame at byte {pos} claims {len} bytes"));
            break;
        }
        if left - FRAME_HEADER_BYTES < len {
            stop_reason = Some(format!("torn frame at byte {pos}"));
            break;
        }
        let payload = &bytes[pos + FRAME_HEADER_BYTES..pos + FRAME_HEADER_BYTES + len];
        let actual = crc32c::crc32c(payload);
        if actual != crc {
            stop_reason = Some(format!(
                "CRC mismatch at byte {pos}: stored {crc:#010x}, computed {actual:#010x}"
            ));
            break;
        }
        let (record, end_of_batch) = MetadataRecord::decode(payload).map_err(|source| {
            MetadataLogError::UndecodableRecord {
                path: path.to_path_buf(),
                position: pos as u64,
                source,
            }
        })?;
        pending.push(record);
        pos += FRAME_HEADER_BYTES + len;
        if end_of_batch {
            records.append(&mut pending);
            valid = pos;
        }
    }
    if stop_reason.is_none() && !pending.is_empty() {
        stop_reason = Some(format!(
            "unfinished batch of {} records at the end",
            pending.len()
        ));
    }
    Ok(Scan {
        records,
        valid_bytes: valid as u64,
        stop_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<MetadataRecord> {
        let id = uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788);
        vec![
            MetadataRecord::Topic {
                name: "orders".into(),
                id,
            },
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 0,
                leader: 2,
                leader_epoch: 3,
                partition_epoch: 5,
                replicas: vec![2, 0, 1, 3],
                isr: vec![2, 1],
                adding: vec![3],
                removing: vec![0],
            }),
            MetadataRecord::AlterPartition {
                topic_id: id,
                partition: 0,
                leader_epoch: 3,
                partition_epoch: 5,
                isr: vec![2, 1, 0],
            },
            MetadataRecord::FenceBroker { node_id: 1 },
            MetadataRecord::UnfenceBroker { node_id: 1 },
            MetadataRecord::ControlledShutdown { node_id: 0 },
            MetadataRecord::Guard {
                nonce: u64::MAX - 3,
                expected_applied: 1 << 40,
                records: 7,
            },
            MetadataRecord::ClusterId {
                id: "MkU3OEVBNTcwNTJENDM2Qg".into(),
            },
            MetadataRecord::VoterEndpoint {
                node_id: 4,
                directory_id: uuid::Uuid::from_u128(7),
                host: "10.0.0.4".into(),
                port: 9093,
            },
            MetadataRecord::Config {
                resource_type: ConfigResourceType::Topic,
                resource_name: "orders".into(),
                name: "retention.ms".into(),
                value: Some("1000".into()),
            },
            MetadataRecord::Config {
                resource_type: ConfigResourceType::Mirror,
                resource_name: "m".into(),
                name: "x".into(),
                value: None,
            },
            MetadataRecord::RemoveTopic { id },
            MetadataRecord::ProducerIds {
                next_block_start: 5000,
            },
            MetadataRecord::RegisterBroker {
                node_id: 2,
                host: "10.0.0.7".into(),
                port: 9092,
                rack: Some("r1".into()),
                listeners: Vec::new(),
            },
            MetadataRecord::RegisterBroker {
                node_id: 3,
                host: "10.0.0.8".into(),
                port: 9092,
                rack: None,
                listeners: vec![
                    ("PLAINTEXT".into(), "10.0.0.8".into(), 9092),
                    ("SASL_SSL".into(), "10.0.0.8".into(), 9094),
                ],
            },
            MetadataRecord::ScramCredential {
                user: "alice".into(),
                mechanism: dataplane::net::scram::ScramMechanism::Sha512,
                credential: Some(dataplane::net::scram::ScramCredential {
                    salt: vec![1, 2, 3],
                    stored_key: vec![4; 64],
                    server_key: vec![5; 64],
                    iterations: 8192,
                }),
            },
            MetadataRecord::ScramCredential {
                user: "bob".into(),
                mechanism: dataplane::net::scram::ScramMechanism::Sha256,
                credential: None,
            },
            MetadataRecord::Acl {
                id: uuid::Uuid::from_u128(7),
                binding: Some(dataplane::acl::AclBinding {
                    resource_type: dataplane::acl::ResourceType::ClusterMirror,
                    resource_name: "dr".into(),
                    pattern_type: dataplane::acl::PatternType::Prefixed,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: dataplane::acl::Operation::Describe,
                    permission: dataplane::acl::Permission::Deny,
                }),
                origin: None,
            },
            MetadataRecord::Acl {
                id: uuid::Uuid::from_u128(8),
                binding: Some(dataplane::acl::AclBinding {
                    resource_type: dataplane::acl::ResourceType::Topic,
                    resource_name: "orders".into(),
                    pattern_type: dataplane::acl::PatternType::Literal,
                    principal: "User:bob".into(),
                    host: "*".into(),
                    operation: dataplane::acl::Operation::Write,
                    permission: dataplane::acl::Permission::Allow,
                }),
                origin: Some(dataplane::acl::MirroredAcl {
                    mirror: "dr".into(),
                    held: true,
                }),
            },
            MetadataRecord::Acl {
                id: uuid::Uuid::from_u128(7),
                binding: None,
                origin: None,
            },
        ]
    }

    fn log_path(dir: &Path) -> PathBuf {
        dir.join(METADATA_DIR).join(METADATA_LOG_FILE)
    }

    #[test]
    fn payload_round_trips() {
        for r in sample() {
            for end in [false, true] {
                let bytes = r.encode(end).expect("encode");
                assert_eq!(MetadataRecord::decode(&bytes), Ok((r.clone(), end)));
                // Every strict prefix fails cleanly, never panics.
                for cut in 0..bytes.len() {
                    assert!(MetadataRecord::decode(&bytes[..cut]).is_err());
                }
            }
        }
    }

    #[test]
    fn a_partition_record_from_before_replication_reads_as_its_leader_alone() {
        let id = uuid::Uuid::from_u128(9);
        let mut old = vec![KIND_PARTITION, RECORD_VERSION, FLAG_END_OF_BATCH];
        old.extend_from_slice(id.as_bytes());
        for v in [4i32, 0, 7] {
            old.extend_from_slice(&v.to_be_bytes());
        }
        old.extend_from_slice(&3u32.to_be_bytes());
        let (record, end) = MetadataRecord::decode(&old).expect("decode");
        assert!(end);
        assert_eq!(
            record,
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 4,
                leader: 0,
                leader_epoch: 7,
                partition_epoch: 0,
                replicas: vec![0],
                isr: vec![0],
                adding: Vec::new(),
                removing: Vec::new(),
            })
        );
    }

    #[test]
    fn log_round_trips_across_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut log, replayed) = MetadataLog::open(dir.path()).expect("open");
        assert!(replayed.is_empty());
        let records = sample();
        log.append(&records[..2]).expect("append");
        log.append(&records[2..]).expect("append");
        assert_eq!(log.record_count(), records.len() as u64);
        drop(log);
        let (log, replayed) = MetadataLog::open(dir.path()).expect("reopen");
        assert_eq!(replayed, records);
        assert_eq!(
            log.len_bytes(),
            std::fs::metadata(log_path(dir.path())).expect("stat").len()
        );
    }

    #[test]
    fn torn_tail_is_truncated_and_appends_continue() {
        let dir = tempfile::tempdir().expect("tempdir");
        let records = sample();
        let (mut log, _) = MetadataLog::open(dir.path()).expect("open");
        log.append(&records[..1]).expect("append");
        log.append(&records[1..3]).expect("append");
        let good = log.len_bytes();
        log.append(&records[3..]).expect("append");
        drop(log);
        let path = log_path(dir.path());
        let full = std::fs::read(&path).expect("read");
        // Cut inside every position of the last batch: only the first two batches survive.
        for cut in good as usize..full.len() {
            std::fs::write(&path, &full[..cut]).expect("write");
            let (mut log, replayed) = MetadataLog::open(dir.path()).expect("reopen");
            assert_eq!(replayed, records[..3].to_vec(), "cut at {cut}");
            assert_eq!(std::fs::metadata(&path).expect("stat").len(), good);
            log.append(&records[3..]).expect("append after truncation");
            drop(log);
            let (_, replayed) = MetadataLog::open(dir.path()).expect("reopen");
            assert_eq!(replayed, records);
        }
    }

    #[test]
    fn corrupt_crc_stops_replay_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let records = sample();
        let (mut log, _) = MetadataLog::open(dir.path()).expect("open");
        log.append(&records[..2]).expect("append");
        let good = log.len_bytes();
        log.append(&records[2..4]).expect("append");
        log.append(&records[4..]).expect("append");
        drop(log);
        let path = log_path(dir.path());
        let mut bytes = std::fs::read(&path).expect("read");
        // Flip a payload bit of the first record of the second batch.
        bytes[good as usize + FRAME_HEADER_BYTES + 3] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        let (log, replayed) = MetadataLog::open(dir.path()).expect("reopen");
        assert_eq!(replayed, records[..2].to_vec());
        assert_eq!(log.len_bytes(), good);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), good);
    }

    #[test]
    fn absurd_length_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut log, _) = MetadataLog::open(dir.path()).expect("open");
        log.append(&sample()[..1]).expect("append");
        let good = log.len_bytes();
        drop(log);
        let path = log_path(dir.path());
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        bytes.extend_from_slice(&[0u8; 20]);
        std::fs::write(&path, &bytes).expect("write");
        let (_, replayed) = MetadataLog::open(dir.path()).expect("reopen");
        assert_eq!(replayed, sample()[..1].to_vec());
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), good);
    }

    #[test]
    fn valid_crc_with_unknown_kind_refuses_to_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut log, _) = MetadataLog::open(dir.path()).expect("open");
        log.append(&sample()[..1]).expect("append");
        drop(log);
        let path = log_path(dir.path());
        let mut bytes = std::fs::read(&path).expect("read");
        let payload = [99u8, RECORD_VERSION, FLAG_END_OF_BATCH];
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
        bytes.extend_from_slice(&payload);
        std::fs::write(&path, &bytes).expect("write");
        assert!(matches!(
            MetadataLog::open(dir.path()),
            Err(MetadataLogError::UndecodableRecord {
                source: DecodeError::UnknownKind(99),
                ..
            })
        ));
    }
}
