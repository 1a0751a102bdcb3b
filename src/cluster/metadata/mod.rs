//! Cluster metadata: the records of the metadata log and the image applying them gives.
//! No I/O here: the quorum (`cluster::quorum`) carries the records, the controller
//! (`cluster::control`) decides which to write.

pub mod image;
pub mod records;

pub use image::{BrokerState, MetadataImage, TopicImage};
pub use records::{
    BrokerRegistration, ConfigResource, Endpoint, HTTP_ENDPOINT, MetadataRecord, PartitionChange,
    PartitionRecord,
};
