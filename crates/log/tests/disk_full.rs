//! A disk that refuses writes fails the append with a storage error (the
//! broker's KAFKA_STORAGE_ERROR), and the log stays readable and consistent:
//! a real ENOSPC on a small tmpfs (needs root to mount; without it the
//! tests fail unless KRABKA_SKIP_TMPFS_TESTS=1 skips them), and a file-size limit, which makes write(2) fail with
//! EFBIG as a full disk fails with ENOSPC.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use krabka_log::{LogConfig, PartitionLog};

/// Checks the writer's report: the append failed with a storage error after
/// some records, all of which it read back. Returns that record count.
fn check_report(output: &Output) -> i64 {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "writer failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let error = stdout.lines().find(|l| l.starts_with("error ")).expect("the append must fail");
    assert!(error.contains("storage error"), "{error}");
    let readable = stdout.lines().find(|l| l.starts_with("readable ")).expect("the log must be read back");
    let parts: Vec<&str> = readable.split_whitespace().collect();
    assert_eq!(parts[1], parts[3], "{readable}");
    let records = parts[1].parse::<i64>().unwrap();
    assert!(records > 0);
    records
}

fn writer(root: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_log-crash-writer"));
    command.args([root.to_str().unwrap(), "fill", "100000"]);
    command
}

#[test]
fn a_refused_write_fails_the_append_and_leaves_the_log_readable() {
    let root = tempfile::tempdir().unwrap();
    let mut command = writer(root.path());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            // Ignore SIGXFSZ so the write returns EFBIG instead of killing us.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit { rlim_cur: 40 * 1024, rlim_max: 40 * 1024 };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    check_report(&command.output().unwrap());
}

/// Unmounts the tmpfs however the test ends.
struct Mount<'a>(&'a Path);

impl Drop for Mount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn enospc_on_a_full_tmpfs_fails_the_append_and_the_log_reopens() {
    let root = tempfile::tempdir().unwrap();
    let Some(mount_point) = small_tmpfs(root.path()) else { return };
    let _mount = Mount(&mount_point);
    let records = check_report(&writer(&mount_point).output().unwrap());
    // The disk is still full: the log opens after the "crash" (the writer
    // never closed it) and holds every record it acknowledged.
    let dir = mount_point.join("crash-0");
    let config = LogConfig { segment_index_bytes: 8192, ..LogConfig::default() };
    let (log, _) = PartitionLog::open(&dir, config, 0, 0, false, 0).unwrap();
    assert_eq!(log.log_end_offset(), records);
    log.verify_indexes().unwrap();
}

/// Set to skip the tests that need to mount a tmpfs (they need root).
const SKIP_TMPFS: &str = "KRABKA_SKIP_TMPFS_TESTS";

/// Mounts a 1 MiB tmpfs under `root`. Without root the test fails (a
/// disk-full test that quietly passes would prove nothing) unless
/// `KRABKA_SKIP_TMPFS_TESTS=1` asks to skip it, which it then says.
fn small_tmpfs(root: &Path) -> Option<std::path::PathBuf> {
    let mount_point = root.join("small");
    std::fs::create_dir(&mount_point).unwrap();
    let why = match Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"]).arg(&mount_point).output() {
        Ok(out) if out.status.success() => return Some(mount_point),
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => format!("cannot run mount: {e}"),
    };
    if std::env::var_os(SKIP_TMPFS).is_some_and(|v| v == "1") {
        eprintln!("SKIPPED ({SKIP_TMPFS}=1): cannot mount a 1 MiB tmpfs: {why}");
        return None;
    }
    panic!("cannot mount a 1 MiB tmpfs (needs root): {why}; set {SKIP_TMPFS}=1 to skip the disk-full tests");
}

const INDEX_CHILD_DIR: &str = "KRABKA_TEST_INDEX_FULL_DIR";

/// The child's part: an append whose data fits in an already allocated
/// page while its offset index entry starts a new page, on a full disk.
fn append_when_only_the_index_needs_a_page(dir: &Path) {
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
    let batch = |value_bytes: usize| {
        let value = vec![b'v'; value_bytes];
        let mut builder = RecordBatchBuilder::new(Compression::None);
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
        builder.build().unwrap().into_bytes()
    };
    // An index entry for every batch but the first: after 513 appends the
    // offset index holds 512 entries (a full 4 KiB page), and the 514th
    // append's entry opens the next page. Pick a batch size whose 514th
    // copy fits in the data page the 513th left partly filled.
    let (page, appended) = (4096usize, 513usize);
    let size = (20..400)
        .map(|v| batch(v).len())
        .find(|&b| (appended * b) % page != 0 && (appended * b) % page + b <= page)
        .expect("a batch size");
    let value_bytes = (20..400).find(|&v| batch(v).len() == size).unwrap();
    let config = LogConfig { index_interval_bytes: 0, segment_index_bytes: 64 * 1024, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(&dir.join("full-0"), config, 0, 0, true, 0).unwrap();
    for _ in 0..appended {
        log.append_as_leader(&batch(value_bytes), 0, 0).unwrap();
    }
    // Fill the disk.
    let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
    while std::io::Write::write_all(&mut filler, &[0u8; 4096]).is_ok() {}
    drop(filler);
    let error = log.append_as_leader(&batch(value_bytes), 0, 0).expect_err("the disk is full");
    assert!(error.to_string().contains("storage error"), "{error}");
    assert_eq!(log.log_end_offset(), appended as i64);
    assert_eq!(
        log.read(0, 1 << 20, appended as i64, true).unwrap().slice.unwrap().read_to_bytes().unwrap().len(),
        appended * size
    );
    // Room again: appends go on.
    std::fs::remove_file(dir.join("filler")).unwrap();
    log.append_as_leader(&batch(value_bytes), 0, 0).unwrap();
    log.verify_indexes().unwrap();
    println!("CHILD-OK");
}

#[test]
fn a_full_disk_fails_the_append_before_an_index_store_can_fault() {
    if let Some(dir) = std::env::var_os(INDEX_CHILD_DIR) {
        append_when_only_the_index_needs_a_page(Path::new(&dir));
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let Some(mount_point) = small_tmpfs(root.path()) else { return };
    let _mount = Mount(&mount_point);
    // In a child: a store into an unbacked page of the mapped index is a
    // SIGBUS, which would take the test harness down with it.
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["a_full_disk_fails_the_append_before_an_index_store_can_fault", "--exact", "--nocapture"])
        .env(INDEX_CHILD_DIR, &mount_point)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("CHILD-OK"),
        "child: {:?}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
