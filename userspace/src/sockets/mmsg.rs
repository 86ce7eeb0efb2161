//! Batched datagram I/O with `recvmmsg`/`sendmmsg`: under load one system
//! call moves up to [`BATCH`] datagrams each way (NSD and Knot do the
//! same). Besides the system calls this saves, replies leave in bursts, so
//! the kernel wakes the next hop once per burst rather than per reply.
//!
//! Receiving blocks until the first datagram (`MSG_WAITFORONE`, on a
//! worker thread of `udp.rs`); sending never blocks.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::ptr;

use socket2::{SockAddr, SockAddrStorage};

/// Datagrams per system call.
pub(crate) const BATCH: usize = 32;
/// Largest datagram: anything longer would be cut and then fail to parse.
const SLOT: usize = 65_535;

/// Receive buffers for one socket. The kernel's headers, which point into
/// them, are built on the stack for each call, so nothing here holds a
/// raw pointer across an `await`.
pub(crate) struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    addrs: Vec<SockAddrStorage>,
    lens: [usize; BATCH],
    addr_lens: [libc::socklen_t; BATCH],
    /// Ancillary data per datagram (the `SO_RXQ_OVFL` drop count).
    control: [[u64; CONTROL_WORDS]; BATCH],
    /// The socket's drop count carried by the last batch, if any.
    drops: Option<u32>,
}

/// Room for one `cmsghdr` with a `u32` (16 + 4 bytes, aligned), as words
/// so the buffer is aligned for `cmsghdr`.
const CONTROL_WORDS: usize = 4;

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            // Zeroed allocations: pages are touched only as datagrams fill them.
            bufs: (0..BATCH)
                .map(|_| vec![0u8; SLOT].into_boxed_slice())
                .collect(),
            addrs: (0..BATCH).map(|_| SockAddrStorage::zeroed()).collect(),
            lens: [0; BATCH],
            addr_lens: [0; BATCH],
            control: [[0; CONTROL_WORDS]; BATCH],
            drops: None,
        }
    }
}

impl RecvBatch {
    /// Waits for the first datagram (up to the socket's receive timeout),
    /// then takes what else is queued, up to [`BATCH`].
    pub(crate) fn recv_blocking(&mut self, fd: RawFd) -> io::Result<usize> {
        self.recv_with(fd, libc::MSG_WAITFORONE)
    }

    fn recv_with(&mut self, fd: RawFd, flags: libc::c_int) -> io::Result<usize> {
        // SAFETY: all-zero bytes are a valid iovec and mmsghdr.
        let mut iovs: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
        for (i, (((buf, addr), control), (iov, hdr))) in self
            .bufs
            .iter_mut()
            .zip(self.addrs.iter_mut())
            .zip(self.control.iter_mut())
            .zip(iovs.iter_mut().zip(hdrs.iter_mut()))
            .enumerate()
        {
            hdr.msg_hdr.msg_control = control.as_mut_ptr().cast();
            hdr.msg_hdr.msg_controllen = mem::size_of_val(control) as _;
            *iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: SLOT,
            };
            // SockAddrStorage is a transparent sockaddr_storage.
            hdr.msg_hdr.msg_name = (addr as *mut SockAddrStorage).cast();
            hdr.msg_hdr.msg_namelen = mem::size_of::<SockAddrStorage>() as libc::socklen_t;
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            self.lens[i] = 0;
        }
        // SAFETY: every header points at live buffers of the stated sizes
        // (ours and the stack arrays above), unmoved during the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                flags,
                ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for (i, hdr) in hdrs.iter().enumerate().take(n) {
            self.lens[i] = (hdr.msg_len as usize).min(SLOT);
            self.addr_lens[i] = hdr.msg_hdr.msg_namelen;
        }
        if let Some(last) = n.checked_sub(1) {
            // SAFETY: the kernel filled the header's control buffer (ours,
            // still alive) with `msg_controllen` bytes of cmsgs.
            if let Some(d) = unsafe { rxq_overflow(&hdrs[last].msg_hdr) } {
                self.drops = Some(d);
            }
        }
        Ok(n)
    }

    /// The socket's count of datagrams dropped for a full receive queue,
    /// as of the last datagram received (`None` before any carried it).
    pub(crate) fn drops(&self) -> Option<u32> {
        self.drops
    }

    /// The datagrams of the last `recv` that returned `n`, with their
    /// senders. Datagrams from non-IP senders (impossible on an inet
    /// socket) are skipped.
    pub(crate) fn datagrams(&self, n: usize) -> impl Iterator<Item = (&[u8], SocketAddr)> {
        (0..n.min(BATCH)).filter_map(move |i| {
            // SAFETY: the storage is plain bytes (a bitwise copy is a copy),
            // and the kernel wrote a socket address of `addr_lens[i]` bytes
            // into it.
            let addr = unsafe { SockAddr::new(ptr::read(&self.addrs[i]), self.addr_lens[i]) };
            Some((&self.bufs[i][..self.lens[i]], addr.as_socket()?))
        })
    }
}

