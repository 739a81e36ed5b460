//! QUERY_HCA_CAP: one capability page per call.

use prm::bits::{Layout, View};
use prm::cmd::hca_cap::{op_mod, QueryHcaCapIn, QueryHcaCapOut};
use prm::cmd::opcode;

use super::{inbox, outbox, view};
use crate::context::DevxContext;
use crate::error::{Error, Result};

/// Byte offset of the capability page in the outbox.
const CAP_OFFSET: usize = 0x10;

/// The QUERY_HCA_CAP inbox for page `cap_type` (`prm::cmd::hca_cap::cap_type`),
/// current values or maxima.
pub fn query_hca_cap_in(cap_type: u16, current: bool) -> Vec<u8> {
    let mut b = inbox::<QueryHcaCapIn>(opcode::QUERY_HCA_CAP, 0);
    view::<QueryHcaCapIn>(&mut b).set(QueryHcaCapIn::op_mod, op_mod(cap_type, current));
    b
}

/// One capability page as the firmware answered it.
#[derive(Debug, Clone)]
pub struct CapPage {
    pub cap_type: u16,
    pub current: bool,
    out: Vec<u8>,
}

impl CapPage {
    /// The page's bytes (the outbox after its 16-byte header).
    pub fn bytes(&self) -> &[u8] {
        &self.out[CAP_OFFSET..]
    }

    /// The page as layout `L` (`CmdHcaCap` for the general page, `RoceCap`,
    /// `AtomicCaps`, `CmdHcaCap2`): every capability layout starts at the page's
    /// first byte (they are members of one union).
    pub fn view<L: Layout>(&self) -> Result<View<'_, L>> {
        View::new(self.bytes()).map_err(|e| Error::Invalid { op: "capability page", why: e.to_string() })
    }
}

impl DevxContext {
    /// `QUERY_HCA_CAP` of page `cap_type`.
    pub fn query_hca_cap(&self, cap_type: u16, current: bool) -> Result<CapPage> {
        let inb = query_hca_cap_in(cap_type, current);
        let mut out = outbox::<QueryHcaCapOut>();
        self.general_cmd(&inb, &mut out)?;
        Ok(CapPage { cap_type, current, out })
    }
}
