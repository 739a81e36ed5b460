//! An in-process fabric: ranks are threads, "RDMA writes" are bounds-checked memory
//! copies into the peer's registered staging, and arrivals go to the peer's mailbox
//! in order, exactly as an RC QP delivers them. It also provides the bootstrap
//! exchange for such ranks ([`MemExchange`]).
//!
//! Like a NIC, which reads a write's source some time after the post, the fabric
//! carries out writes and notifications only at the sender's next `poll`, `wait` or
//! `settle`, in the order they were posted. So an engine that changed a source before
//! it was sent (a send slot reused too early, an application buffer written while a
//! write from it is in flight) delivers wrong data here too, and the algorithm tests
//! see it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use super::{Event, Keys, Transport, UserMem, UserMr};
use crate::staging::Staging;
use crate::bootstrap::Exchange;
use crate::error::{Error, Result};

#[derive(Debug)]
struct Region {
    addr: u64,
    len: usize,
    owner: usize,
}

#[derive(Debug)]
struct Fabric {
    nranks: usize,
    mailboxes: Vec<Mutex<VecDeque<(usize, u32, u32)>>>,
    regions: Mutex<HashMap<u32, Region>>,
    next_key: AtomicU32,
    barrier: Barrier,
    gather: Mutex<Vec<Vec<u8>>>,
}

impl Fabric {
    fn add_region(&self, addr: u64, len: usize, owner: usize) -> u32 {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        self.regions.lock().unwrap().insert(key, Region { addr, len, owner });
        key
    }
}

/// A call's registration of application memory: the region goes with it.
struct FabricKey {
    fabric: Arc<Fabric>,
    key: u32,
}

impl Drop for FabricKey {
    fn drop(&mut self) {
        self.fabric.regions.lock().unwrap().remove(&self.key);
    }
}

/// A set of `nranks` in-process endpoints.
#[derive(Debug, Clone)]
pub struct MemFabric {
    inner: Arc<Fabric>,
}

impl MemFabric {
    pub fn new(nranks: usize) -> MemFabric {
        MemFabric {
            inner: Arc::new(Fabric {
                nranks,
                mailboxes: (0..nranks).map(|_| Mutex::new(VecDeque::new())).collect(),
                regions: Mutex::new(HashMap::new()),
                next_key: AtomicU32::new(0x100),
                barrier: Barrier::new(nranks),
                gather: Mutex::new(vec![Vec::new(); nranks]),
            }),
        }
    }

    pub fn nranks(&self) -> usize {
        self.inner.nranks
    }

    /// Rank `rank`'s transport, with links to `peers` (link `i` = `peers[i]`).
    pub fn transport(&self, rank: usize, peers: &[usize]) -> MemTransport {
        MemTransport {
            fabric: self.inner.clone(),
            rank,
            peers: peers.to_vec(),
            link_of: peers.iter().enumerate().map(|(l, &p)| (p, l)).collect(),
            keys: Vec::new(),
            stagings: Vec::new(),
            outbox: Vec::new(),
        }
    }

    /// Rank `rank`'s bootstrap exchange.
    pub fn exchange(&self, rank: usize) -> MemExchange {
        MemExchange { fabric: self.inner.clone(), rank }
    }
}

/// One rank's endpoint of a [`MemFabric`].
#[derive(Debug)]
pub struct MemTransport {
    fabric: Arc<Fabric>,
    rank: usize,
    peers: Vec<usize>,
    link_of: HashMap<usize, usize>,
    keys: Vec<u32>,
    /// The staging mappings it registered (dropped after their regions, in Drop).
    stagings: Vec<Staging>,
    /// Posted and not carried out yet: (link, source, lkey, length, destination,
    /// rkey, immediate); a notification has length 0 and no addresses.
    outbox: Vec<(usize, u64, u32, u32, u64, u32, u32)>,
}

impl MemTransport {
    /// Carries out what was posted, in order.
    fn deliver(&mut self) -> Result<()> {
        for (link, src, lkey, len, dst, rkey, imm) in std::mem::take(&mut self.outbox) {
            let peer = self.peers[link];
            if len > 0 {
                let regions = self.fabric.regions.lock().unwrap();
                let inside = |key: u32, addr: u64, owner: usize| {
                    regions.get(&key).is_some_and(|r| r.owner == owner && addr >= r.addr && addr + len as u64 <= r.addr + r.len as u64)
                };
                if !inside(lkey, src, self.rank) {
                    return Err(Error::Invalid(format!("mem: local protection error at {src:#x}+{len}")));
                }
                if !inside(rkey, dst, peer) {
                    return Err(Error::PeerFailed { rank: peer, why: format!("remote access error at {dst:#x}+{len}") });
                }
                // SAFETY: both ranges lie inside live registered regions (checked above,
                // under the lock that unregistering takes before memory is unmapped);
                // the destination is the peer's staging, which no source overlaps.
                unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, len as usize) };
            }
            self.fabric.mailboxes[peer].lock().unwrap().push_back((self.rank, imm, len));
        }
        Ok(())
    }
}

