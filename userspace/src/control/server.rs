//! The control socket's listener: a Unix stream socket, readable and
//! writable by its owner and group only, and a peer check on every
//! connection (root, the server's own user, or a member of the control
//! group), so a file mode changed by hand does not open it to everyone.

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, warn};

use super::error::ControlError;
use super::protocol::{Reply, Request, MAX_REQUEST};

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers requests; implemented by the server's composition (`serve`).
pub trait Backend: Send + Sync + 'static {
    fn handle(&self, request: Request) -> impl Future<Output = Reply> + Send;
}

/// Who may connect besides root.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    /// The server's own (effective) user.
    pub uid: u32,
    pub group: Option<u32>,
}

/// A bound control socket; the file is removed when it is dropped.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    access: Access,
}

impl ControlSocket {
    /// Binds `path` (a stale socket from an earlier run is replaced; a
    /// live one is not), mode 0660, group `group` when set.
    pub fn bind(path: &Path, owner: Option<u32>, group: Option<u32>) -> Result<Self, ControlError> {
        let err = |source| ControlError::Bind {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(ControlError::InUse(path.to_path_buf()));
        }
        // Only a stale socket is replaced: any other file at a mistyped
        // path is left alone.
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_socket() => {
                return Err(err(std::io::Error::other("exists and is not a socket")))
            }
            Ok(_) => std::fs::remove_file(path).map_err(err)?,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e)),
            Err(_) => {}
        }
        let listener = UnixListener::bind(path).map_err(err)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(err)?;
        if owner.is_some() || group.is_some() {
            std::os::unix::fs::chown(path, owner, group).map_err(err)?;
        }
        let uid = owner.unwrap_or_else(effective_uid);
        Ok(ControlSocket {
            listener,
            path: path.to_path_buf(),
            access: Access { uid, group },
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Answers connections until `stop`.
    pub async fn serve<B: Backend>(
        &self,
        backend: Arc<B>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            let stream = tokio::select! {
                r = self.listener.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => { warn!("control socket: accept: {e}"); continue; }
                },
                _ = stop.wait_for(|s| *s) => break,
            };
            let (backend, access) = (backend.clone(), self.access);
            tokio::spawn(async move {
                if let Err(e) = answer(stream, &*backend, access).await {
                    debug!("control connection: {e}");
                }
            });
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

async fn answer(
    mut stream: UnixStream,
    backend: &impl Backend,
    access: Access,
) -> std::io::Result<()> {
    // The request is read (bounded) even from a peer that is refused, so
    // the client is not writing into a closed socket when the refusal comes.
    let request = read_request(&mut stream).await;
    let reply = match (peer_allowed(&stream, access), request) {
        (Err(why), _) | (Ok(()), Err(why)) => Reply::Error(why),
        (Ok(()), Ok(request)) => backend.handle(request).await,
    };
    let mut line = serde_json::to_vec(&reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line).await?;
    stream.shutdown().await
}

async fn read_request(stream: &mut UnixStream) -> Result<Request, String> {
    let mut line = Vec::new();
    let mut reader = BufReader::new(stream.take(MAX_REQUEST as u64 + 1));
    let read = tokio::time::timeout(REQUEST_TIMEOUT, reader.read_until(b'\n', &mut line)).await;
    match read {
        Err(_) => return Err("no request within 5 s".into()),
        Ok(Err(e)) => return Err(format!("reading the request: {e}")),
        Ok(Ok(_)) if line.len() > MAX_REQUEST => {
            return Err(format!("request longer than {MAX_REQUEST} bytes"))
        }
        Ok(Ok(_)) => {}
    }
    serde_json::from_slice(&line).map_err(|e| format!("bad request: {e}"))
}

/// Root, the server's user, or a member of the control group.
fn peer_allowed(stream: &UnixStream, access: Access) -> Result<(), String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    let (uid, gid) = (cred.uid(), cred.gid());
    if uid == 0 || uid == access.uid {
        return Ok(());
    }
    if let Some(g) = access.group {
        let member = gid == g
            || cred
                .pid()
                .and_then(|pid| supplementary_groups(pid).ok())
                .is_some_and(|groups| groups.contains(&g));
        if member {
            return Ok(());
        }
    }
    Err(format!(
        "permission denied: uid {uid} is neither root, the server's user nor in the control group"
    ))
}

/// The `Groups:` line of `/proc/PID/status`.
fn supplementary_groups(pid: i32) -> std::io::Result<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_stale_socket_is_replaced() {
        let dir = std::env::temp_dir().join(format!("xdpdns-ctl-sock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        // A regular file at the path is not ours to remove.
        std::fs::write(&path, "keep").unwrap();
        assert!(ControlSocket::bind(&path, None, None).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
        std::fs::remove_file(&path).unwrap();
        // A live socket is refused; once it is gone, its file is reused.
        let live = ControlSocket::bind(&path, None, None).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        assert!(matches!(
            ControlSocket::bind(&path, None, None),
            Err(ControlError::InUse(_))
        ));
        std::mem::forget(live); // leaves a stale socket file behind
        let stale = std::os::unix::net::UnixListener::bind(dir.join("other.sock")).unwrap();
        drop(stale);
        assert!(ControlSocket::bind(&dir.join("other.sock"), None, None).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
