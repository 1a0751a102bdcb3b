use std::time::Duration;

use serde_json::json;

use super::*;

fn spec(v: serde_json::Value) -> Spec {
    Spec::from_json(&v).unwrap()
}

fn err(v: serde_json::Value) -> String {
    Spec::from_json(&v).unwrap_err()
}

fn no_topic(_: &str, _: Option<i32>) -> bool {
    panic!("asked about a topic")
}

#[test]
fn names_of_apis_and_errors() {
    assert_eq!(api_key_by_name("Produce"), Some(0));
    assert_eq!(api_key_by_name("JOIN_GROUP"), Some(11));
    assert_eq!(api_key_by_name("findcoordinator"), Some(10));
    assert_eq!(api_key_by_name("Nope"), None);
    assert_eq!(api_name(1).as_deref(), Some("Fetch"));
    assert_eq!(api_name(-3), None);
    assert_eq!(error_by_name("NOT_LEADER_OR_FOLLOWER"), Some(6));
    assert_eq!(error_by_name("RequestTimedOut"), Some(7));
    assert_eq!(error_by_name("COORDINATOR_LOAD_IN_PROGRESS"), Some(14));
    assert_eq!(error_by_name("UNKNOWN_SERVER_ERROR"), Some(-1));
    assert_eq!(error_by_name("NONE"), None);
    assert_eq!(error_by_name("NO_SUCH_ERROR"), None);
    assert_eq!(error_name(1), "OFFSET_OUT_OF_RANGE");
    assert_eq!(error_name(0), "NONE");
    assert_eq!(error_name(9999), "UNKNOWN_9999");
    assert_eq!(error_by_name("UNKNOWN_9999"), None);
}

#[test]
fn specs_are_read_with_their_defaults() {
    let s = spec(json!({"api_key": "Produce", "kind": "error", "error": "NOT_LEADER_OR_FOLLOWER"}));
    assert_eq!(s.api_key, 0);
    assert_eq!(s.action, Action::Error(6));
    assert_eq!(s.count, Some(1));
    assert_eq!(s.filter, Filter::default());

    let s = spec(json!({"api_key": 1, "kind": "delay", "delay_ms": 250, "client_id": "c"}));
    assert_eq!(s.action, Action::Delay(Duration::from_millis(250)));
    assert_eq!(s.count, None);
    assert_eq!(s.filter.client_id.as_deref(), Some("c"));

    let s = spec(
        json!({"api_key": 0, "kind": "close", "when": "after", "count": 3,
                        "topic": "t", "partition": 2}),
    );
    assert_eq!(s.action, Action::Close(When::AfterApply));
    assert_eq!(s.count, Some(3));
    assert_eq!(s.filter.partition, Some(2));
    assert_eq!(
        spec(json!({"api_key": 0, "kind": "close"})).action,
        Action::Close(When::BeforeApply)
    );
    assert_eq!(
        spec(json!({"api_key": 0, "kind": "error", "error": 7, "count": null})).count,
        None
    );
}

#[test]
fn bad_specs_say_what_is_wrong() {
    assert!(err(json!([])).contains("object"));
    assert!(err(json!({"kind": "error"})).contains("api_key is missing"));
    assert!(err(json!({"api_key": 999, "kind": "error", "error": 6})).contains("not a Kafka API"));
    assert!(
        err(json!({"api_key": "Nope", "kind": "error", "error": 6})).contains("not a Kafka API")
    );
    assert!(err(json!({"api_key": 0, "kind": "explode"})).contains("kind"));
    assert!(err(json!({"api_key": 0, "kind": "error"})).contains("error is missing"));
    assert!(err(json!({"api_key": 0, "kind": "error", "error": 0})).contains("not an error"));
    assert!(
        err(json!({"api_key": 0, "kind": "error", "error": "BAD"})).contains("not a Kafka error")
    );
    assert!(err(json!({"api_key": 0, "kind": "delay"})).contains("delay_ms"));
    assert!(err(json!({"api_key": 0, "kind": "close", "when": "later"})).contains("before"));
    assert!(
        err(json!({"api_key": 0, "kind": "delay", "delay_ms": 1, "error": 6})).contains("only for")
    );
    assert!(err(json!({"api_key": 0, "kind": "close", "partition": 1})).contains("needs topic"));
    assert!(err(json!({"api_key": 0, "kind": "close", "count": 0})).contains("count"));
    assert!(err(json!({"api_key": 0, "kind": "close", "colour": 1})).contains("unknown field"));
}

