//! The SCRAM credentials of the cluster (Kafka keeps them in the metadata:
//! UserScramCredentialRecord / RemoveUserScramCredentialRecord), per user and mechanism, and
//! the checks of AlterUserScramCredentials and the answers of DescribeUserScramCredentials
//! with Kafka's errors and messages (ScramControlManager, ScramImage). One owner: the
//! controller holds the store; on one node it persists it in `sluice-metadata`, in a cluster
//! every broker installs the image's credentials when it reconciles. The checks are pure.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use kafka_protocol::ResponseError;

use super::sasl::scram::{MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramMechanism};

pub type CredentialMap = BTreeMap<(String, ScramMechanism), ScramCredential>;

#[derive(Debug, Default)]
pub struct ScramStore {
    creds: RwLock<CredentialMap>,
}

impl ScramStore {
    pub fn get(&self, user: &str, mech: ScramMechanism) -> Option<ScramCredential> {
        self.creds
            .read()
            .unwrap()
            .get(&(user.to_string(), mech))
            .cloned()
    }

    pub fn all(&self) -> CredentialMap {
        self.creds.read().unwrap().clone()
    }

    /// Replaces every credential; true if anything changed.
    pub fn replace_all(&self, all: CredentialMap) -> bool {
        let mut c = self.creds.write().unwrap();
        if *c == all {
            return false;
        }
        *c = all;
        true
    }

    pub fn apply(&self, changes: &[Change]) {
        let mut c = self.creds.write().unwrap();
        apply(&mut c, changes);
    }
}

impl super::sasl::authenticator::Credentials for ScramStore {
    fn scram(&self, user: &str, mech: ScramMechanism) -> Option<ScramCredential> {
        self.get(user, mech)
    }
}

/// One accepted change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Upsert {
        user: String,
        mech: ScramMechanism,
        credential: ScramCredential,
    },
    Delete {
        user: String,
        mech: ScramMechanism,
    },
}

pub fn apply(map: &mut CredentialMap, changes: &[Change]) {
    for c in changes {
        match c {
            Change::Upsert {
                user,
                mech,
                credential,
            } => {
                map.insert((user.clone(), *mech), credential.clone());
            }
            Change::Delete { user, mech } => {
                map.remove(&(user.clone(), *mech));
            }
        }
    }
}

/// A user's result: error code and message (0 and None on success).
pub type UserResult = (String, i16, Option<String>);

pub struct Deletion {
    pub user: String,
    pub mechanism: i8,
}

pub struct Upsertion {
    pub user: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

fn check_name_and_mechanism(user: &str, mechanism: i8) -> Result<ScramMechanism, (i16, String)> {
    if user.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential.code(),
            "Username must not be empty".into(),
        ));
    }
    ScramMechanism::from_code(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism.code(),
        "Unknown SCRAM mechanism".into(),
    ))
}

/// Kafka's AlterUserScramCredentials checks against the current credentials: a user may
/// appear once in a request (deletions and upsertions together), deletions must name an
/// existing credential, upsertions need 4096..=16384 iterations. Returns the changes (all
/// accepted users' at once) and one result per user: the successes first, then the errors.
pub fn plan_alter(
    current: &CredentialMap,
    deletions: &[Deletion],
    upsertions: &[Upsertion],
) -> (Vec<Change>, Vec<UserResult>) {
    let duplicate = || {
        (
            ResponseError::DuplicateResource.code(),
            "A user credential cannot be altered twice in the same request".to_string(),
        )
    };
    let mut errors: HashMap<String, (i16, String)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut deletes: BTreeMap<String, ScramMechanism> = BTreeMap::new();
    let mut upserts: BTreeMap<String, (ScramMechanism, &Upsertion)> = BTreeMap::new();
    for d in deletions {
        if errors.contains_key(&d.user) {
            continue;
        }
        if deletes.remove(&d.user).is_some() {
            errors.insert(d.user.clone(), duplicate());
            order.push(d.user.clone());
            continue;
        }
        match check_name_and_mechanism(&d.user, d.mechanism) {
            Err(e) => {
                errors.insert(d.user.clone(), e);
                order.push(d.user.clone());
            }
            Ok(m) if !current.contains_key(&(d.user.clone(), m)) => {
                errors.insert(
                    d.user.clone(),
                    (
                        ResponseError::ResourceNotFound.code(),
                        "Attempt to delete a user credential that does not exist".into(),
                    ),
                );
                order.push(d.user.clone());
            }
            Ok(m) => {
                deletes.insert(d.user.clone(), m);
            }
        }
    }
    for u in upsertions {
        if errors.contains_key(&u.user) {
            continue;
        }
        if deletes.remove(&u.user).is_some() || upserts.remove(&u.user).is_some() {
            errors.insert(u.user.clone(), duplicate());
            order.push(u.user.clone());
            continue;
        }
        let checked = check_name_and_mechanism(&u.user, u.mechanism).and_then(|m| {
            if u.iterations < MIN_ITERATIONS {
                Err((
                    ResponseError::UnacceptableCredential.code(),
                    "Too few iterations".into(),
                ))
            } else if u.iterations > MAX_ITERATIONS {
                Err((
                    ResponseError::UnacceptableCredential.code(),
                    "Too many iterations".into(),
                ))
            } else {
                Ok(m)
            }
        });
        match checked {
            Err(e) => {
                errors.insert(u.user.clone(), e);
                order.push(u.user.clone());
            }
            Ok(m) => {
                upserts.insert(u.user.clone(), (m, u));
            }
        }
    }
    let mut changes = Vec::new();
    let mut results = Vec::new();
    for (user, mech) in deletes {
        results.push((user.clone(), 0, None));
        changes.push(Change::Delete { user, mech });
    }
    for (user, (mech, u)) in upserts {
        results.push((user.clone(), 0, None));
        changes.push(Change::Upsert {
            credential: ScramCredential::from_salted(
                mech,
                &u.salt,
                &u.salted_password,
                u.iterations,
            ),
            user,
            mech,
        });
    }
    order.dedup();
    for user in order {
        if let Some((code, msg)) = errors.remove(&user) {
            results.push((user, code, Some(msg)));
        }
    }
    (changes, results)
}

