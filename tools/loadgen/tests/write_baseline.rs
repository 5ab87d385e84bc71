//! `krabka-loadgen --write-baseline`: the write(2) floor of the capacity
//! cells, run as the binary is run by the side-by-side runner.

use std::process::Command;

use serde_json::Value;

fn loadgen(args: &[&str]) -> (Option<i32>, String) {
    let output =
        Command::new(env!("CARGO_BIN_EXE_krabka-loadgen")).args(args).output().expect("running krabka-loadgen");
    (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn writes_every_batch_once_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let common = ["--partitions", "3", "--record-size", "1000", "--batch-records", "64", "--write-baseline", path];
    let (code, stdout) = loadgen(&[&["--records", "1001", "--compression", "none"][..], &common].concat());
    assert_eq!(code, Some(0), "{stdout}");
    let summary: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["mode"], "write_baseline");
    assert_eq!(summary["records"], 1001);
    // 334, 334 and 333 records: six batches each, the last one partial.
    assert_eq!(summary["batches_written"], 18);
    let bytes = summary["bytes"].as_u64().unwrap();
    assert!((1001 * 1000..1001 * 1100).contains(&bytes), "{bytes} bytes of uncompressed 1000-byte values");
    assert!(summary["cpu_us_per_record"].as_f64().unwrap() > 0.0);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the partition files are removed");

    // Compressible values are written compressed, as a broker would get them.
    let (code, stdout) =
        loadgen(&[&["--records", "1001", "--compression", "lz4", "--payload", "zeros"][..], &common].concat());
    assert_eq!(code, Some(0), "{stdout}");
    let zeros: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(zeros["bytes"].as_u64().unwrap() < bytes / 20, "{zeros}");
}

#[test]
fn a_missing_directory_or_a_broker_option_is_refused() {
    let (code, _) = loadgen(&["--records", "10", "--write-baseline", "/nonexistent/krabka-loadgen-baseline"]);
    assert_eq!(code, Some(2));
    let dir = tempfile::tempdir().unwrap();
    let (code, _) = loadgen(&["--records", "10", "--consume", "--write-baseline", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "--consume needs a broker");
}
