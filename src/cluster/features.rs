//! Feature versions (KIP-584): the features Kafka 4.4 knows, the levels Sluice supports of
//! each, the levels finalized in a fresh cluster, and UpdateFeatures' decision, pure.
//!
//! Sluice supports a level only where it implements that level's behaviour: every
//! `transaction.version` (0-2: the client picks its transaction protocol from the finalized
//! level, and the coordinator serves each), `metadata.version` only at Kafka 4.4's latest
//! (4.4-IV2, level 33: Sluice's metadata is not Kafka's log, so there is no older format to
//! fall back to), `group.version` 0-1 (level 1: KIP-848 consumer groups), `share.version` 0-1
//! (level 1: share groups, KIP-932; Kafka 4.4 supports 2, the renew acknowledgement of
//! ShareFetch/ShareAcknowledge v2, which kafka-protocol 0.18 cannot decode), and level 0 only
//! of the features whose levels above 0 need what Sluice does not have yet: Streams groups
//! (`streams.version`), eligible leader replicas (`eligible.leader.replicas.version`) and a
//! dynamic controller quorum (`kraft.version`).
//!
//! A level of 0 is not finalized: the feature is left out of the finalized list, as Kafka
//! leaves it out.

use std::collections::BTreeMap;

/// (name, lowest supported level, highest supported level, level finalized in a new cluster)
pub const FEATURES: &[(&str, i16, i16, i16)] = &[
    ("eligible.leader.replicas.version", 0, 0, 0),
    ("group.version", 0, 1, 1),
    ("kraft.version", 0, 0, 0),
    (
        "metadata.version",
        METADATA_VERSION,
        METADATA_VERSION,
        METADATA_VERSION,
    ),
    ("share.version", 0, 1, 1),
    ("streams.version", 0, 0, 0),
    ("transaction.version", 0, 2, 2),
];

/// Kafka 4.4-IV2's `metadata.version` feature level.
pub const METADATA_VERSION: i16 = 33;

/// UpdateFeatures' upgrade types (KIP-778).
pub const UPGRADE: i8 = 1;
pub const SAFE_DOWNGRADE: i8 = 2;
pub const UNSAFE_DOWNGRADE: i8 = 3;

/// The finalized levels above 0, starting from the new-cluster levels and with `overrides`
/// (every level an UpdateFeatures set, 0 included) laid over them.
pub fn finalized(overrides: &BTreeMap<String, i16>) -> BTreeMap<String, i16> {
    FEATURES
        .iter()
        .map(|&(name, _, _, level)| {
            (
                name.to_string(),
                overrides.get(name).copied().unwrap_or(level),
            )
        })
        .filter(|(_, level)| *level > 0)
        .collect()
}

/// The feature levels UpdateFeatures set on one node (persisted in `sluice-metadata`) and
/// how many times they changed (ApiVersions' finalized features epoch grows with it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureLevels {
    pub overrides: BTreeMap<String, i16>,
    pub changes: i64,
}

/// One requested change: feature, new highest level, upgrade type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureUpdate {
    pub feature: String,
    pub level: i16,
    pub upgrade_type: i8,
}

