//! Dropping root after start-up (`[server] user`/`group`): the process
//! becomes that user and keeps only the capabilities it still needs.
//!
//! Linux keeps credentials per thread, and by the time the sockets are
//! bound and the XDP program attached the server has many threads. glibc
//! broadcasts `setresuid` to every thread but not `capset`, so the drop is
//! broadcast here instead: every thread runs the same raw syscalls
//! (keep-caps, groups, gid, uid, capabilities) from a signal handler, and
//! the result is checked thread by thread in `/proc/self/task`.

use std::ffi::CString;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("no user named {0:?}")]
    NoUser(String),
    #[error("no group named {0:?}")]
    NoGroup(String),
    #[error("dropping privileges needs root or the configured user (running as uid {0})")]
    NotRoot(u32),
    #[error("{what}: {source}")]
    Sys {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("thread {tid} did not take the new credentials: {detail}")]
    Thread { tid: i32, detail: String },
}

pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_NET_BIND_SERVICE: u32 = 10;
pub const CAP_BPF: u32 = 39;

/// (uid, primary gid) of `user`.
pub fn user_ids(user: &str) -> Result<(u32, u32), PrivilegeError> {
    let c = CString::new(user).map_err(|_| PrivilegeError::NoUser(user.into()))?;
    // SAFETY: getpwnam returns a pointer into static storage or null; it
    // is read at once, before anything else could call it (start-up).
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return Err(PrivilegeError::NoUser(user.into()));
    }
    // SAFETY: non-null, points to a valid passwd.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

pub fn group_id(group: &str) -> Result<u32, PrivilegeError> {
    let c = CString::new(group).map_err(|_| PrivilegeError::NoGroup(group.into()))?;
    // SAFETY: as in `user_ids`.
    let gr = unsafe { libc::getgrnam(c.as_ptr()) };
    if gr.is_null() {
        return Err(PrivilegeError::NoGroup(group.into()));
    }
    // SAFETY: non-null, points to a valid group.
    Ok(unsafe { (*gr).gr_gid })
}

/// What every thread is to become (read by the signal handler).
static TARGET_UID: AtomicU32 = AtomicU32::new(0);
static TARGET_GID: AtomicU32 = AtomicU32::new(0);
static TARGET_CAPS: AtomicU64 = AtomicU64::new(0);
static LAST_CAP: AtomicU32 = AtomicU32::new(40);
/// Threads that ran the handler, and whether any failed.
static DONE: AtomicUsize = AtomicUsize::new(0);
static FAILED: AtomicBool = AtomicBool::new(false);

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;

/// The calling thread becomes uid/gid with exactly `caps` (effective and
/// permitted; none inheritable or ambient). Raw syscalls only, so it is
/// async-signal-safe and affects this thread alone.
fn drop_this_thread() -> bool {
    let (uid, gid) = (
        TARGET_UID.load(Ordering::SeqCst),
        TARGET_GID.load(Ordering::SeqCst),
    );
    let caps = TARGET_CAPS.load(Ordering::SeqCst);
    // SAFETY: plain syscalls on the calling thread's credentials.
    unsafe {
        let as_root = libc::syscall(libc::SYS_geteuid) == 0;
        if as_root {
            // The bounding set first, while CAP_SETPCAP is still held.
            for cap in (0..=LAST_CAP.load(Ordering::SeqCst)).filter(|c| caps & (1 << c) == 0) {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                    return false;
                }
            }
        }
        if libc::syscall(libc::SYS_geteuid) as u32 != uid {
            let groups = [gid];
            if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_setgroups, 1, groups.as_ptr()) != 0
                || libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0
                || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0
            {
                return false;
            }
        }
        let mut header = CapHeader {
            version: CAP_V3,
            pid: 0,
        };
        let data = [
            CapData {
                effective: caps as u32,
                permitted: caps as u32,
                inheritable: 0,
            },
            CapData {
                effective: (caps >> 32) as u32,
                permitted: (caps >> 32) as u32,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return false;
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0);
    }
    true
}

extern "C" fn on_signal(_: libc::c_int) {
    // SAFETY: the thread's errno, restored so the interrupted code sees
    // its own (async-signal safety).
    let errno = unsafe { *libc::__errno_location() };
    if !drop_this_thread() {
        FAILED.store(true, Ordering::SeqCst);
    }
    DONE.fetch_add(1, Ordering::SeqCst);
    unsafe { *libc::__errno_location() = errno };
}

fn sys(what: &'static str) -> PrivilegeError {
    PrivilegeError::Sys {
        what,
        source: std::io::Error::last_os_error(),
    }
}

