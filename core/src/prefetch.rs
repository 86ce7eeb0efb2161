//! A hint that brings a cache line in ahead of its use: for walks over
//! data scattered on the heap, where waiting for each miss in turn is most
//! of the cost.

/// Asks the CPU for the cache line at `at`. It reads nothing the program
/// sees and never faults, whatever the address.
#[inline]
pub(crate) fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is in every x86-64 CPU, and a prefetch is a hint that
    // neither reads for the program nor faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
