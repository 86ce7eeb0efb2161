//! Work that must not delay answering: threads in the idle scheduling
//! class.

use tracing::warn;

/// Runs `work` on a thread of its own in the idle scheduling class
/// (`SCHED_IDLE`): a reload parses and diffs whole zone files, seconds of
/// CPU for a large one, and must not delay answering queries and
/// publishing registrations. Any other thread that wakes takes the CPU
/// from it at once (a nice value does not: measured, a nice-10 spinner
/// raised registration p99 from 3 to 7 ms, a `SCHED_IDLE` one did not).
/// On a machine saturated by serving, the reload waits for spare CPU.
pub(crate) async fn in_background<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            lower_priority();
            let _ = tx.send(work());
        })?;
    Ok(rx.await?)
}

/// Moves the calling thread to the idle scheduling class (see
/// [`in_background`]).
pub(crate) fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes only this thread's scheduling class (pid 0 = the
    // calling thread); on failure it stays at normal priority.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        warn!(
            "cannot lower a background thread's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}
