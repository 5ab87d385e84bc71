//! `MetaProperties::read` (krabka-format) over a fuzzed `meta.properties`,
//! and the Java-properties parser under it.
//!
//! Input: the file.
//!
//! Checks, besides never panicking: a file that reads with a non-empty
//! `cluster.id` makes `format_log_dir` for that cluster and node a no-op
//! that returns what was read (`AlreadyFormatted`), and another node id is
//! refused.
#![no_main]

use krabka_format::meta_properties::{format_log_dir, FormatError, FormatOutcome, MetaProperties};
use krabka_protocol_fuzz::scratch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = scratch::subdir("meta_properties");
    let path = dir.join("meta.properties");
    std::fs::write(&path, data).expect("write meta.properties");
    let Ok(Some(meta)) = MetaProperties::read(&dir) else { return };
    if meta.cluster_id.is_empty() {
        return;
    }
    match format_log_dir(&dir, &meta.cluster_id, meta.node_id) {
        Ok(FormatOutcome::AlreadyFormatted(existing)) => assert_eq!(existing, meta),
        other => panic!("format over {meta:?} did {other:?}"),
    }
    let other_node = meta.node_id.wrapping_add(1);
    assert!(
        matches!(format_log_dir(&dir, &meta.cluster_id, other_node), Err(FormatError::AlreadyFormatted { .. })),
        "another node id was not refused"
    );
    assert_eq!(std::fs::read(&path).expect("re-read meta.properties"), data, "the file was rewritten");
});