#[test]
fn nothing_is_added_when_injection_is_off() {
    let r = Registry::new(false);
    assert!(!r.enabled());
    assert!(
        r.add(spec(json!({"api_key": 0, "kind": "close"})))
            .is_none()
    );
    assert!(r.idle());
    assert!(r.list().is_empty());
}

#[test]
fn a_fault_fires_count_times_then_stays_listed_as_spent() {
    let r = Registry::new(true);
    assert!(r.idle());
    let f = r
        .add(spec(
            json!({"api_key": 0, "kind": "error", "error": 7, "count": 2}),
        ))
        .unwrap();
    assert_eq!(f.id, 1);
    assert!(!r.idle());
    // Another key passes untouched.
    assert_eq!(r.fire(1, None, &mut no_topic), Fired::default());
    for _ in 0..2 {
        let got = r.fire(0, None, &mut no_topic);
        assert_eq!(got.outcome, Some(Action::Error(7)));
        assert_eq!(got.delay, None);
    }
    assert_eq!(r.fire(0, None, &mut no_topic), Fired::default());
    assert!(r.idle());
    let listed = r.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].fired, 2);
    let j = listed[0].to_json();
    assert_eq!(j["remaining"], 0);
    assert_eq!(j["error"], "REQUEST_TIMED_OUT");
    assert_eq!(j["api"], "Produce");
}

#[test]
fn filters_on_client_id_topic_and_partition() {
    let r = Registry::new(true);
    r.add(spec(
        json!({"api_key": 0, "kind": "error", "error": 6, "count": null,
                      "topic": "t", "partition": 1, "client_id": "me"}),
    ));
    let mut asked = Vec::new();
    let mut touches = |t: &str, p: Option<i32>| {
        asked.push((t.to_string(), p));
        t == "t" && p == Some(1)
    };
    assert_eq!(r.fire(0, Some("other"), &mut touches).outcome, None);
    assert_eq!(r.fire(0, None, &mut touches).outcome, None);
    assert_eq!(
        r.fire(0, Some("me"), &mut touches).outcome,
        Some(Action::Error(6))
    );
    // The topic is asked about only once the client id matched.
    assert_eq!(asked, vec![("t".to_string(), Some(1))]);
    let mut elsewhere = |_: &str, _: Option<i32>| false;
    assert_eq!(r.fire(0, Some("me"), &mut elsewhere).outcome, None);
    assert_eq!(r.list()[0].fired, 1);
}

#[test]
fn one_delay_and_one_outcome_fire_together_oldest_first() {
    let r = Registry::new(true);
    r.add(spec(
        json!({"api_key": 0, "kind": "delay", "delay_ms": 10, "count": 1}),
    ));
    r.add(spec(
        json!({"api_key": 0, "kind": "delay", "delay_ms": 20, "count": 1}),
    ));
    r.add(spec(
        json!({"api_key": 0, "kind": "close", "when": "after"}),
    ));
    r.add(spec(json!({"api_key": 0, "kind": "error", "error": 6})));
    let first = r.fire(0, None, &mut no_topic);
    assert_eq!(first.delay, Some(Duration::from_millis(10)));
    assert_eq!(first.outcome, Some(Action::Close(When::AfterApply)));
    let second = r.fire(0, None, &mut no_topic);
    assert_eq!(second.delay, Some(Duration::from_millis(20)));
    assert_eq!(second.outcome, Some(Action::Error(6)));
    assert_eq!(r.fire(0, None, &mut no_topic), Fired::default());
    let fired: Vec<u64> = r.list().iter().map(|f| f.fired).collect();
    assert_eq!(fired, vec![1, 1, 1, 1]);
}

#[test]
fn faults_are_removed_one_or_all() {
    let r = Registry::new(true);
    let a = r.add(spec(json!({"api_key": 0, "kind": "close"}))).unwrap();
    let b = r.add(spec(json!({"api_key": 1, "kind": "close"}))).unwrap();
    assert!(r.remove(a.id));
    assert!(!r.remove(a.id));
    assert_eq!(
        r.list().iter().map(|f| f.id).collect::<Vec<_>>(),
        vec![b.id]
    );
    assert_eq!(r.clear(), 1);
    assert!(r.idle());
    // Ids are not reused.
    assert_eq!(
        r.add(spec(json!({"api_key": 0, "kind": "close"})))
            .unwrap()
            .id,
        3
    );
}

