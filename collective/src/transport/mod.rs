//! What the collectives need from a network: registered memory, one connection
//! ("link") per peer, RDMA WRITE WITH IMM into the peer's memory, zero-byte
//! notifications, and a completion stream of arrivals and failures.
//!
//! [`rdma::RdmaTransport`] is the real one: RC QPs on a provider [`Context`]
//! (softhca by default). [`mem::MemFabric`] connects ranks that are threads of one
//! process through shared memory with the same semantics; the algorithm tests use it
//! to check plans, credits and reductions independently of any device.
//!
//! [`Context`]: provider::Context

pub mod mem;
pub mod rdma;

use crate::error::Result;
use crate::staging::Staging;

/// Application memory lent to [`Transport::reg_user`] for one call.
#[derive(Debug)]
pub enum UserMem<'a> {
    /// Sent from only (an out-of-place send buffer): the device only reads it.
    Read(&'a [u8]),
    /// The receive buffer (or the one buffer of an in-place call): sent from, and with
    /// `remote` written by peers.
    Write(&'a mut [u8], bool),
}

impl UserMem<'_> {
    /// Bytes lent.
    pub fn len(&self) -> usize {
        match self {
            UserMem::Read(b) => b.len(),
            UserMem::Write(b, _) => b.len(),
        }
    }

    /// Nothing lent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first byte, derived from the borrow (writable only for [`UserMem::Write`]):
    /// what the engine uses for memory no transport registered.
    pub fn ptr(self) -> *mut u8 {
        match self {
            UserMem::Read(b) => b.as_ptr().cast_mut(),
            UserMem::Write(b, _) => b.as_mut_ptr(),
        }
    }
}

/// Anything that ends a registration when dropped (a provider MR over a borrow, a
/// fabric key), type-erased so that every transport can return its own.
pub trait Registration {}
impl<T> Registration for T {}

/// A registration of application memory for one call ([`Transport::reg_user`]).
pub struct UserMr<'a> {
    pub keys: Keys,
    /// The first byte, derived from the borrow the registration holds: the engine's
    /// reads and writes of the buffer go through it while the registration lives.
    pub ptr: *mut u8,
    pub len: usize,
    pub guard: Box<dyn Registration + 'a>,
}

impl std::fmt::Debug for UserMr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserMr").field("keys", &self.keys).field("ptr", &self.ptr).field("len", &self.len).finish_non_exhaustive()
    }
}

/// Keys of a registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Keys {
    pub lkey: u32,
    pub rkey: u32,
}

/// Something that happened on a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A WRITE WITH IMM (or a notification) from the peer of `link` completed here.
    Recv { link: usize, imm: u32, len: u32 },
    /// The link broke (retry exceeded, remote access error, flush...).
    Failed { link: usize, why: String },
}

/// A network the engine can run collectives over.
pub trait Transport {
    /// A short description for logs ("rdma softhca0 127.0.0.3", "mem").
    fn describe(&self) -> String;

    /// Registers `mem` for local use and remote writes, and keeps it (registered) until
    /// the transport is dropped: peers may write it at any time meanwhile. Its address
    /// (read before the call) stays valid that long.
    fn register(&mut self, mem: Staging) -> Result<Keys>;

    /// What the peer of `link` needs to connect to us (opaque to the bootstrap).
    fn conn_info(&self, link: usize) -> Vec<u8>;

    /// Connects `link` with the peer's [`Transport::conn_info`] for us.
    fn connect(&mut self, link: usize, peer_info: &[u8]) -> Result<()>;

    /// Registers the application's memory for the duration of one call, where this
    /// transport can send from it (and, with [`UserMem::Write`]'s `remote`, let peers
    /// write into it: the direct all-gather, [`crate::direct`]). Where it cannot (or
    /// the device refuses), the memory comes back and the engine stages instead.
    ///
    /// The borrow in `mem` is held by the returned [`UserMr`] and the registration
    /// ends when it is dropped, at the end of the call, so no registration outlives the
    /// memory: a kept registration would need the invalidation hooks (a buffer freed and
    /// mapped again at the same address) that this crate does not have. The engine
    /// reaches the bytes through [`UserMr::ptr`] while it lives.
    fn reg_user<'a>(&mut self, mem: UserMem<'a>) -> std::result::Result<UserMr<'a>, UserMem<'a>> {
        Err(mem)
    }

    /// Writes `len` bytes from registered local memory at `src` (key `lkey`) to the
    /// peer's registered memory at `dst` (key `rkey`) and delivers `imm` to the peer
    /// after the data. The source must not change until the peer acknowledges the
    /// data at the protocol level (a credit), or, for a source in application memory
    /// (`user`), until [`Transport::settle`] returns.
    #[allow(clippy::too_many_arguments)]
    fn write_imm(&mut self, link: usize, src: u64, lkey: u32, len: u32, dst: u64, rkey: u32, imm: u32, user: bool) -> Result<()>;

    /// Returns once every write posted with `user` set has been read from its source
    /// and every posted write and notification is on its way, so that the collective
    /// can return and the application may change its buffers. Fails with the broken
    /// link, or after `timeout`.
    fn settle(&mut self, _timeout: std::time::Duration) -> Result<()> {
        Ok(())
    }

    /// After a failure, when the collective returns without settling: makes sure
    /// nothing reads application memory for a write posted with `user` any more (the
    /// engine then drops the call's [`UserMr`]s, after which no peer can write into the
    /// application's memory either: the application may free it as soon as it has the
    /// error). The links may be unusable afterwards; the engine refuses further work
    /// after a failure anyway.
    fn abandon(&mut self) {}

    /// Delivers `imm` to the peer with no data (a zero-byte WRITE WITH IMM).
    fn notify(&mut self, link: usize, imm: u32) -> Result<()>;

    /// Appends whatever happened since the last call; never blocks.
    fn poll(&mut self, out: &mut Vec<Event>) -> Result<()>;

    /// Sleeps until something may have happened (or `timeout` passed), leaving the
    /// CPU to others; events are then collected by [`Transport::poll`].
    fn wait(&mut self, timeout: std::time::Duration) -> Result<()> {
        std::thread::sleep(timeout.min(std::time::Duration::from_micros(50)));
        Ok(())
    }
}
