//! The one copy of the same-host path: payload bytes move from the sender's registered
//! memory straight into the receiver's, with `process_vm_readv` (cross-memory attach, as
//! Open MPI's shared-memory transport moves large messages), batched.
//!
//! The receiving data path checks keys, bounds and access exactly as for a packet off the
//! wire, and resolves where each payload goes; instead of copying at once it queues the
//! piece ([`Copies::push`]), merging pieces that continue each other in both address
//! spaces, so that the packets of a long WRITE become one system call of many KiB
//! rather than one per MTU. The queue is written out ([`Copies::flush`]):
//! - before a CQE is written (the completion promises the data is in memory);
//! - before any packet that is not a SEND/WRITE with a referenced payload is handled (an
//!   atomic or a READ may touch the bytes just written);
//! - at the end of each lane's batch, so nothing is pending when the step's ACKs leave and
//!   the engine lock is released (the translated addresses are only valid under it).
//!
//! The sender's bytes stay valid while the receiver reads them: they are the payload of a
//! send WQE that has not completed (its completion needs the ACK this receiver sends
//! after the copy), or the target of a READ the responder answers. A sender that frees
//! that memory early, or dies, makes the copy fail: counted (`local_copy_errors`) and
//! logged, the bytes not placed, as a ConnectX would DMA garbage or fault the QP.

use super::super::counters::{step_add, Counters};
use super::super::mem;

/// Bytes in another process's memory (or this one's), to be copied from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRef {
    pub pid: u32,
    pub addr: u64,
    pub len: usize,
}

/// A packet's payload on the data path: bytes at hand, or a reference into the sender.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    Bytes(&'a [u8]),
    Remote(RemoteRef),
}

impl<'a> Payload<'a> {
    pub fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Remote(r) => r.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes `[at, at + n)`.
    pub fn slice(&self, at: usize, n: usize) -> Payload<'a> {
        match *self {
            Payload::Bytes(b) => Payload::Bytes(&b[at..at + n]),
            Payload::Remote(r) => Payload::Remote(RemoteRef { pid: r.pid, addr: r.addr + at as u64, len: n }),
        }
    }

    /// Writes these bytes at process address `dst`, which the caller checked is inside a
    /// live MR allowing the write, under the engine lock: at once, or queued in `copies`.
    ///
    /// # Safety
    /// `[dst, dst + len)` must be writable memory of this process for as long as the
    /// engine lock is held (a checked key, see `mem`); `copies` is flushed before then.
    pub unsafe fn write_to(&self, dst: u64, copies: &mut Copies) {
        match self {
            // SAFETY: per this function's contract.
            Payload::Bytes(b) => unsafe { mem::write(dst, b) },
            Payload::Remote(r) => copies.push(dst, *r),
        }
    }

    /// The bytes themselves: borrowed, or read now into `buf` (a path that needs them in
    /// hand, e.g. peer memory staging). An unreadable reference gives None.
    pub fn bytes<'b>(&'b self, buf: &'b mut Vec<u8>, copies: &mut Copies) -> Option<&'b [u8]> {
        match self {
            Payload::Bytes(b) => Some(b),
            Payload::Remote(r) => {
                buf.clear();
                buf.resize(r.len, 0);
                copies.read_now(*r, buf).then_some(&buf[..])
            }
        }
    }
}

/// Most pieces one `process_vm_readv` takes (`UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// Copies queued by one step, all from one process at a time.
#[derive(Debug, Default)]
pub struct Copies {
    pid: u32,
    /// (local destination, remote source, length) per piece.
    pieces: Vec<(u64, u64, usize)>,
    local: Vec<libc::iovec>,
    remote: Vec<libc::iovec>,
    own_pid: u32,
    /// Since the last [`Copies::report`]: system calls, bytes moved, failed copies.
    calls: u64,
    bytes: u64,
    errors: u64,
}

// SAFETY: the iovecs are rebuilt from `pieces` for each call and point at memory checked
// under the engine lock; nothing outlives a flush.
unsafe impl Send for Copies {}

impl Copies {
    pub fn new() -> Copies {
        Copies { own_pid: std::process::id(), ..Default::default() }
    }

