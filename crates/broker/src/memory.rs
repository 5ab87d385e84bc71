//! Giving freed heap back to the operating system.
//!
//! glibc's allocator keeps what the process freed in its arenas, one per
//! thread that allocated at once, and returns only the free space at the top
//! of each. After a burst (thousands of short-lived groups, connections or
//! fetch sessions) that can leave megabytes of freed memory resident for the
//! life of the process. `release_free_memory` asks it to hand every whole free
//! page back; it is called after the periodic cleanups that free the most,
//! never on a request path (it walks every arena under its lock).

/// Returns free heap pages to the OS; what it released is the drop in RSS.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only rearranges the
    // allocator's own free lists; it is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
