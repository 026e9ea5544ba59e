//! Kafka wire formats: the zero-copy record batch view, control records, and the record
//! encoding helpers. No I/O here, and no panics on input: decoding returns `Result`.

pub mod batch;
pub mod control;
pub mod mirror;
pub mod records;

pub use batch::{BatchError, BatchIter, RecordBatch};
pub use control::{ControlRecord, ControlType};
