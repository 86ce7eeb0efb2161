//! Giving freed heap back to the system after the large, short-lived
//! allocations of loading and compiling a zone.
//!
//! glibc keeps freed memory in its arenas for reuse; after a million-record
//! zone is parsed (its records freed as the zone takes them) or its answer
//! table compiled, tens of megabytes stay resident that nothing will reuse
//! soon. `malloc_trim` returns them.

/// Returns the heap's free pages to the system (glibc; elsewhere nothing).
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own
    // arenas; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
