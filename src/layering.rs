//! The layers' rule, checked on the sources: nothing in the transport (`net`), the services
//! (`group`, `txn`, `share`, `producer`, `faults`, `registry`) or
//! below them (`cluster`, `log`) imports
//! the handlers (`crate::api`) or the wiring (`crate::broker`). What a lower layer needs from
//! above reaches it as a narrow handle passed in at wiring time (a trait object or a callback).

use std::path::{Path, PathBuf};

/// The folders under src/ held to the rule.
const LOWER: &[&str] = &[
    "net", "group", "txn", "share", "producer", "faults", "registry", "cluster", "log",
];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a line of code (comments aside) names `crate::api` or `crate::broker`.
fn imports_upward(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    ["crate::api", "crate::broker"].iter().any(|m| {
        code.match_indices(m).any(|(at, _)| {
            !code[at + m.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

#[test]
fn lower_layers_do_not_import_api_or_broker() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    for folder in LOWER {
        let mut files = Vec::new();
        rs_files(&src.join(folder), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            if text.lines().any(imports_upward) {
                let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                offenders.push(rel);
            }
        }
    }
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "these files import crate::api or crate::broker: {offenders:?}"
    );
}

#[test]
fn an_import_is_told_from_a_longer_name() {
    assert!(imports_upward("use crate::api::errors;"));
    assert!(imports_upward("    broker: Weak<crate::broker::Broker>,"));
    assert!(!imports_upward("use crate::apis::x;"));
    assert!(!imports_upward("// see crate::broker"));
}
