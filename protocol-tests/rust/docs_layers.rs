//! docs/layers.svg is generated from the sources by scripts/layers; this keeps the committed
//! diagram equal to what the code gives, so the picture of the layers cannot drift.

use std::process::Command;

#[test]
fn layers_diagram_matches_the_sources() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/layers"))
        .arg("--check")
        .output()
        .expect("python3 runs scripts/layers");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
