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

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::socket::{shutdown, socketpair, AddressFamily, Shutdown, SockFlag, SockType};
use zerocopy::IntoBytes;

use uverbs::sys::verbs::{AsyncEventDesc, CompEventDesc};

use super::Live;

/// The HCA's end of an event fd, and the identity of the application's end.
#[derive(Debug)]
pub(crate) struct EventQueue {
    ours: OwnedFd,
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
        Ok((EventQueue { ours, app_id }, app))
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
}
