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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("no user named {0:?}")]
    NoUser(String),
    #[error("no group named {0:?}")]
    NoGroup(String),
    #[error("dropping privileges needs root (running as uid {0})")]
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
        if libc::syscall(libc::SYS_geteuid) as u32 != uid {
            // The bounding set first, while CAP_SETPCAP is still held.
            for cap in (0..=LAST_CAP.load(Ordering::SeqCst)).filter(|c| caps & (1 << c) == 0) {
                libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
            }
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
    if !drop_this_thread() {
        FAILED.store(true, Ordering::SeqCst);
    }
    DONE.fetch_add(1, Ordering::SeqCst);
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
/// capabilities numbered in `keep` (the bounding set too, so nothing can
/// regain the others). Must run as root.
pub fn drop_to(uid: u32, gid: u32, keep: &[u32]) -> Result<(), PrivilegeError> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
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
    verify(uid, caps)
}

/// Every thread now has `uid` and exactly `caps`.
fn verify(uid: u32, caps: u64) -> Result<(), PrivilegeError> {
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
        let all_uid = uids.split_whitespace().all(|u| u == uid.to_string());
        if !all_uid || eff != caps || prm != caps {
            return Err(PrivilegeError::Thread {
                tid,
                detail: format!("Uid {uids}, CapEff {eff:x}, CapPrm {prm:x}"),
            });
        }
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