fn threads() -> Result<Vec<i32>, PrivilegeError> {
    let dir = std::fs::read_dir("/proc/self/task").map_err(|source| PrivilegeError::Sys {
        what: "listing /proc/self/task",
        source,
    })?;
    Ok(dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

/// Makes every thread of the process `uid`/`gid` with only the
/// capabilities numbered in `keep` (as root, the bounding set too, so
/// nothing can regain the others). Run as `uid` already (a unit's
/// `User=` with ambient capabilities), it only narrows the capabilities.
pub fn drop_to(uid: u32, gid: u32, keep: &[u32]) -> Result<(), PrivilegeError> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 && euid != uid {
        return Err(PrivilegeError::NotRoot(euid));
    }
    let caps: u64 = keep.iter().fold(0, |m, &c| m | 1 << c);
    let last_cap: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    LAST_CAP.store(last_cap.min(63), Ordering::SeqCst);
    TARGET_UID.store(uid, Ordering::SeqCst);
    TARGET_GID.store(gid, Ordering::SeqCst);
    TARGET_CAPS.store(caps, Ordering::SeqCst);
    FAILED.store(false, Ordering::SeqCst);
    let signal = libc::SIGRTMIN() + 6;
    // SAFETY: installs a handler that only makes raw syscalls and touches
    // atomics; SA_RESTART so interrupted calls resume.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(sys("sigaction"));
        }
    }
    // SAFETY: gettid/getpid cannot fail.
    let (me, pid) = unsafe { (libc::gettid(), libc::getpid()) };
    // Threads started meanwhile by a thread not yet dropped inherit the
    // old credentials: repeat until every thread listed has been done.
    let mut done = std::collections::HashSet::from([me]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pending: Vec<i32> = threads()?
            .into_iter()
            .filter(|t| !done.contains(t))
            .collect();
        if pending.is_empty() {
            break;
        }
        let before = DONE.load(Ordering::SeqCst);
        let mut sent = 0;
        for &tid in &pending {
            // SAFETY: signals one thread of this process.
            if unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) } == 0 {
                sent += 1;
            }
            done.insert(tid);
        }
        // A thread that ended before its handler ran never reports:
        // past the deadline, `verify` below judges the threads left.
        while DONE.load(Ordering::SeqCst) < before + sent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    if !drop_this_thread() {
        return Err(sys("changing this thread's credentials"));
    }
    if FAILED.load(Ordering::SeqCst) {
        return Err(PrivilegeError::Thread {
            tid: 0,
            detail: "a thread failed to change its credentials".into(),
        });
    }
    verify(uid, caps, euid == 0)
}

/// Every thread now has `uid` and exactly `caps` (and, when the drop ran
/// as root, a bounding set of `caps`).
fn verify(uid: u32, caps: u64, bounded: bool) -> Result<(), PrivilegeError> {
    for tid in threads()? {
        let Ok(status) = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) else {
            continue; // ended meanwhile
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let uids = field("Uid:");
        let eff = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(u64::MAX);
        let prm = u64::from_str_radix(&field("CapPrm:"), 16).unwrap_or(u64::MAX);
        let bnd = u64::from_str_radix(&field("CapBnd:"), 16).unwrap_or(u64::MAX);
        let all_uid = uids.split_whitespace().all(|u| u == uid.to_string());
        if !all_uid || eff != caps || prm != caps || (bounded && bnd != caps) {
            return Err(PrivilegeError::Thread {
                tid,
                detail: format!("Uid {uids}, CapEff {eff:x}, CapPrm {prm:x}, CapBnd {bnd:x}"),
            });
        }
    }
    Ok(())
}

/// Gives `path` and everything below it to `uid`/`gid`, as root, without
/// following a symbolic link anywhere: the walk holds each directory open
/// (`O_NOFOLLOW`) and changes entries relative to it, so a link planted
/// by the unprivileged user (who owns the tree after a first run) cannot
/// redirect it. Sockets keep their owner (the control socket's group).
pub fn hand_over(path: &std::path::Path, uid: u32, gid: u32) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: opens a directory by path; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        };
    }
    // SAFETY: `fd` was just opened and is owned here.
    let dir = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    hand_over_dir(&dir, uid, gid, 0)
}

fn hand_over_dir(
    dir: &std::os::fd::OwnedFd,
    uid: u32,
    gid: u32,
    depth: usize,
) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    if depth > 32 {
        return Err(std::io::Error::other(
            "directory tree deeper than 32 levels",
        ));
    }
    let fd = dir.as_raw_fd();
    // SAFETY: fchown on an open descriptor.
    if unsafe { libc::fchown(fd, uid, gid) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The directory as opened, not whatever its path names now.
    for entry in std::fs::read_dir(format!("/proc/self/fd/{fd}"))? {
        let entry = entry?;
        let name = CString::new(entry.file_name().as_bytes()).map_err(std::io::Error::other)?;
        // SAFETY: fstatat on a name relative to `fd`, not following links.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
            continue; // gone meanwhile
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFSOCK | libc::S_IFLNK => {}
            libc::S_IFDIR => {
                // SAFETY: opens a subdirectory relative to `fd`, no links.
                let sub = unsafe {
                    libc::openat(
                        fd,
                        name.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    )
                };
                if sub >= 0 {
                    // SAFETY: just opened, owned here.
                    let sub = unsafe { std::os::fd::OwnedFd::from_raw_fd(sub) };
                    hand_over_dir(&sub, uid, gid, depth + 1)?;
                }
            }
            _ => {
                // SAFETY: changes one entry relative to `fd`, not following links.
                if unsafe { libc::fchownat(fd, name.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW) }
                    != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
    }
    Ok(())
}

/// Gives one regular file to `uid`/`gid` (not following a link).
pub fn hand_over_file(path: &std::path::Path, uid: u32, gid: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    // SAFETY: fchown on an open descriptor.
    if unsafe { libc::fchown(file.as_raw_fd(), uid, gid) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The names of the capabilities numbered in `caps`, for the log.
pub fn names(caps: &[u32]) -> Vec<&'static str> {
    caps.iter()
        .map(|c| match *c {
            CAP_NET_ADMIN => "CAP_NET_ADMIN",
            CAP_NET_BIND_SERVICE => "CAP_NET_BIND_SERVICE",
            CAP_BPF => "CAP_BPF",
            _ => "?",
        })
        .collect()
}
