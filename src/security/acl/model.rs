//! ACLs as Kafka models them: a resource pattern (type, name, literal or prefixed) and an
//! access control entry (principal, host, operation, allow or deny), with the wire codes of
//! `org.apache.kafka.common.resource` and `org.apache.kafka.common.acl`.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! coded_enum {
    ($(#[$m:meta])* $name:ident { $($v:ident = $c:expr, $s:expr;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name { $($v),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),*];

            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$v => $c),* }
            }

            /// The value of a wire code; None for UNKNOWN (0) and codes Kafka does not define.
            pub fn from_code(code: i8) -> Option<$name> {
                match code { $($c => Some($name::$v),)* _ => None }
            }

            /// Kafka's name (`TOPIC`, `PREFIXED`, `DESCRIBE_CONFIGS`, ...).
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $s),* }
            }

            /// Parses Kafka's name, case-insensitively.
            pub fn parse(s: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(s.trim()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

coded_enum!(
    /// `ResourceType`; ANY only appears in filters.
    ResourceType {
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

coded_enum!(
    /// `PatternType`; ANY and MATCH only appear in filters.
    PatternType {
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

coded_enum!(
    /// `AclOperation`; ANY only appears in filters.
    AclOperation {
        Any = 1, "ANY";
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

coded_enum!(
    /// `AclPermissionType`; ANY only appears in filters.
    Permission {
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

/// The name of the one cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name and host that match every name and host.
pub const WILDCARD: &str = "*";
/// The principal that matches every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

impl ResourceType {
    /// The operations Kafka's authorized-operations fields report for this resource type
    /// (`AclEntry.supportedOperations`).
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Any => &[],
        }
    }
}

/// A resource pattern of a stored ACL: a concrete type and a LITERAL or PREFIXED pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

/// Who may (or may not) do what from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AccessControlEntry {
    /// `type:name`, `User:*` for everyone.
    pub principal: String,
    /// An IP address as the client connects from, or `*`.
    pub host: String,
    pub operation: AclOperation,
    pub permission: Permission,
}

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

impl AclBinding {
    /// Why Kafka would refuse to create this ACL (CreateAcls answers INVALID_REQUEST with
    /// this message), if it would.
    pub fn invalid(&self) -> Option<String> {
        let p = &self.pattern;
        let e = &self.entry;
        if p.resource_type == ResourceType::Any {
            return Some("Invalid resource type: ANY".into());
        }
        if !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return Some(format!("Invalid pattern type: {}", p.pattern_type));
        }
        if e.operation == AclOperation::Any {
            return Some("Invalid operation: ANY".into());
        }
        if e.permission == Permission::Any {
            return Some("Invalid permission type: ANY".into());
        }
        if p.name.is_empty() {
            return Some("Invalid resource name: empty".into());
        }
        if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
            return Some(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if p.pattern_type == PatternType::Prefixed && p.name == WILDCARD {
            return Some("Prefixed pattern with the wildcard name is not allowed".into());
        }
        // Kafka's SecurityUtils.parseKafkaPrincipal words.
        if e.principal.is_empty() {
            return Some("expected a string in format principalType:principalName but got ".into());
        }
        match e.principal.split_once(':') {
            None => {
                return Some(format!(
                    "Could not parse principal from `{}` (no colon is present separating the \
                     principal type from the principal name)",
                    e.principal
                ));
            }
            Some((t, _)) if t.is_empty() => {
                return Some(format!("Invalid principal: {}", e.principal));
            }
            Some(_) => {}
        }
        if e.host.is_empty() {
            return Some("Invalid host: empty".into());
        }
        None
    }
}

/// A DescribeAcls or DeleteAcls filter: None fields match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission: Permission,
}

impl AclFilter {
    /// Whether `b` is one of the ACLs this filter selects (`AclBindingFilter.matches`): MATCH
    /// selects the literal ACLs of that name, the literal wildcard and the prefixed ACLs whose
    /// prefix starts the name.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let p = &b.pattern;
        let e = &b.entry;
        if self.resource_type != ResourceType::Any && self.resource_type != p.resource_type {
            return false;
        }
        let name_ok = match (self.pattern_type, self.name.as_deref()) {
            (PatternType::Match, Some(n)) => match p.pattern_type {
                PatternType::Literal => p.name == n || p.name == WILDCARD,
                PatternType::Prefixed => n.starts_with(p.name.as_str()),
                _ => false,
            },
            (PatternType::Any | PatternType::Match, None) => true,
            (PatternType::Any, Some(n)) => p.name == n,
            (pt, n) => pt == p.pattern_type && n.is_none_or(|n| p.name == n),
        };
        name_ok
            && self.principal.as_ref().is_none_or(|x| *x == e.principal)
            && self.host.as_ref().is_none_or(|x| *x == e.host)
            && (self.operation == AclOperation::Any || self.operation == e.operation)
            && (self.permission == Permission::Any || self.permission == e.permission)
    }
}
