//! The bpf(2) commands aya 0.14 does not wrap: BPF_PROG_TEST_RUN,
//! BPF_MAP_UPDATE_BATCH, an XDP link's interface (BPF_OBJ_GET_INFO_BY_FD),
//! and an RCU grace period (an update to a map-in-map waits in the kernel
//! for every running BPF program to finish: `maybe_wait_bpf_programs`);
//! and whether a directory is on a bpf filesystem.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_ARRAY_OF_MAPS: u32 = 12;

fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> io::Result<i64> {
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `union bpf_attr` for BPF_MAP_CREATE: map_type, key_size, value_size,
/// max_entries, map_flags, inner_map_fd (six u32s).
fn create_map(
    map_type: u32,
    key: u32,
    value: u32,
    entries: u32,
    inner_fd: u32,
) -> io::Result<OwnedFd> {
    let mut attr = [0u64; 16];
    let words = [map_type, key, value, entries, 0, inner_fd];
    unsafe {
        std::ptr::copy_nonoverlapping(words.as_ptr(), attr.as_mut_ptr() as *mut u32, words.len());
    }
    let fd = bpf(BPF_MAP_CREATE, &mut attr)?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Waits for a full RCU grace period: afterwards no XDP program run that
/// started before the call is still running.
pub struct GracePeriod {
    inner: OwnedFd,
    outer: OwnedFd,
}

impl GracePeriod {
    pub fn new() -> io::Result<Self> {
        let inner = create_map(BPF_MAP_TYPE_ARRAY, 4, 4, 1, 0)?;
        let outer = create_map(
            BPF_MAP_TYPE_ARRAY_OF_MAPS,
            4,
            4,
            1,
            inner.as_raw_fd() as u32,
        )?;
        Ok(GracePeriod { inner, outer })
    }

    pub fn wait(&self) -> io::Result<()> {
        let key: u32 = 0;
        let value: u32 = self.inner.as_raw_fd() as u32;
        // map_fd (u32) + pad, key ptr, value ptr, flags
        let mut attr = [0u64; 16];
        attr[0] = self.outer.as_raw_fd() as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = &value as *const u32 as u64;
        attr[3] = 0;
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
    }
}

/// BPF_MAP_UPDATE_BATCH (Linux 5.6): writes `count` elements, `keys` and
/// `values` each packed at the map's key and value size, in one system
/// call. Returns how many were written, and the error that stopped the
/// batch before the next one, if any.
pub fn update_batch(
    map_fd: RawFd,
    keys: &[u8],
    values: &[u8],
    count: u32,
) -> (u32, io::Result<()>) {
    // struct { u64 in_batch; u64 out_batch; u64 keys; u64 values;
    //          u32 count; u32 map_fd; u64 elem_flags; u64 flags; }
    let mut attr = [0u64; 16];
    attr[2] = keys.as_ptr() as u64;
    attr[3] = values.as_ptr() as u64;
    attr[4] = count as u64 | ((map_fd as u32 as u64) << 32);
    let result = bpf(BPF_MAP_UPDATE_BATCH, &mut attr).map(|_| ());
    // The kernel writes back how many it processed once it started; an
    // early refusal leaves `count` as sent (the caller cannot tell those
    // apart from "all written", so it treats an error with `count` as
    // "none known written").
    let done = (attr[4] as u32).min(count);
    (done, result)
}

/// Result of running a program once on a frame.
#[derive(Debug)]
pub struct TestRun {
    pub action: u32,
    pub frame: Vec<u8>,
    pub duration_ns: u32,
}

/// BPF_PROG_TEST_RUN: runs `prog_fd` on `frame` `repeat` times (the kernel
/// reuses the same buffer, see TOOLCHAIN.md) and returns the last result.
pub fn test_run(prog_fd: RawFd, frame: &[u8], repeat: u32) -> io::Result<TestRun> {
    let mut out = vec![0u8; 4096];
    // struct { u32 prog_fd; u32 retval; u32 data_size_in; u32 data_size_out;
    //          u64 data_in; u64 data_out; u32 repeat; u32 duration; ... }
    let mut attr = [0u64; 16];
    attr[0] = prog_fd as u64;
    attr[1] = frame.len() as u64 | ((out.len() as u64) << 32);
    attr[2] = frame.as_ptr() as u64;
    attr[3] = out.as_mut_ptr() as u64;
    attr[4] = repeat.max(1) as u64;
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    let action = (attr[0] >> 32) as u32;
    let out_len = (attr[1] >> 32) as usize;
    let duration_ns = (attr[4] >> 32) as u32;
    out.truncate(out_len.min(4096));
    Ok(TestRun {
        action,
        frame: out,
        duration_ns,
    })
}

/// `BPF_LINK_TYPE_XDP` in `bpf_link_info.type`.
const BPF_LINK_TYPE_XDP: u32 = 6;

/// A pinned XDP link's program id and interface index; `None` when the
/// pin is not an XDP link or its interface is gone (the kernel reports 0).
pub fn pinned_xdp_link(path: &std::path::Path) -> io::Result<Option<(u32, u32)>> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // struct { u64 pathname; u32 bpf_fd; u32 file_flags; }
    let mut attr = [0u64; 16];
    attr[0] = c.as_ptr() as u64;
    let fd = bpf(BPF_OBJ_GET, &mut attr)?;
    // SAFETY: BPF_OBJ_GET returned a new fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // struct bpf_link_info { u32 type; u32 id; u32 prog_id; union {
    //   ... struct { u32 ifindex; } xdp; ... } } (the union at offset 16)
    let mut info = [0u32; 32];
    // struct { u32 bpf_fd; u32 info_len; u64 info; }
    let mut attr = [0u64; 16];
    attr[0] = fd.as_raw_fd() as u32 as u64 | ((std::mem::size_of_val(&info) as u64) << 32);
    attr[1] = info.as_mut_ptr() as u64;
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok((info[0] == BPF_LINK_TYPE_XDP && info[4] != 0).then_some((info[2], info[4])))
}

/// `BPF_FS_MAGIC`, the `f_type` statfs(2) reports for a bpf filesystem.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Whether `dir` is on a bpf filesystem (where objects can be pinned).
pub fn is_bpffs(dir: &std::path::Path) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a valid C string and an out-pointer to a zeroed statfs.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// The kernel's index of the interface `name`, if it exists.
pub fn interface_index(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (index != 0).then_some(index)
}
