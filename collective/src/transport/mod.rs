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

    /// Registers `[addr, addr + len)` for local use and remote writes.
    ///
    /// # Safety
    /// The memory must stay mapped, and not be handed to other owners, until the
    /// transport is dropped: peers may write it at any time while it is registered.
    unsafe fn register(&mut self, addr: u64, len: usize) -> Result<Keys>;

    /// What the peer of `link` needs to connect to us (opaque to the bootstrap).
    fn conn_info(&self, link: usize) -> Vec<u8>;

    /// Connects `link` with the peer's [`Transport::conn_info`] for us.
    fn connect(&mut self, link: usize, peer_info: &[u8]) -> Result<()>;

    /// A local key for application memory `[addr, addr + len)` that writes may be sent
    /// straight from (with `user` set in [`Transport::write_imm`]), or `None` where this
    /// transport can only send from memory it registered with [`Transport::register`].
    ///
    /// The registration may be kept and handed out again for a later call that covers
    /// the same range, so a transport answers only where that is safe whatever the
    /// application does with the memory in between. On a device that pins the pages of
    /// a registration, a buffer freed and reallocated at the same address would no
    /// longer be the registered memory; that needs an invalidation hook this crate does
    /// not have, so such devices answer `None`.
    ///
    /// # Safety
    /// The memory must stay mapped, readable (and, with `writable`, writable) until the
    /// last write sent from it has been settled ([`Transport::settle`]).
    unsafe fn user_lkey(&mut self, _addr: u64, _len: usize, _writable: bool) -> Result<Option<u32>> {
        Ok(None)
    }

    /// Keys for application memory `[addr, addr + len)` that peers may write into
    /// (direct all-gather, [`crate::direct`]), or `None` where this transport cannot
    /// offer that. Kept registrations follow the rules of [`Transport::user_lkey`];
    /// [`Transport::abandon`] drops them, so that nothing lands in the memory after a
    /// failed call has handed it back.
    ///
    /// # Safety
    /// The memory must stay mapped and writable until the peers' writes into it have
    /// arrived, or until [`Transport::abandon`].
    unsafe fn user_rkey(&mut self, _addr: u64, _len: usize) -> Result<Option<Keys>> {
        Ok(None)
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
    /// nothing reads application memory for a write posted with `user` any more, and
    /// that no peer can write into application memory registered with
    /// [`Transport::user_rkey`] (the application may free it as soon as it has the
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
