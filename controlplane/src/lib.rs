//! Twinlog's control plane: the metadata log, the controller that applies admin
//! requests as metadata records, and the images it publishes to the data plane.
//!
//! Wiring (in `src/`): create a [`dataplane::metadata::MetadataCell`], call
//! [`spawn_controller`] (it replays the metadata log and publishes the image before it
//! returns), open [`topics_to_open`] of that image on each shard, hand the returned
//! [`dataplane::controller::ControllerHandle`] to the shards, and call
//! [`ControllerThread::shutdown`] after the shards have stopped.

pub mod applier;
pub mod capacity;
pub mod controller;
pub mod meta_properties;
pub mod metadata_log;
pub mod metrics_http;
pub mod mirror;
pub mod mirror_admin;
pub mod quorum;
pub mod state;
pub mod thread;

pub use controller::{
    topics_to_open, Controller, ControllerConfig, ControllerError, PartitionOps, PartitionToOpen,
};
pub use metadata_log::{ConfigResourceType, MetadataLog, MetadataLogError, MetadataRecord};
pub use state::{ControllerState, NodeSettings, PartitionAction, Plan};
pub use thread::{spawn_controller, spawn_controller_with, ControllerClient, ControllerThread};