impl Transport for MemTransport {
    fn describe(&self) -> String {
        format!("mem rank {} of {}", self.rank, self.fabric.nranks)
    }

    fn register(&mut self, mem: Staging) -> Result<Keys> {
        let key = self.fabric.add_region(mem.addr(), mem.len(), self.rank);
        self.keys.push(key);
        self.stagings.push(mem);
        Ok(Keys { lkey: key, rkey: key })
    }

    fn conn_info(&self, _link: usize) -> Vec<u8> {
        (self.rank as u32).to_le_bytes().to_vec()
    }

    fn connect(&mut self, link: usize, peer_info: &[u8]) -> Result<()> {
        let r = u32::from_le_bytes(peer_info.try_into().map_err(|_| Error::Invalid("mem: bad connection info".into()))?);
        if r as usize != self.peers[link] {
            return Err(Error::Invalid(format!("mem: link {link} expects rank {}, got {r}", self.peers[link])));
        }
        Ok(())
    }

    /// Any buffer: a region of the fabric for the call, removed when the call drops
    /// the registration (writes checked against it after that fail, as a late write
    /// into deregistered memory does on a NIC).
    fn reg_user<'a>(&mut self, mem: UserMem<'a>) -> std::result::Result<UserMr<'a>, UserMem<'a>> {
        let (ptr, len) = match mem {
            UserMem::Read(b) => (b.as_ptr().cast_mut(), b.len()),
            UserMem::Write(b, _) => (b.as_mut_ptr(), b.len()),
        };
        let key = self.fabric.add_region(ptr as u64, len, self.rank);
        let guard = FabricKey { fabric: self.fabric.clone(), key };
        Ok(UserMr { keys: Keys { lkey: key, rkey: key }, ptr, len, guard: Box::new(guard) })
    }

    fn write_imm(&mut self, link: usize, src: u64, lkey: u32, len: u32, dst: u64, rkey: u32, imm: u32, _user: bool) -> Result<()> {
        self.outbox.push((link, src, lkey, len, dst, rkey, imm));
        Ok(())
    }

    fn notify(&mut self, link: usize, imm: u32) -> Result<()> {
        self.outbox.push((link, 0, 0, 0, 0, 0, imm));
        Ok(())
    }

    fn settle(&mut self, _timeout: std::time::Duration) -> Result<()> {
        self.deliver()
    }

    fn abandon(&mut self) {
        // Nothing posted is carried out any more; the call's registrations go when the
        // engine drops them.
        self.outbox.clear();
    }

    fn wait(&mut self, timeout: std::time::Duration) -> Result<()> {
        self.deliver()?;
        std::thread::sleep(timeout.min(std::time::Duration::from_micros(50)));
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Event>) -> Result<()> {
        self.deliver()?;
        let mut mb = self.fabric.mailboxes[self.rank].lock().unwrap();
        for (from, imm, len) in mb.drain(..) {
            match self.link_of.get(&from) {
                Some(&link) => out.push(Event::Recv { link, imm, len }),
                None => return Err(Error::Protocol { rank: from, why: "message from a rank with no link".into() }),
            }
        }
        Ok(())
    }
}

impl Drop for MemTransport {
    fn drop(&mut self) {
        let mut r = self.fabric.regions.lock().unwrap();
        for k in &self.keys {
            r.remove(k);
        }
    }
}

/// The bootstrap exchange of threads sharing a [`MemFabric`].
#[derive(Debug)]
pub struct MemExchange {
    fabric: Arc<Fabric>,
    rank: usize,
}

impl Exchange for MemExchange {
    fn all_gather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.fabric.gather.lock().unwrap()[self.rank] = blob.to_vec();
        self.fabric.barrier.wait();
        let all = self.fabric.gather.lock().unwrap().clone();
        self.fabric.barrier.wait();
        Ok(all)
    }

    fn barrier(&mut self) -> Result<()> {
        self.fabric.barrier.wait();
        Ok(())
    }
}
