//! The control plane's mirror side: the `__mirror_state` records ([`records`]) and the
//! [`MirrorStateCoordinator`] that keeps mirror partition states and LMEs in them
//! (`kip1279-reference.md` §5, `DECISIONS.md` "`__mirror_state`"), the [`states`] the
//! manager reads and writes through it or another broker's, the [`manager`] of
//! mirror partition states (its decision table in [`transitions`]), and the periodic metadata [`sync`] of configs, partitions,
//! group offsets and source health (§8).

pub mod acl_sync;
pub mod coordinator;
pub mod manager;
pub mod records;
pub mod service;
pub mod states;
pub mod sync;
pub mod transitions;

pub use coordinator::{
    CoordinatorError, KeyedRecord, MirrorStateCoordinator, MirrorStateLog, MirrorStateTable,
    ShardMirrorStateLog, StoredState, MIRROR_STATE_TOPIC, RECORDS_PER_BATCH_MAX,
};
pub use records::{
    decode_record, decode_value, encode_value, mirror_partition_for, partition_for,
    MirrorRecordError, MirrorRecordKind, MirrorStateKey, MirrorStateValue, StateValue,
};
