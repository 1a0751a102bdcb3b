use std::collections::BTreeSet;
use std::net::IpAddr;

use super::authorizer::{self, AuthorizerConfig, Caller};
use super::model::*;
use crate::security::Principal;

fn acl(
    rt: ResourceType,
    name: &str,
    pt: PatternType,
    who: &str,
    host: &str,
    op: AclOperation,
    perm: Permission,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: rt,
            name: name.into(),
            pattern_type: pt,
        },
        entry: AccessControlEntry {
            principal: who.into(),
            host: host.into(),
            operation: op,
            permission: perm,
        },
    }
}

fn allow_topic(name: &str, pt: PatternType, who: &str, op: AclOperation) -> AclBinding {
    acl(
        ResourceType::Topic,
        name,
        pt,
        who,
        "*",
        op,
        Permission::Allow,
    )
}

fn can(
    acls: &[AclBinding],
    cfg: &AuthorizerConfig,
    who: &str,
    op: AclOperation,
    topic: &str,
) -> bool {
    let p = Principal::parse(who).unwrap();
    let caller = Caller {
        principal: &p,
        host: Some("127.0.0.1".parse().unwrap()),
    };
    authorizer::authorize(acls, cfg, caller, op, ResourceType::Topic, topic)
}

use AclOperation::*;
use PatternType::{Literal, Prefixed};

#[test]
fn literal_prefixed_and_wildcard_acls_allow_their_resources_only() {
    let cfg = AuthorizerConfig::default();
    let acls = vec![
        allow_topic("orders", Literal, "User:alice", Read),
        allow_topic("app-", Prefixed, "User:bob", Write),
        allow_topic("*", Literal, "User:carol", Read),
    ];
    assert!(can(&acls, &cfg, "User:alice", Read, "orders"));
    assert!(!can(&acls, &cfg, "User:alice", Read, "orders2"));
    assert!(!can(&acls, &cfg, "User:alice", Write, "orders"));
    assert!(can(&acls, &cfg, "User:bob", Write, "app-events"));
    assert!(!can(&acls, &cfg, "User:bob", Write, "ap"));
    assert!(can(&acls, &cfg, "User:carol", Read, "anything"));
    assert!(!can(&acls, &cfg, "User:dave", Read, "orders"));
}

#[test]
fn deny_wins_and_read_implies_describe_for_allow_only() {
    let cfg = AuthorizerConfig::default();
    let mut acls = vec![
        allow_topic("t", Literal, "User:*", All),
        acl(
            ResourceType::Topic,
            "t",
            Literal,
            "User:eve",
            "*",
            Write,
            Permission::Deny,
        ),
    ];
    assert!(can(&acls, &cfg, "User:eve", Read, "t"));
    assert!(!can(&acls, &cfg, "User:eve", Write, "t"));
    assert!(can(&acls, &cfg, "User:x", Write, "t"));
    acls = vec![
        allow_topic("t", Literal, "User:a", Read),
        allow_topic("t", Literal, "User:b", AlterConfigs),
        acl(
            ResourceType::Topic,
            "t",
            Literal,
            "User:c",
            "*",
            All,
            Permission::Allow,
        ),
        acl(
            ResourceType::Topic,
            "t",
            Literal,
            "User:c",
            "*",
            Read,
            Permission::Deny,
        ),
    ];
    assert!(can(&acls, &cfg, "User:a", Describe, "t"));
    assert!(!can(&acls, &cfg, "User:a", DescribeConfigs, "t"));
    assert!(can(&acls, &cfg, "User:b", DescribeConfigs, "t"));
    assert!(!can(&acls, &cfg, "User:b", Describe, "t"));
    // a DENY of READ does not deny DESCRIBE
    assert!(can(&acls, &cfg, "User:c", Describe, "t"));
    assert!(!can(&acls, &cfg, "User:c", Read, "t"));
}

#[test]
fn hosts_super_users_and_the_no_acl_rule() {
    let mut cfg = AuthorizerConfig::default();
    let acls = vec![acl(
        ResourceType::Topic,
        "t",
        Literal,
        "User:a",
        "10.0.0.1",
        Read,
        Permission::Allow,
    )];
    assert!(!can(&acls, &cfg, "User:a", Read, "t"));
    let p = Principal::user("a");
    let from: IpAddr = "10.0.0.1".parse().unwrap();
    let caller = Caller {
        principal: &p,
        host: Some(from),
    };
    assert!(authorizer::authorize(
        &acls,
        &cfg,
        caller,
        Read,
        ResourceType::Topic,
        "t"
    ));
    // no ACL on "u": denied unless allow.everyone.if.no.acl.found
    assert!(!can(&acls, &cfg, "User:a", Read, "u"));
    cfg.allow_everyone_if_no_acl_found = true;
    assert!(can(&acls, &cfg, "User:a", Read, "u"));
    assert!(
        !can(&acls, &cfg, "User:b", Read, "t"),
        "t has an ACL, so the rule is off"
    );
    cfg.super_users.insert("User:root".into());
    assert!(can(&acls, &cfg, "User:root", Delete, "t"));
}

