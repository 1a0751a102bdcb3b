//! API keys and error codes by name, as faults are written: an API by its name in either of
//! Kafka's spellings (`Produce`, `PRODUCE`; `JoinGroup`, `JOIN_GROUP`), an error by its
//! `Errors` name (`NOT_LEADER_OR_FOLLOWER`).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;

/// The highest API key and error code looked at when matching names.
const MAX_API_KEY: i16 = 200;
const MAX_ERROR_CODE: i16 = 200;

/// Letters and digits only, lower case: how names are compared.
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The API's name (`Produce`), if `key` is a Kafka API key.
pub fn api_name(key: i16) -> Option<String> {
    ApiKey::try_from(key).ok().map(|k| format!("{k:?}"))
}

/// The API key named `name` (`Produce`, `PRODUCE`, `join_group`).
pub fn api_key_by_name(name: &str) -> Option<i16> {
    let want = squash(name);
    (0..=MAX_API_KEY).find(|&k| api_name(k).is_some_and(|n| squash(&n) == want))
}

/// Kafka's name of error `code` (`NOT_LEADER_OR_FOLLOWER`; `UNKNOWN_<code>` for a code
/// Kafka does not define).
pub fn error_name(code: i16) -> String {
    crate::metrics::error_name(code)
}

/// The error code named `name` (`NOT_LEADER_OR_FOLLOWER`, `NotLeaderOrFollower`).
pub fn error_by_name(name: &str) -> Option<i16> {
    let want = squash(name);
    (-1..=MAX_ERROR_CODE)
        .filter(|&c| c != 0)
        .filter(|&c| {
            !matches!(
                ResponseError::try_from_code(c),
                Some(ResponseError::Unknown(_))
            )
        })
        .find(|&c| squash(&error_name(c)) == want)
}
