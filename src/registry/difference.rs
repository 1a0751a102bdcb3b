//! One difference a compatibility check finds between two schemas, for the formats whose
//! checks list differences by kind (JSON Schema in [`super::json_diff`], Protobuf in
//! [`super::protobuf`]). Pure.

/// One difference a format's compatibility check finds between two schemas: its kind, as
/// Confluent names it, and where it is (`#/properties/age`, `#/Message/3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub kind: &'static str,
    pub path: String,
}

impl Difference {
    /// Whether the kind is one of `compatible`, the kinds a format allows.
    pub fn allowed_by(&self, compatible: &[&str]) -> bool {
        compatible.contains(&self.kind)
    }
}
