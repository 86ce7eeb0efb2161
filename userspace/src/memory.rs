//! The heap: jemalloc (the server's global allocator and its settings are
//! in `main.rs`), set up to give freed memory back to the system within a
//! second, on threads of its own.
//!
//! glibc's allocator kept what a churning heap freed: a registry's
//! service RRsets are replaced at every change of a member, and each
//! version of a zone a subscriber held for a while (a file being written)
//! left holes among the long-lived allocations that `malloc_trim` could
//! not return. With a million instances registered, the server held 1.7
//! GB for 1.2 GB in use; with jemalloc, whose size classes keep small
//! allocations apart from large ones, 1.1 GB.

/// Starts (`true`) or stops jemalloc's background threads, which give
/// freed pages back on time while the server is idle (otherwise they go
/// at the next allocations). They start once the server has dropped its
/// privileges: jemalloc's threads block every signal, so the drop, which
/// reaches each thread by a signal (`privileges`), could not reach them;
/// started after it, they inherit its credentials. Threads an operator
/// asked for at load (`_RJEM_MALLOC_CONF=background_thread:true`) are
/// stopped before the drop for the same reason. `false` if they could
/// not be started or stopped.
pub fn purge_in_background(mut on: bool) -> bool {
    // SAFETY: a C string control name; `background_thread` takes a
    // `bool`, given by pointer and size; nothing is read back.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"background_thread".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&raw mut on).cast(),
            std::mem::size_of::<bool>(),
        )
    };
    rc == 0
}

/// Returns the heap's free pages to the system now, after a load or a
/// compile freed most of what it allocated (otherwise they go within a
/// second).
pub fn release_freed() {
    // SAFETY: a C string control name; `purge` takes and returns no
    // value, so every pointer is null and the length zero.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            // `arena.<MALLCTL_ARENAS_ALL>.purge`: every arena's unused pages.
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}