/// One user's DescribeUserScramCredentials result: its (mechanism code, iterations) or an
/// error with Kafka's message.
pub type Described = (String, Result<Vec<(i8, i32)>, (i16, String)>);

/// Kafka's ScramImage.describe: every user with a credential when `users` is None or empty,
/// else each named user once (a user named twice: DUPLICATE_RESOURCE; one without
/// credentials: RESOURCE_NOT_FOUND).
pub fn describe(current: &CredentialMap, users: Option<&[String]>) -> Vec<Described> {
    let mut wanted: Vec<(String, bool)> = Vec::new();
    match users {
        None | Some([]) => {
            for (u, _) in current.keys() {
                if !wanted.iter().any(|(w, _)| w == u) {
                    wanted.push((u.clone(), false));
                }
            }
        }
        Some(list) => {
            for u in list {
                match wanted.iter_mut().find(|(w, _)| w == u) {
                    Some(w) => w.1 = true,
                    None => wanted.push((u.clone(), false)),
                }
            }
        }
    }
    wanted
        .into_iter()
        .map(|(user, dup)| {
            if dup {
                let m = format!(
                    "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                );
                return (user, Err((ResponseError::DuplicateResource.code(), m)));
            }
            let infos: Vec<(i8, i32)> = ScramMechanism::ALL
                .iter()
                .filter_map(|m| current.get(&(user.clone(), *m)).map(|c| (m.code(), c.iterations)))
                .collect();
            if infos.is_empty() {
                let m = format!("Attempt to describe a user credential that does not exist: {user}");
                (user, Err((ResponseError::ResourceNotFound.code(), m)))
            } else {
                (user, Ok(infos))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(user: &str, mech: i8, iterations: i32) -> Upsertion {
        Upsertion {
            user: user.into(),
            mechanism: mech,
            iterations,
            salt: b"salt".to_vec(),
            salted_password: b"salted".to_vec(),
        }
    }

    #[test]
    fn alter_checks_as_kafka() {
        let mut current = CredentialMap::new();
        let (changes, results) = plan_alter(
            &current,
            &[Deletion {
                user: "gone".into(),
                mechanism: 1,
            }],
            &[
                up("alice", 1, 4096),
                up("", 1, 4096),
                up("few", 1, 100),
                up("many", 2, 20000),
                up("bad", 9, 4096),
                up("twice", 1, 4096),
                up("twice", 2, 4096),
            ],
        );
        assert_eq!(changes.len(), 1);
        apply(&mut current, &changes);
        assert!(current.contains_key(&("alice".to_string(), ScramMechanism::Sha256)));
        let by: BTreeMap<String, (i16, Option<String>)> =
            results.into_iter().map(|(u, c, m)| (u, (c, m))).collect();
        assert_eq!(by["alice"].0, 0);
        assert_eq!(
            by["gone"].1.as_deref(),
            Some("Attempt to delete a user credential that does not exist")
        );
        assert_eq!(by[""].1.as_deref(), Some("Username must not be empty"));
        assert_eq!(by["few"].1.as_deref(), Some("Too few iterations"));
        assert_eq!(by["many"].1.as_deref(), Some("Too many iterations"));
        assert_eq!(by["bad"].0, ResponseError::UnsupportedSaslMechanism.code());
        assert_eq!(by["twice"].0, ResponseError::DuplicateResource.code());
        let (changes, results) = plan_alter(
            &current,
            &[Deletion {
                user: "alice".into(),
                mechanism: 1,
            }],
            &[],
        );
        assert_eq!(results, vec![("alice".to_string(), 0, None)]);
        apply(&mut current, &changes);
        assert!(current.is_empty());
    }

    #[test]
    fn describe_as_kafka() {
        let mut current = CredentialMap::new();
        let c = ScramCredential::from_salted(ScramMechanism::Sha512, b"s", b"p", 8192);
        current.insert(("alice".into(), ScramMechanism::Sha512), c);
        assert_eq!(
            describe(&current, None),
            vec![("alice".to_string(), Ok(vec![(2, 8192)]))]
        );
        let r = describe(
            &current,
            Some(&["bob".to_string(), "alice".to_string(), "alice".to_string()]),
        );
        assert_eq!(
            r[0].1.as_ref().unwrap_err().1,
            "Attempt to describe a user credential that does not exist: bob"
        );
        assert_eq!(
            r[1].1.as_ref().unwrap_err().0,
            ResponseError::DuplicateResource.code()
        );
        assert_eq!(r.len(), 2);
    }
}
