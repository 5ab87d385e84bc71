//! A disk that refuses writes (here: a file-size limit, which makes write(2)
//! fail with EFBIG as a full disk fails with ENOSPC) fails the append with a
//! storage error, and the log stays readable and consistent.

use std::os::unix::process::CommandExt;
use std::process::Command;

#[test]
fn a_refused_write_fails_the_append_and_leaves_the_log_readable() {
    let root = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_log-crash-writer"));
    command.args([root.path().to_str().unwrap(), "fill", "100000"]);
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
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "writer failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let error = stdout.lines().find(|l| l.starts_with("error ")).expect("the append must fail");
    assert!(error.contains("storage error"), "{error}");
    let readable = stdout.lines().find(|l| l.starts_with("readable ")).expect("the log must be read back");
    let parts: Vec<&str> = readable.split_whitespace().collect();
    assert_eq!(parts[1], parts[3], "{readable}");
    assert!(parts[1].parse::<i64>().unwrap() > 0);
}