/// Kafka's controller checks of `updates` against the finalized `current` levels (all or
/// nothing; the first failing update gives the error message). Ok: the levels to record.
/// `controller` is the node id Kafka names in its messages.
pub fn decide(
    current: &BTreeMap<String, i16>,
    updates: &[FeatureUpdate],
    controller: i32,
) -> Result<Vec<(String, i16)>, String> {
    let mut out = Vec::new();
    for u in updates {
        let invalid = |why: String| {
            format!(
                "Invalid update version {} for feature {}. {why}",
                u.level, u.feature
            )
        };
        if !matches!(u.upgrade_type, UPGRADE | SAFE_DOWNGRADE | UNSAFE_DOWNGRADE) {
            return Err(invalid(
                "The controller does not support the given upgrade type.".into(),
            ));
        }
        let now = current.get(&u.feature).copied().unwrap_or(0);
        if u.level < 0 {
            return Err(invalid("A feature version cannot be less than 0.".into()));
        }
        match FEATURES.iter().find(|f| f.0 == u.feature) {
            None => {
                return Err(invalid(format!(
                    "Local controller {controller} does not support this feature."
                )));
            }
            Some(&(_, min, max, _)) if u.level < min || u.level > max => {
                return Err(invalid(format!(
                    "Local controller {controller} only supports versions {min}-{max}"
                )));
            }
            Some(_) => {}
        }
        if u.level < now && u.upgrade_type == UPGRADE {
            return Err(invalid(
                "Can't downgrade the version of this feature without setting the upgrade type \
                 to either safe or unsafe downgrade."
                    .into(),
            ));
        }
        if u.level > now && u.upgrade_type != UPGRADE {
            return Err(invalid("Can't downgrade to a newer version.".into()));
        }
        out.retain(|(f, _): &(String, i16)| f != &u.feature);
        out.push((u.feature.clone(), u.level));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(feature: &str, level: i16, t: i8) -> FeatureUpdate {
        FeatureUpdate {
            feature: feature.into(),
            level,
            upgrade_type: t,
        }
    }

    #[test]
    fn a_new_cluster_finalizes_what_kafka_does_where_supported() {
        let f = finalized(&BTreeMap::new());
        assert_eq!(f.get("transaction.version"), Some(&2));
        assert_eq!(f.get("metadata.version"), Some(&33));
        assert_eq!(f.get("group.version"), Some(&1));
        assert_eq!(f.get("streams.version"), None);
        let mut o = BTreeMap::new();
        o.insert("transaction.version".to_string(), 0);
        assert_eq!(finalized(&o).get("transaction.version"), None);
    }

    #[test]
    fn updates_are_checked_as_kafkas_controller_checks_them() {
        let cur = finalized(&BTreeMap::new());
        assert_eq!(
            decide(&cur, &[up("transaction.version", 1, SAFE_DOWNGRADE)], 1),
            Ok(vec![("transaction.version".to_string(), 1)])
        );
        assert_eq!(
            decide(&cur, &[up("transaction.version", 3, UPGRADE)], 1),
            Err(
                "Invalid update version 3 for feature transaction.version. Local controller 1 \
                 only supports versions 0-2"
                    .into()
            )
        );
        assert_eq!(
            decide(&cur, &[up("nosuch.version", 1, UPGRADE)], 7),
            Err(
                "Invalid update version 1 for feature nosuch.version. Local controller 7 does \
                 not support this feature."
                    .into()
            )
        );
        let e = decide(&cur, &[up("transaction.version", 1, UPGRADE)], 1).unwrap_err();
        assert!(
            e.ends_with("without setting the upgrade type to either safe or unsafe downgrade.")
        );
        let e = decide(&cur, &[up("streams.version", 1, UPGRADE)], 1).unwrap_err();
        assert!(e.ends_with("only supports versions 0-0"), "{e}");
        assert!(decide(&cur, &[up("metadata.version", 30, SAFE_DOWNGRADE)], 1).is_err());
        let e = decide(&cur, &[up("transaction.version", -1, SAFE_DOWNGRADE)], 1).unwrap_err();
        assert!(e.ends_with("A feature version cannot be less than 0."));
        let e = decide(&cur, &[up("transaction.version", 1, 9)], 1).unwrap_err();
        assert!(e.ends_with("does not support the given upgrade type."));
        let mut low = cur.clone();
        low.insert("transaction.version".into(), 1);
        let e = decide(&low, &[up("transaction.version", 2, SAFE_DOWNGRADE)], 1).unwrap_err();
        assert!(e.ends_with("Can't downgrade to a newer version."));
        // All or nothing: one bad update refuses the others.
        assert!(
            decide(
                &cur,
                &[
                    up("transaction.version", 1, SAFE_DOWNGRADE),
                    up("streams.version", 1, UPGRADE)
                ],
                1
            )
            .is_err()
        );
        // The same level again is accepted (no change).
        assert_eq!(
            decide(&cur, &[up("transaction.version", 2, UPGRADE)], 1),
            Ok(vec![("transaction.version".to_string(), 2)])
        );
    }
}
