//! Small helpers shared by the group API modules.

use kafka_protocol::protocol::StrBytes;

pub fn sb(s: String) -> StrBytes {
    StrBytes::from_string(s)
}
