//! Client quotas, as Kafka's ClientQuotaManager applies them: byte-rate quotas on produce and
//! fetch and a request-time quota, set per user, client id or both (with defaults) by
//! AlterClientQuotas and kept in the metadata.
//!
//! - [`entity`]: the configured quotas ([`ClientQuotas`], owned by the controller), their
//!   validation, DescribeClientQuotas' filter and the lookup of the quota that applies to a
//!   client (Kafka's precedence of the eight user/client-id levels).
//! - [`rate`]: Kafka's sampled rate (11 one-second windows by default) and the throttle time
//!   a violation earns; pure, driven by the caller's clock.
//! - [`manager`]: [`QuotaManager`], the broker's one owner of the per-client rates; handlers
//!   record bytes and get the throttle time to put in the response, for which the connection
//!   then stops reading the client's requests (Kafka mutes the channel).

pub mod entity;
pub mod manager;
pub mod rate;

pub use entity::{ClientQuotas, QuotaEntity};
pub use manager::{QuotaKind, QuotaManager};