#[test]
fn down_closes_every_request_for_its_duration() {
    let s = spec(json!({"kind": "down", "duration_ms": 1000}));
    assert_eq!(s.api_key, ANY_KEY);
    assert_eq!(s.action, Action::Close(When::BeforeApply));
    assert_eq!(s.count, None);
    assert_eq!(s.lasts, Some(Duration::from_millis(1000)));
    assert!(err(json!({"kind": "down"})).contains("duration_ms is missing"));
    assert!(
        err(json!({"api_key": "*", "kind": "error", "error": 6})).contains("names its api_key")
    );
    let r = Registry::new(true);
    let t0 = std::time::Instant::now();
    let f = r.add_at(s, t0).unwrap();
    assert_eq!(f.to_json()["api"], "*");
    for key in [0, 1, 18] {
        let got = r.fire_at(key, None, &mut no_topic, t0 + Duration::from_millis(999));
        assert_eq!(got.outcome, Some(Action::Close(When::BeforeApply)));
    }
    let later = t0 + Duration::from_millis(1000);
    assert_eq!(r.fire_at(0, None, &mut no_topic, later), Fired::default());
    assert!(r.idle());
    assert_eq!(r.list()[0].fired, 3);
    // Any kind may last a while.
    let d = spec(json!({"api_key": "*", "kind": "delay", "delay_ms": 5, "duration_ms": 10}));
    assert_eq!(d.lasts, Some(Duration::from_millis(10)));
}

#[test]
fn a_down_node_refuses_new_connections_while_live() {
    let r = Registry::new(true);
    let t0 = std::time::Instant::now();
    assert!(!r.down_at(t0));
    // A close of one key, or with a count, or for one client, is no node down.
    r.add_at(
        spec(json!({"api_key": "Produce", "kind": "close", "count": null})),
        t0,
    );
    r.add_at(spec(json!({"api_key": "*", "kind": "close"})), t0);
    r.add_at(
        spec(json!({"kind": "down", "duration_ms": 50, "client_id": "c"})),
        t0,
    );
    assert!(!r.down_at(t0));
    r.add_at(spec(json!({"kind": "down", "duration_ms": 50})), t0);
    assert!(r.down_at(t0 + Duration::from_millis(49)));
    assert!(!r.down_at(t0 + Duration::from_millis(50)));
}

#[test]
fn node_faults_are_read_and_never_fire_on_requests() {
    let m = spec(json!({"kind": "move_leader", "topic": "t", "partition": 2, "to": 3}));
    assert_eq!(m.action, Action::MoveLeader(Some(3)));
    assert_eq!(
        (m.filter.topic.as_deref(), m.filter.partition),
        (Some("t"), Some(2))
    );
    assert_eq!(m.count, Some(1));
    let any = spec(json!({"kind": "move_leader", "topic": "t", "partition": 0}));
    assert_eq!(any.action, Action::MoveLeader(None));
    assert!(err(json!({"kind": "move_leader", "topic": "t"})).contains("topic and partition"));
    assert!(
        err(json!({"kind": "move_leader", "topic": "t", "partition": 0, "to": -1}))
            .contains("broker id")
    );
    assert!(err(json!({"kind": "isolate", "to": 2})).contains("only for kind"));
    assert!(err(json!({"kind": "isolate", "api_key": "Produce"})).contains("acts on the node"));
    assert!(err(json!({"kind": "isolate", "topic": "t"})).contains("whole node"));
    assert!(
        err(json!({"kind": "move_leader", "topic": "t", "partition": 0, "duration_ms": 5}))
            .contains("fires once")
    );
    let i = spec(json!({"kind": "isolate", "duration_ms": 100}));
    assert_eq!((i.action, i.count), (Action::Isolate, None));

    let r = Registry::new(true);
    let t0 = std::time::Instant::now();
    let moved = r.add_at(m, t0).unwrap();
    let cut = r.add_at(i, t0).unwrap();
    assert!(r.idle(), "node faults leave the request path alone");
    let mut any_topic = |_: &str, _: Option<i32>| true;
    assert_eq!(r.fire_at(0, None, &mut any_topic, t0), Fired::default());
    r.fired(moved.id);
    r.fired(cut.id);
    let listed = r.list();
    assert_eq!(listed[0].to_json()["kind"], "move_leader");
    assert_eq!(listed[0].to_json()["to"], 3);
    assert!(listed[0].to_json().get("api_key").is_none());
    assert!(!listed[0].live_at(t0), "a leader move fires once");
    assert_eq!(listed[1].fired, 1);
    assert!(r.isolating_at(t0 + Duration::from_millis(99)));
    assert!(!r.isolating_at(t0 + Duration::from_millis(100)));
    assert!(r.take(cut.id).is_some());
    assert!(!r.isolating_at(t0));
}