#[test]
fn by_resource_type_needs_an_allow_not_covered_by_a_deny() {
    let cfg = AuthorizerConfig::default();
    let p = Principal::user("a");
    let caller = Caller {
        principal: &p,
        host: None,
    };
    let by_type = |acls: &[AclBinding]| {
        authorizer::authorize_by_type(acls, &cfg, caller, Write, ResourceType::Topic)
    };
    assert!(!by_type(&[]));
    assert!(by_type(&[allow_topic("x", Literal, "User:a", Write)]));
    assert!(by_type(&[allow_topic("x-", Prefixed, "User:a", Write)]));
    assert!(!by_type(&[
        allow_topic("x-1", Literal, "User:a", Write),
        acl(
            ResourceType::Topic,
            "x-",
            Prefixed,
            "User:a",
            "*",
            Write,
            Permission::Deny
        ),
    ]));
    assert!(!by_type(&[
        allow_topic("x", Literal, "User:a", Write),
        acl(
            ResourceType::Topic,
            "*",
            Literal,
            "User:*",
            "*",
            All,
            Permission::Deny
        ),
    ]));
    assert!(!by_type(&[allow_topic("x", Literal, "User:a", Read)]));
}

#[test]
fn authorized_operations_are_bit_fields_of_codes() {
    let cfg = AuthorizerConfig::default();
    let acls = [allow_topic("t", Literal, "User:a", Read)];
    let p = Principal::user("a");
    let caller = Caller {
        principal: &p,
        host: None,
    };
    let bits = authorizer::authorized_operations(&acls, &cfg, caller, ResourceType::Topic, "t");
    assert_eq!(bits, (1 << 3) | (1 << 8));
    // Kafka's value for every topic operation (a broker without an authorizer)
    assert_eq!(authorizer::all_operations(ResourceType::Topic), 3576);
    assert_eq!(
        authorizer::all_operations(ResourceType::Group),
        (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
    );
}

#[test]
fn filters_select_as_kafka_filters_do() {
    let lit = allow_topic("orders", Literal, "User:a", Read);
    let wild = allow_topic("*", Literal, "User:a", Read);
    let pre = allow_topic("ord", Prefixed, "User:a", Read);
    let f = |pt: PatternType, name: Option<&str>| AclFilter {
        resource_type: ResourceType::Topic,
        name: name.map(String::from),
        pattern_type: pt,
        principal: None,
        host: None,
        operation: AclOperation::Any,
        permission: Permission::Any,
    };
    let m = f(PatternType::Match, Some("orders"));
    assert!(m.matches(&lit) && m.matches(&wild) && m.matches(&pre));
    let l = f(Literal, Some("orders"));
    assert!(l.matches(&lit) && !l.matches(&wild) && !l.matches(&pre));
    let any = f(PatternType::Any, Some("ord"));
    assert!(!any.matches(&lit) && any.matches(&pre));
    assert!(f(PatternType::Any, None).matches(&wild));
    let mut g = f(PatternType::Any, None);
    g.resource_type = ResourceType::Group;
    assert!(!g.matches(&lit));
}

#[test]
fn invalid_bindings_are_named() {
    let mut b = allow_topic("t", Literal, "User:a", Read);
    assert_eq!(b.invalid(), None);
    b.entry.principal = "alice".into();
    assert!(b.invalid().unwrap().contains("principal"));
    let c = acl(
        ResourceType::Cluster,
        "x",
        Literal,
        "User:a",
        "*",
        Alter,
        Permission::Allow,
    );
    assert!(c.invalid().unwrap().contains("kafka-cluster"));
    let set: BTreeSet<_> = [b.clone(), b].into_iter().collect();
    assert_eq!(set.len(), 1);
}

mod changes {
    use super::*;
    use crate::security::acl::changes::*;

    fn wire(b: &AclBinding) -> WireAcl<String> {
        binding_to_wire(b)
    }

    #[test]
    fn creations_are_checked_one_by_one_and_existing_acls_change_nothing() {
        let a = allow_topic("orders", Literal, "User:alice", Read);
        let b = allow_topic("ord", Prefixed, "User:bob", Write);
        let existing: BTreeSet<AclBinding> = [a.clone()].into();
        let mut bad = wire(&b);
        bad.0 = 4; // CLUSTER with a topic's name
        let mut unknown = wire(&b);
        unknown.5 = 0;
        let creations = vec![
            binding_from_wire(wire(&a)),
            binding_from_wire(wire(&b)),
            binding_from_wire(wire(&b)),
            binding_from_wire(bad),
            binding_from_wire(unknown),
        ];
        let (added, results) = plan_create(&existing, &creations);
        assert_eq!(added, vec![b]);
        assert!(results[..3].iter().all(|r| r.is_ok()));
        assert_eq!(
            results[3],
            Err((
                42,
                "The only valid name for the CLUSTER resource is kafka-cluster".into()
            ))
        );
        assert_eq!(results[4].as_ref().unwrap_err().0, 42);
    }

    #[test]
    fn deletions_answer_per_filter_and_remove_each_acl_once() {
        let a = allow_topic("orders", Literal, "User:alice", Read);
        let b = allow_topic("ord", Prefixed, "User:bob", Write);
        // In the set's order: "ord" sorts before "orders".
        let existing = [b.clone(), a.clone()];
        let any = |pt: i8, name: Option<&str>| {
            filter_from_wire((2, name.map(String::from), pt, None, None, 1, 1))
        };
        let filters = vec![
            any(2, Some("orders")),
            any(3, None),
            filter_from_wire((0, None, 1, None, None, 1, 1)),
            filter_from_wire((1, None, 1, None, None, 1, 0)),
        ];
        let (removed, results) = plan_delete(existing.iter(), &filters);
        assert_eq!(removed, vec![b.clone(), a.clone()]);
        assert_eq!(results[0], Ok(vec![b.clone(), a.clone()]));
        assert_eq!(results[1], Ok(vec![a.clone()]));
        assert_eq!(results[2], Err((42, "Unknown patternFilter.".into())));
        assert_eq!(results[3], Err((42, "Unknown entryFilter.".into())));
        let grouped = group_by_pattern([a.clone(), b.clone()]);
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].1, vec![b.entry.clone()]);
    }
}
