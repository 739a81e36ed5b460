//! Protection domain: the HCA's PD number. MRs, QPs and AHs name their PD; the device half
//! checks that a work request's keys belong to the QP's PD.

use std::sync::atomic::{AtomicU32, Ordering};

use super::Live;

/// A protection domain (`struct ib_pd` + the mlx5 PD number).
#[derive(Debug)]
pub struct Pd {
    /// The PD number the HCA puts into MKey and QP contexts. Written once by the kernel half.
    pub pdn: u32,
    /// How many MRs, QPs and AHs use this PD (`pd->usecnt`): the kernel half refuses to
    /// destroy a PD in use (EBUSY). Kernel half only.
    pub(crate) usecnt: AtomicU32,
    pub(crate) _live: Live,
}

impl Pd {
    pub(crate) fn new(pdn: u32, live: Live) -> Pd {
        Pd { pdn, usecnt: AtomicU32::new(0), _live: live }
    }

    /// Objects currently using this PD.
    pub fn usecnt(&self) -> u32 {
        self.usecnt.load(Ordering::SeqCst)
    }
}
