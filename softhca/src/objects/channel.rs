//! Completion channels and async event files: the fds an application reads events from.
//!
//! The kernel hands out anonymous files whose read() returns one fixed-size record per
//! event. softhca uses an `AF_UNIX` `SOCK_SEQPACKET` socket pair: the application gets one
//! end (read-only: its write side is shut down), the HCA keeps the other. Each record is
//! one datagram, so every read() returns exactly one `ib_uverbs_comp_event_desc` (8 bytes)
//! or `ib_uverbs_async_event_desc` (16 bytes), and the fd works with poll/epoll and
//! O_NONBLOCK like the kernel's.
//!
//! Lifetime: the HCA's end lives as long as this object, i.e. while the uverbs file that
//! created it is open or a CQ/QP still refers to it. After that the application reads the
//! events still queued and then end-of-file.
//!
//! Who writes what: the kernel half creates these; the device half calls
//! [`CompChannel::notify`] when an armed CQ gets a completion and
//! [`AsyncEventFile::post`] for async events (QP fatal, port change, ...).
//!
//! Event accounting: the kernel counts an event in the CQ's or QP's `*_events_reported`
//! when the application *reads* it, and DESTROY_CQ/DESTROY_QP drop the object's events
//! still queued, so libibverbs (which waits until the application has acknowledged
//! `events_reported` events) never waits for an event nobody read. The device half counts
//! an event when it queues it; at destroy the kernel half takes the object's unread
//! records back out of the queue ([`CompChannel::discard`], [`AsyncEventFile::discard`])
//! and reports the difference, which is the number the kernel would report.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::sys::socket::{recv, shutdown, socketpair, AddressFamily, MsgFlags, Shutdown, SockFlag, SockType};
use zerocopy::IntoBytes;

use uverbs::sys::verbs::{AsyncEventDesc, CompEventDesc};

use super::Live;

/// The HCA's end of an event fd, and the identity of the application's end.
#[derive(Debug)]
pub(crate) struct EventQueue {
    ours: OwnedFd,
    /// A second descriptor of the application's end (same open file), read only by
    /// [`EventQueue::discard`] with `MSG_DONTWAIT`, so its blocking mode stays the
    /// application's.
    theirs: OwnedFd,
    /// Serialises discards (each drains and refills the whole queue).
    discarding: Mutex<()>,
    /// `(st_dev, st_ino)` of the application's end, to recognise the fd when an
    /// application passes it back (CREATE_CQ's completion channel).
    app_id: (u64, u64),
}

/// `(st_dev, st_ino)` of an open fd, or EBADF.
pub(crate) fn fd_identity(fd: RawFd) -> Result<(u64, u64), Errno> {
    let st = nix::sys::stat::fstat(fd).map_err(|_| Errno::EBADF)?;
    Ok((st.st_dev, st.st_ino))
}

