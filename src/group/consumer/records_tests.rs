//! Encodings checked against the bytes Kafka 4.4's generated record classes write for the
//! same values (`MessageUtil.toCoordinatorTypePrefixedBytes` for keys,
//! `toVersionPrefixedBytes(0, ..)` for values), and round trips.

use std::collections::BTreeSet;

use super::*;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn topic() -> Uuid {
    Uuid::from_u128(0x0102030405060708_090a0b0c0d0e0f10)
}

fn parts(ps: &[i32]) -> Assignment {
    Assignment::from([(topic(), ps.iter().copied().collect::<BTreeSet<i32>>())])
}

#[test]
fn keys_are_kafkas() {
    let g = || "g".to_string();
    let m = || "m".to_string();
    let cases = [
        (Key::GroupEpoch { group: g() }, "0003000167"),
        (
            Key::Member {
                group: g(),
                member: m(),
            },
            "000500016700016d",
        ),
        (Key::TargetEpoch { group: g() }, "0006000167"),
        (
            Key::TargetMember {
                group: g(),
                member: m(),
            },
            "000700016700016d",
        ),
        (
            Key::CurrentAssignment {
                group: g(),
                member: m(),
            },
            "000800016700016d",
        ),
    ];
    for (k, want) in cases {
        let b = encode_key(&k);
        assert_eq!(hex(&b), want, "{k:?}");
        assert_eq!(decode_key(b).unwrap(), Some(k));
    }
    // Offset commits and classic groups are not consumer group records.
    assert_eq!(
        decode_key(Bytes::from_static(b"\x00\x02\x00\x01g")).unwrap(),
        None
    );
}

#[test]
fn group_and_target_epochs_are_kafkas() {
    let v = GroupEpochValue {
        epoch: 7,
        metadata_hash: 0x1122334455667788,
    };
    let b = encode_group_epoch(&v);
    assert_eq!(hex(&b), "0000000000070100081122334455667788");
    assert_eq!(decode_group_epoch(b).unwrap(), v);
    let v = GroupEpochValue {
        epoch: 7,
        metadata_hash: 0,
    };
    assert_eq!(hex(&encode_group_epoch(&v)), "00000000000700");
    let b = encode_target_epoch(9);
    assert_eq!(hex(&b), "00000000000900");
    assert_eq!(decode_target_epoch(b).unwrap(), 9);
}

#[test]
fn members_are_kafkas() {
    let v = MemberValue {
        instance_id: Some("i".into()),
        rack_id: None,
        client_id: "c".into(),
        client_host: "/h".into(),
        subscribed_names: vec!["a".into(), "b".into()],
        subscribed_regex: None,
        rebalance_timeout_ms: 300_000,
        server_assignor: Some("uniform".into()),
        classic: None,
    };
    let b = encode_member(&v);
    assert_eq!(
        hex(&b),
        "00000269000263032f68030261026200000493e008756e69666f726d00"
    );
    assert_eq!(decode_member(b).unwrap(), v);
    let v = MemberValue {
        instance_id: None,
        rack_id: Some("r".into()),
        client_id: "c".into(),
        client_host: "/h".into(),
        subscribed_names: vec![],
        subscribed_regex: Some("x.*".into()),
        rebalance_timeout_ms: 5000,
        server_assignor: None,
        classic: Some(ClassicMetadata {
            session_timeout_ms: 45_000,
            protocols: vec![("range".into(), Bytes::from_static(&[1, 2]))],
        }),
    };
    let b = encode_member(&v);
    assert_eq!(
        hex(&b),
        "00000002720263032f680104782e2a0000138800010011010000afc8020672616e67650301020000"
    );
    assert_eq!(decode_member(b).unwrap(), v);
}

#[test]
fn assignments_are_kafkas() {
    let b = encode_target_member(&parts(&[0, 2]));
    assert_eq!(
        hex(&b),
        "0000020102030405060708090a0b0c0d0e0f100300000000000000020000"
    );
    assert_eq!(decode_target_member(b).unwrap(), parts(&[0, 2]));
    let v = CurrentValue {
        epoch: 5,
        previous_epoch: 4,
        state: MemberState::UnrevokedPartitions,
        assigned: parts(&[1]),
        pending_revocation: parts(&[3, 4]),
    };
    let b = encode_current(&v);
    assert_eq!(
        hex(&b),
        "0000000000050000000401020102030405060708090a0b0c0d0e0f10020000000100020102030405060708090a0b0c0d0e0f100300000003000000040000"
    );
    assert_eq!(decode_current(b).unwrap(), v);
}

#[test]
fn short_or_unknown_values_are_errors() {
    let b = encode_current(&CurrentValue {
        epoch: 1,
        previous_epoch: 0,
        state: MemberState::Stable,
        assigned: parts(&[0]),
        pending_revocation: Assignment::new(),
    });
    for n in 0..b.len() {
        assert!(decode_current(b.slice(..n)).is_err(), "{n} bytes");
    }
    assert!(decode_target_epoch(Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0])).is_err());
    assert!(decode_key(Bytes::from_static(&[0, 5, 0, 1])).is_err());
}
