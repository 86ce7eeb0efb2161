//! The systemd readiness protocol (`Type=notify`, sd_notify(3)): one
//! datagram to `$NOTIFY_SOCKET` per state change. Without the variable
//! (not under systemd) nothing is sent.

use std::os::unix::net::UnixDatagram;

use tracing::warn;

/// Sends `state` (e.g. `READY=1`) to the service manager, if any.
pub(super) fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&path, state) {
        warn!(socket = ?path, "systemd notification {state:?} not sent: {e}");
    }
}

fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    // A leading '@' names a socket in the abstract namespace.
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)?
        }
        None => std::os::unix::net::SocketAddr::from_pathname(path)?,
    };
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}