impl EventQueue {
    /// A new socket pair: the queue and the application's end.
    pub(crate) fn new() -> io::Result<(EventQueue, OwnedFd)> {
        let (ours, app) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None,
                                     SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK)?;
        // The application's end blocks by default, like the kernel's event files.
        let fl = nix::fcntl::fcntl(app.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)?;
        let fl = nix::fcntl::OFlag::from_bits_truncate(fl) & !nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(app.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(fl))?;
        shutdown(app.as_raw_fd(), Shutdown::Write)?;
        shutdown(ours.as_raw_fd(), Shutdown::Read)?;
        let app_id = fd_identity(app.as_raw_fd()).map_err(io::Error::from)?;
        let theirs = app.try_clone()?;
        Ok((EventQueue { ours, theirs, discarding: Mutex::new(()), app_id }, app))
    }

    /// Whether `fd` is the application's end of this queue.
    pub(crate) fn is_app_end(&self, id: (u64, u64)) -> bool {
        self.app_id == id
    }

    /// Queues one record. False when the application's end is gone or its receive buffer
    /// is full (the event is dropped; the kernel would queue without bound).
    fn send(&self, record: &[u8]) -> bool {
        matches!(nix::unistd::write(self.ours.as_fd(), record), Ok(n) if n == record.len())
    }

    /// Removes the unread records of `N` bytes that `drop_it` selects and returns how
    /// many it removed. The other records are queued again in their order; records the
    /// device queues meanwhile may end up before them (events of different objects have
    /// no order the application could rely on). An application thread blocked in read()
    /// may take any record while this runs: it then counts as read.
    fn discard<const N: usize>(&self, drop_it: impl Fn(&[u8; N]) -> bool) -> u32 {
        let _g = self.discarding.lock().unwrap_or_else(|e| e.into_inner());
        let mut keep = Vec::new();
        let mut dropped = 0;
        loop {
            let mut rec = [0u8; N];
            match recv(self.theirs.as_raw_fd(), &mut rec, MsgFlags::MSG_DONTWAIT) {
                Ok(n) if n == N => {
                    if drop_it(&rec) {
                        dropped += 1;
                    } else {
                        keep.push(rec);
                    }
                }
                // A record of another size is not ours to judge (never happens: one queue
                // carries one kind); it is dropped rather than requeued in pieces.
                Ok(0) | Err(Errno::EAGAIN) => break,
                Ok(_) => {}
                Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        for rec in &keep {
            // The queue had room for these a moment ago.
            let _ = self.send(rec);
        }
        dropped
    }
}

/// A completion channel (`ib_uverbs_completion_event_file`).
#[derive(Debug)]
pub struct CompChannel {
    pub(crate) queue: EventQueue,
    pub(crate) _live: Live,
}

impl CompChannel {
    /// Delivers a completion event for the CQ whose `user_handle` is given (what
    /// `ibv_get_cq_event` reads back as the `struct ibv_cq *`). Device half.
    pub fn notify(&self, cq_user_handle: u64) -> bool {
        self.queue.send(CompEventDesc { cq_handle: cq_user_handle }.as_bytes())
    }

    /// Takes the unread events of the CQ with `cq_user_handle` out of the channel
    /// (DESTROY_CQ) and returns how many there were.
    pub fn discard(&self, cq_user_handle: u64) -> u32 {
        self.queue.discard::<8>(|r| u64::from_ne_bytes(*r) == cq_user_handle)
    }
}

/// An async event file (`ib_uverbs_async_event_file`).
#[derive(Debug)]
pub struct AsyncEventFile {
    pub(crate) queue: EventQueue,
    pub(crate) _live: Live,
}

impl AsyncEventFile {
    /// Delivers one async event: `element` is the CQ/QP `user_handle` (or the port number
    /// for port events), `event_type` an `ib_event_type` (`uverbs::sys::verbs::event`).
    pub fn post(&self, element: u64, event_type: u32) -> bool {
        self.queue.send(AsyncEventDesc { element, event_type, reserved: 0 }.as_bytes())
    }

    /// Takes the unread async events whose element is `user_handle` (a CQ's or QP's)
    /// out of the file (DESTROY_CQ/DESTROY_QP) and returns how many there were.
    pub fn discard(&self, user_handle: u64) -> u32 {
        self.queue.discard::<16>(|r| u64::from_ne_bytes(r[..8].try_into().unwrap()) == user_handle)
    }
}

/// A DevX async command fd (`MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD`): each read() returns
/// one `mlx5_ib_uapi_devx_async_cmd_hdr` (the caller's `wr_id`) followed by the outbox
/// of one DEVX_OBJ_ASYNC_QUERY.
#[derive(Debug)]
pub struct DevxCmdFile {
    pub(crate) queue: EventQueue,
    pub(crate) _live: Live,
}

impl DevxCmdFile {
    /// Queues the answer of one asynchronous command.
    pub fn post(&self, wr_id: u64, outbox: &[u8]) -> bool {
        let mut rec = Vec::with_capacity(8 + outbox.len());
        rec.extend_from_slice(&wr_id.to_ne_bytes());
        rec.extend_from_slice(outbox);
        self.queue.send(&rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DESTROY_CQ takes a CQ's unread events out of a shared channel and keeps the others.
    #[test]
    fn discard_takes_out_only_the_objects_unread_records() {
        let (q, app) = EventQueue::new().unwrap();
        for h in [7u64, 9, 7, 11, 7] {
            assert!(q.send(&h.to_ne_bytes()));
        }
        // The application reads the first one (counted as read, not discarded).
        let mut rec = [0u8; 8];
        assert_eq!(nix::unistd::read(app.as_raw_fd(), &mut rec).unwrap(), 8);
        assert_eq!(u64::from_ne_bytes(rec), 7);
        assert_eq!(q.discard::<8>(|r| u64::from_ne_bytes(*r) == 7), 2);
        let mut left = Vec::new();
        while let Ok(8) = recv(app.as_raw_fd(), &mut rec, MsgFlags::MSG_DONTWAIT) {
            left.push(u64::from_ne_bytes(rec));
        }
        assert_eq!(left, [9, 11]);
        assert_eq!(q.discard::<8>(|_| true), 0, "empty queue");
        // The application's end still blocks (the discard used MSG_DONTWAIT only).
        let fl = nix::fcntl::fcntl(app.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(fl & libc::O_NONBLOCK, 0);
    }
}