/// The `SO_RXQ_OVFL` count in a received message's ancillary data.
///
/// # Safety
/// `msg` must be a header the kernel filled, whose control buffer is live.
unsafe fn rxq_overflow(msg: &libc::msghdr) -> Option<u32> {
    let mut c = libc::CMSG_FIRSTHDR(msg);
    while !c.is_null() {
        if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
            return Some(ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
        }
        c = libc::CMSG_NXTHDR(msg, c);
    }
    None
}

/// Replies waiting to be sent, oldest first.
#[derive(Default)]
pub(crate) struct SendBatch {
    queue: Vec<(Vec<u8>, SockAddr)>,
}

impl SendBatch {
    pub(crate) fn push(&mut self, reply: Vec<u8>, to: SocketAddr) {
        self.queue.push((reply, SockAddr::from(to)));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Gives up on the oldest reply (its send failed for its own reasons).
    pub(crate) fn drop_first(&mut self) {
        if !self.queue.is_empty() {
            self.queue.remove(0);
        }
    }

    /// Sends as many queued replies as the socket takes without blocking,
    /// up to [`BATCH`], and removes them from the queue.
    pub(crate) fn send(&mut self, fd: RawFd) -> io::Result<usize> {
        let count = self.queue.len().min(BATCH);
        // SAFETY: all-zero bytes are a valid iovec and mmsghdr.
        let mut iovs: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
        for ((reply, to), (iov, hdr)) in self.queue[..count]
            .iter()
            .zip(iovs.iter_mut().zip(hdrs.iter_mut()))
        {
            *iov = libc::iovec {
                iov_base: reply.as_ptr() as *mut libc::c_void,
                iov_len: reply.len(),
            };
            hdr.msg_hdr.msg_name = to.as_ptr() as *mut libc::c_void;
            hdr.msg_hdr.msg_namelen = to.len();
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the headers point at the queued replies and addresses and
        // at the stack arrays above, all alive and unmoved until the call
        // returns; the kernel only reads them.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                hdrs.as_mut_ptr(),
                count as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.queue.drain(..n as usize);
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_burst_is_received_and_answered_in_batches() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = server.local_addr().unwrap();
        let sent = BATCH + 5;
        for i in 0..sent {
            client.send_to(&[i as u8; 3], to).unwrap();
        }

        let mut rx = RecvBatch::default();
        let mut tx = SendBatch::default();
        let mut received = Vec::new();
        server
            .set_read_timeout(Some(std::time::Duration::from_millis(100)))
            .unwrap();
        // Bounded: the datagrams are already queued on loopback.
        for _ in 0..100 {
            let n = match rx.recv_blocking(server.as_raw_fd()) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            };
            assert!(n <= BATCH);
            for (data, peer) in rx.datagrams(n) {
                assert_eq!(peer, client.local_addr().unwrap());
                received.push(data.to_vec());
                tx.push(data.iter().map(|b| b + 1).collect(), peer);
            }
        }
        assert_eq!(received.len(), sent);
        assert!(received.iter().enumerate().all(|(i, d)| d == &[i as u8; 3]));

        let mut calls = 0;
        while !tx.is_empty() {
            tx.send(server.as_raw_fd()).unwrap();
            calls += 1;
        }
        assert_eq!(calls, 2, "{} replies in batches of {BATCH}", sent);
        let mut buf = [0u8; 16];
        for i in 0..sent {
            let (len, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..len], from), (&[i as u8 + 1; 3][..], to));
        }
    }

    #[test]
    fn an_empty_queue_returns_at_the_receive_timeout() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let wait = std::time::Duration::from_millis(50);
        server.set_read_timeout(Some(wait)).unwrap();
        let started = std::time::Instant::now();
        let err = RecvBatch::default()
            .recv_blocking(server.as_raw_fd())
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(started.elapsed() >= wait, "it waited for the timeout");
    }
}
