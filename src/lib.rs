//! Sluice: a Kafka-compatible message broker.
//!
//! Module map (see docs/architecture.md): `net` (listeners, framing, response writing),
//! `api` (one module per Kafka API key), `cluster` (controller, partitions, ISR), `log`
//! (segment store, protocol-agnostic), `config`, `broker` (ties the owners together), `group` (consumer group coordinator and
//! committed offsets), `security` (principals and sessions).

pub mod alloc;
pub mod api;
pub mod broker;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod faults;
pub mod group;
pub mod health;
pub mod http;
#[cfg(test)]
mod layering;
pub mod log;
pub mod logging;
pub mod metrics;
pub mod net;
pub mod producer;
pub mod quota;
pub mod registry;
pub mod run;
pub mod security;
pub mod share;
pub mod testing;
pub mod txn;
pub mod verify;

#[global_allocator]
static GLOBAL: alloc::GuardedAlloc = alloc::GuardedAlloc;
