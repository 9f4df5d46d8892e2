//! The fence helper's statements against `fence/testdata/sql.txt`, the
//! fencing SQL every monolock client sends, byte for byte (the file's header
//! says the format).
#![cfg(feature = "fence-postgres")]

use std::collections::HashMap;
use std::path::Path;

/// The sections of the vectors file by "DIALECT NAME".
fn vectors() -> HashMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fence/testdata/sql.txt");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut vectors = HashMap::new();
    let mut name: Option<String> = None;
    let mut body: Vec<&str> = Vec::new();
    let mut flush = |name: &Option<String>, body: &mut Vec<&str>| {
        if let Some(n) = name {
            let joined = body.join("\n");
            vectors.insert(
                n.clone(),
                joined.strip_suffix('\n').unwrap_or(&joined).to_string(),
            );
        }
        body.clear();
    };
    for line in text.split('\n') {
        if let Some(n) = line.strip_prefix("-- ").and_then(|l| l.strip_suffix(" --")) {
            flush(&name, &mut body);
            name = Some(n.to_string());
        } else if name.is_some() {
            body.push(line);
        }
    }
    flush(&name, &mut body);
    vectors
}

#[test]
fn schema_and_admit_are_the_vectors() {
    let v = vectors();
    assert_eq!(monolock::fence::SCHEMA_POSTGRES, v["postgresql schema"]);
    assert_eq!(monolock::fence::ADMIT_POSTGRES, v["postgresql admit"]);
}
