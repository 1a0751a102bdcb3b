//! Reaching a group's or a transactional id's coordinator as clients do: FindCoordinator
//! first, then the request, both retried while the answer is one a client retries through
//! (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS). Under the
//! metadata quorum a coordinator loads its partition once the metadata image makes this node
//! its leader, so right after start-up or the internal topic's creation there is a short
//! window that Kafka's clients wait through the same way.

use std::time::{Duration, Instant};

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::Client;

/// FindCoordinator's key type of a consumer group.
pub const GROUP: i8 = 0;
/// FindCoordinator's key type of a transactional id.
pub const TRANSACTION: i8 = 1;

/// The answers a client retries a coordinator request through.
pub const RETRIABLE: [i16; 3] = [
    E::NotCoordinator.code(),
    E::CoordinatorNotAvailable.code(),
    E::CoordinatorLoadInProgress.code(),
];

const ATTEMPTS: u32 = 1200;
const WITHIN: Duration = Duration::from_secs(60);
const PAUSE: Duration = Duration::from_millis(50);

/// Repeats `attempt` while its error code is one of `retriable`, every 50 ms, at most 1,200
/// times and for at most 60 s; its last answer (the caller checks it).
pub fn retry_while<T>(retriable: &[i16], mut attempt: impl FnMut() -> (i16, T)) -> (i16, T) {
    let deadline = Instant::now() + WITHIN;
    let mut left = ATTEMPTS;
    loop {
        let (code, t) = attempt();
        left -= 1;
        if !retriable.contains(&code) || left == 0 || Instant::now() >= deadline {
            return (code, t);
        }
        std::thread::sleep(PAUSE);
    }
}

/// FindCoordinator v4 for one `key` of `key_type`: its error code.
pub fn find(c: &mut Client, key_type: i8, key: &str) -> i16 {
    let mut r = FindCoordinatorRequest::default();
    r.key_type = key_type;
    r.coordinator_keys = vec![StrBytes::from_string(key.to_string())];
    let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &r);
    resp.coordinators[0].error_code
}

/// `request` (answering its error code and its response) sent to `key`'s coordinator as a
/// client sends it: after FindCoordinator, and again (FindCoordinator included) while
/// either answers a [`RETRIABLE`] error, within [`retry_while`]'s bounds. Any other answer
/// of FindCoordinator is left for the request itself to meet. Fails with the
/// last error if the coordinator is still not serving then; otherwise answers the
/// request's response, whatever its error, for the caller to check.
pub fn call<R>(
    c: &mut Client,
    key_type: i8,
    key: &str,
    mut request: impl FnMut(&mut Client) -> (i16, R),
) -> R {
    let (code, r) = retry_while(&RETRIABLE, || {
        let found = find(c, key_type, key);
        if RETRIABLE.contains(&found) {
            return (found, None);
        }
        let (code, r) = request(c);
        (code, Some(r))
    });
    assert!(
        !RETRIABLE.contains(&code),
        "the coordinator of {key:?} still answers error {code} within the retry bounds"
    );
    r.expect("a response once FindCoordinator answered")
}
