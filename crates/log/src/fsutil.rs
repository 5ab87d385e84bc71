//! Crash-safe file operations: a file is replaced by writing a temporary
//! sibling, syncing it, renaming it over the target and syncing the directory,
//! so a crash leaves either the old file or the new one, never a mix.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Syncs a directory, making creates, renames and deletes in it durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Atomically replaces `path` with `contents`.
pub fn atomic_write(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut temp_name = path.file_name().unwrap_or_default().to_os_string();
    temp_name.push(".tmp");
    let temp = path.with_file_name(temp_name);
    {
        let mut file = File::create(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    fs::rename(&temp, path)?;
    if let Some(dir) = path.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}
