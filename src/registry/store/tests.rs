use super::*;

fn avro(schema: &str) -> Submitted {
    Submitted {
        schema: schema.into(),
        ..Default::default()
    }
}

/// Registers and applies, as the shell does; the id.
fn register(st: &mut Store, subject: &str, schema: &str) -> Result<i32, Error> {
    let r = st.register(subject, &avro(schema))?;
    if let Some(rec) = r.record {
        st.apply(rec);
    }
    Ok(r.id)
}

const V1: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
const V2: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
const BAD: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}"#;

#[test]
fn registry_store_ids_versions_and_identity() {
    let mut st = Store::default();
    assert_eq!(register(&mut st, "a", V1), Ok(1));
    // The same schema again (whitespace aside): the same id, no new version.
    let spaced = V1.replace(',', " , ");
    assert_eq!(st.register("a", &avro(&spaced)).unwrap().record, None);
    assert_eq!(register(&mut st, "a", V2), Ok(2));
    // Under another subject the same schema keeps its id, at version 1 there.
    assert_eq!(register(&mut st, "b", V1), Ok(1));
    assert_eq!(st.versions("a", false).unwrap(), vec![1, 2]);
    assert_eq!(st.version("a", Which::Latest, false).unwrap().id, 2);
    assert_eq!(
        st.id_versions(1, false).unwrap(),
        vec![("a".into(), 1), ("b".into(), 1)]
    );
    assert_eq!(st.subjects(false), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(st.lookup("a", &avro(V2), false).unwrap().version, 2);
    assert_eq!(st.lookup("a", &avro(BAD), false).unwrap_err().code, 40403);
    assert_eq!(st.lookup("zz", &avro(V1), false).unwrap_err().code, 40401);
    assert_eq!(
        st.version("a", Which::Number(9), false).unwrap_err().code,
        40402
    );
    assert_eq!(st.by_id(77).unwrap_err().code, 40403);
    assert_eq!(Which::parse("0").unwrap_err().code, 42202);
    assert_eq!(Which::parse("x").unwrap_err().code, 42202);
    assert_eq!(st.register("a", &avro("{oops")).unwrap_err().code, 42201);
}

#[test]
fn registry_store_compatibility_levels() {
    let mut st = Store::default();
    register(&mut st, "a", V1).unwrap();
    // BACKWARD by default: a new field without a default is refused with 409.
    let e = register(&mut st, "a", BAD).unwrap_err();
    assert_eq!((e.status, e.code), (409, 409));
    assert!(
        e.message.contains("compatibility: 'BACKWARD'"),
        "{}",
        e.message
    );
    let (_, rec) = st.set_config(Some("a"), "forward").unwrap();
    st.apply(rec);
    assert_eq!(st.config(Some("a"), false), Ok("FORWARD"));
    assert_eq!(st.config(Some("b"), false).unwrap_err().code, 40408);
    assert_eq!(st.config(Some("b"), true), Ok("BACKWARD"));
    assert_eq!(register(&mut st, "a", BAD), Ok(2));
    assert_eq!(st.set_config(None, "sideways").unwrap_err().code, 42203);
    let (was, rec) = st.delete_config(Some("a")).unwrap();
    assert_eq!(was, "FORWARD");
    st.apply(rec);
    assert_eq!(st.level_of(Some("a")), "BACKWARD");
}

#[test]
fn registry_store_soft_and_hard_delete() {
    let mut st = Store::default();
    register(&mut st, "a", V1).unwrap();
    register(&mut st, "a", V2).unwrap();
    // Hard delete needs a soft delete first.
    assert_eq!(
        st.delete_version("a", Which::Number(1), true)
            .unwrap_err()
            .code,
        40407
    );
    let (v, rec) = st.delete_version("a", Which::Number(1), false).unwrap();
    assert_eq!(v, 1);
    st.apply(rec);
    assert_eq!(
        st.delete_version("a", Which::Number(1), false)
            .unwrap_err()
            .code,
        40406
    );
    assert_eq!(st.versions("a", false).unwrap(), vec![2]);
    assert_eq!(st.versions("a", true).unwrap(), vec![1, 2]);
    // A soft-deleted version's id still resolves (consumers read old records).
    assert!(st.by_id(1).is_ok());
    let (_, rec) = st.delete_version("a", Which::Number(1), true).unwrap();
    st.apply(rec);
    assert_eq!(st.by_id(1).unwrap_err().code, 40403);
    assert_eq!(st.delete_subject("a", true).unwrap_err().code, 40405);
    let (vs, recs) = st.delete_subject("a", false).unwrap();
    assert_eq!(vs, vec![2]);
    for r in recs {
        st.apply(r);
    }
    assert_eq!(st.versions("a", false).unwrap_err().code, 40401);
    assert_eq!(st.delete_subject("a", false).unwrap_err().code, 40404);
    assert_eq!(st.subjects(true), vec!["a".to_string()]);
    let (vs, recs) = st.delete_subject("a", true).unwrap();
    assert_eq!(vs, vec![2]);
    for r in recs {
        st.apply(r);
    }
    assert!(st.subjects(true).is_empty());
    // A new version after a deleted one keeps counting (the highest stored plus one).
    register(&mut st, "c", V1).unwrap();
    let (_, rec) = st.delete_version("c", Which::Latest, false).unwrap();
    st.apply(rec);
    register(&mut st, "c", V1).unwrap();
    assert_eq!(st.versions("c", false).unwrap(), vec![2]);
}

#[test]
fn registry_store_references_and_modes() {
    let mut st = Store::default();
    let other = r#"{"type":"record","name":"Other","namespace":"a","fields":[]}"#;
    register(&mut st, "other", other).unwrap();
    let uses = Submitted {
        schema: r#"{"type":"record","name":"R","fields":[{"name":"o","type":"a.Other"}]}"#.into(),
        references: vec![Reference {
            name: "a.Other".into(),
            subject: "other".into(),
            version: 1,
        }],
        ..Default::default()
    };
    let r = st.register("uses", &uses).unwrap();
    st.apply(r.record.unwrap());
    assert_eq!(st.referenced_by("other", 1), vec![2]);
    assert_eq!(
        st.delete_version("other", Which::Number(1), false)
            .unwrap_err()
            .code,
        42206
    );
    let missing = Submitted {
        references: vec![Reference {
            name: "a.Other".into(),
            subject: "other".into(),
            version: 5,
        }],
        ..uses.clone()
    };
    assert_eq!(st.register("uses", &missing).unwrap_err().code, 42201);

    let (_, rec) = st.set_mode(None, "readonly", false).unwrap();
    st.apply(rec);
    assert_eq!(st.mode(None, false), Ok("READONLY"));
    assert_eq!(st.register("x", &avro(V1)).unwrap_err().code, 42205);
    assert_eq!(
        st.set_mode(None, "sideways", false).unwrap_err().code,
        42204
    );
    assert_eq!(st.set_mode(None, "IMPORT", false).unwrap_err().code, 42205);
    let (_, rec) = st.set_mode(Some("fresh"), "IMPORT", false).unwrap();
    st.apply(rec);
    // IMPORT: the id and version given are kept.
    let imported = Submitted {
        id: Some(100),
        version: Some(7),
        ..avro(V2)
    };
    let r = st.register("fresh", &imported).unwrap();
    st.apply(r.record.unwrap());
    assert_eq!(st.version("fresh", Which::Latest, false).unwrap().id, 100);
    assert_eq!(st.versions("fresh", false).unwrap(), vec![7]);
    let clash = Submitted {
        id: Some(100),
        ..avro(V1)
    };
    assert_eq!(st.register("fresh", &clash).unwrap_err().code, 42207);
}
