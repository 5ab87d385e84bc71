//! A disk that refuses writes fails the append with a storage error (the
//! broker's KAFKA_STORAGE_ERROR), and the log stays readable and consistent:
//! a real ENOSPC on a small tmpfs (needs root to mount; skipped with a
//! message otherwise), and a file-size limit, which makes write(2) fail with
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
    let mount_point = root.path().join("small");
    std::fs::create_dir(&mount_point).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"]).arg(&mount_point).output();
    match mounted {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!(
                "SKIPPED: cannot mount a 1 MiB tmpfs (needs root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED: cannot run mount: {e}");
            return;
        }
    }
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