    /// Adds what was copied since the last call to the device counters.
    pub fn report(&mut self, counters: &Counters) {
        if self.calls > 0 {
            step_add(&counters.local_copies, std::mem::take(&mut self.calls));
            step_add(&counters.local_copy_bytes, std::mem::take(&mut self.bytes));
        }
        if self.errors > 0 {
            counters.local_copy_errors.fetch_add(std::mem::take(&mut self.errors), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Queues `src` to be copied to `dst`, merged with the previous piece when it
    /// continues it on both sides.
    pub fn push(&mut self, dst: u64, src: RemoteRef) {
        if src.len == 0 {
            return;
        }
        if !self.pieces.is_empty() && (self.pid != src.pid || self.pieces.len() >= IOV_MAX) {
            self.flush();
        }
        self.pid = src.pid;
        if let Some(last) = self.pieces.last_mut() {
            if last.0 + last.2 as u64 == dst && last.1 + last.2 as u64 == src.addr {
                last.2 += src.len;
                return;
            }
        }
        self.pieces.push((dst, src.addr, src.len));
    }

    /// Copies everything queued. Returns false if any of it could not be copied.
    pub fn flush(&mut self) -> bool {
        if self.pieces.is_empty() {
            return true;
        }
        let want: usize = self.pieces.iter().map(|p| p.2).sum();
        let ok = if self.pid == self.own_pid {
            for &(dst, src, len) in &self.pieces {
                // SAFETY: `src` is the payload of this process's own sender (another
                // instance in the same process), valid as the module docs say; `dst` was
                // checked by the caller of `push`. Distinct MRs: no overlap.
                unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, len) };
            }
            self.count(1, want as u64);
            true
        } else {
            self.local.clear();
            self.remote.clear();
            for &(dst, src, len) in &self.pieces {
                self.local.push(libc::iovec { iov_base: dst as *mut libc::c_void, iov_len: len });
                self.remote.push(libc::iovec { iov_base: src as *mut libc::c_void, iov_len: len });
            }
            // SAFETY: the local iovecs name memory of this process checked writable under
            // the engine lock; the remote ones are only read by the kernel, in the other
            // process, which fails cleanly (EFAULT, ESRCH) if they are not mapped there.
            let n = unsafe {
                libc::process_vm_readv(self.pid as libc::pid_t, self.local.as_ptr(), self.local.len() as libc::c_ulong,
                                       self.remote.as_ptr(), self.remote.len() as libc::c_ulong, 0)
            };
            self.count(1, n.max(0) as u64);
            if n as isize != want as isize {
                let e = std::io::Error::last_os_error();
                tracing::warn!(target: "softhca::link", pid = self.pid, want, got = n, "process_vm_readv: {e}");
                false
            } else {
                true
            }
        };
        self.errors += !ok as u64;
        self.pieces.clear();
        ok
    }

    /// Reads `src` into `out` (`src.len` bytes) at once, after what is queued.
    pub fn read_now(&mut self, src: RemoteRef, out: &mut [u8]) -> bool {
        let queued = self.flush();
        self.push(out.as_mut_ptr() as u64, src);
        self.flush() && queued
    }

    fn count(&mut self, calls: u64, bytes: u64) {
        self.calls += calls;
        self.bytes += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces that continue each other on both sides merge into one; the bytes land where
    /// each piece said, from this process and (through a child) from another one.
    #[test]
    fn pieces_merge_and_land() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; 20_000];
        let mut c = Copies::new();
        let base = src.as_ptr() as u64;
        let d = dst.as_mut_ptr() as u64;
        // Packets of 4096, then one that skips (not contiguous): two pieces.
        for k in 0..4u64 {
            c.push(d + k * 4096, RemoteRef { pid: std::process::id(), addr: base + k * 4096, len: 4096 });
        }
        c.push(d + 18_000, RemoteRef { pid: std::process::id(), addr: base + 17_000, len: 1000 });
        assert_eq!(c.pieces.len(), 2);
        assert!(c.flush());
        assert_eq!(&dst[..16384], &src[..16384]);
        assert_eq!(&dst[18_000..19_000], &src[17_000..18_000]);
        assert!(dst[16384..18_000].iter().all(|&b| b == 0));
    }

    /// Through the system call: the parent reads a forked child's copy of a buffer it then
    /// changed, so the bytes can only have come from the child's memory; a dead child's
    /// memory gives a failed copy, not a crash.
    #[test]
    fn copies_from_another_process() {
        let mut buf = vec![0x5au8; 8192];
        let addr = buf.as_ptr() as u64;
        let (r, w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child only sleeps on a pipe and exits (no locks, no allocation).
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                drop(w);
                let mut b = [0u8; 1];
                let _ = nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&r), &mut b);
                // SAFETY: exit without running the test harness's destructors.
                unsafe { libc::_exit(0) };
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(r);
                buf.iter_mut().for_each(|b| *b = 0);
                let mut out = vec![0u8; 8192];
                let mut c = Copies::new();
                let ok = c.read_now(RemoteRef { pid: child.as_raw() as u32, addr, len: 8192 }, &mut out);
                // A parent may always read its child (ptrace rules, Yama included).
                assert!(ok, "process_vm_readv from the child: {}", std::io::Error::last_os_error());
                assert!(out.iter().all(|&b| b == 0x5a), "bytes from the child's memory");
                drop(w);
                nix::sys::wait::waitpid(child, None).unwrap();
                assert!(!c.read_now(RemoteRef { pid: child.as_raw() as u32, addr, len: 8192 }, &mut out), "dead process");
            }
        }
    }
}
