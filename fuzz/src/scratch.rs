//! Scratch files for the on-disk decoder targets (krabka-log, krabka-format):
//! the decoders read paths, so each input is written to a file first.
//!
//! One directory per fuzzing process, `$TMPDIR/krabka-fuzz-<pid>`, made on
//! first use and reused for every input. libFuzzer exits without running
//! destructors, so directories of processes that are gone (no `/proc/<pid>`)
//! are removed when a new one starts. Point `TMPDIR` at a tmpfs
//! (`/dev/shm`) to keep the decoders' fsyncs off the disk.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const PREFIX: &str = "krabka-fuzz-";

/// This process's scratch directory.
pub fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let temp = std::env::temp_dir();
        remove_stale(&temp);
        let dir = temp.join(format!("{PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the fuzz scratch directory");
        dir
    })
}

/// `dir()/name`, created if missing (its contents are left as they are).
pub fn subdir(name: &str) -> PathBuf {
    let path = dir().join(name);
    std::fs::create_dir_all(&path).expect("create a fuzz scratch subdirectory");
    path
}

/// An empty `dir()/name`: whatever an earlier input left there is removed.
pub fn fresh_subdir(name: &str) -> PathBuf {
    let path = dir().join(name);
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).expect("create a fuzz scratch subdirectory");
    path
}

/// Writes `data` to `dir()/name` (replacing it) and returns the path.
pub fn write(name: &str, data: &[u8]) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, data).expect("write a fuzz scratch file");
    path
}

fn remove_stale(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else { continue };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
