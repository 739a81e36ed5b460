//! CREATE_CQ with the CQ buffer and its doorbell record in UMEMs.

use prm::cmd::cq::{cqe_sz, Cqc, CreateCqIn, DestroyCqIn};
use prm::cmd::opcode;

use super::{inbox, view};

/// Where a queue's memory is: a UMEM id and the byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UmemRef {
    pub id: u32,
    pub offset: u64,
}

/// What a DevX CQ is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqParams {
    /// log2 of the number of CQEs.
    pub log_cq_size: u8,
    /// 128-byte CQEs instead of 64.
    pub cqe_128: bool,
    /// The UAR page whose arm doorbell arms the CQ.
    pub uar_page: u32,
    /// The EQ completion events go to ([`DevxContext::query_eqn`](crate::DevxContext::query_eqn)).
    pub c_eqn: u8,
    /// The CQE ring.
    pub buf: UmemRef,
    /// The doorbell record (consumer index, arm word: 8 bytes).
    pub dbr: UmemRef,
}

/// The CREATE_CQ inbox: ring and doorbell record by UMEM, 4 KiB pages
/// (`log_page_size` 0, in 4 KiB units), no compression, no overrun ignore.
pub fn create_cq_in(p: &CqParams) -> Vec<u8> {
    let mut b = inbox::<CreateCqIn>(opcode::CREATE_CQ, 0);
    let mut v = view::<CreateCqIn>(&mut b);
    v.set(CreateCqIn::cq_umem_valid, true)
        .set(CreateCqIn::cq_umem_id, p.buf.id)
        .set(CreateCqIn::cq_umem_offset, p.buf.offset);
    let mut c = v.sub_mut(CreateCqIn::cq_context);
    c.set(Cqc::cqe_sz, if p.cqe_128 { cqe_sz::BYTES_128 } else { cqe_sz::BYTES_64 })
        .set(Cqc::log_cq_size, p.log_cq_size)
        .set(Cqc::uar_page, p.uar_page)
        .set(Cqc::c_eqn, p.c_eqn)
        .set(Cqc::log_page_size, 0)
        .set(Cqc::dbr_umem_valid, true)
        .set(Cqc::dbr_umem_id, p.dbr.id)
        .set(Cqc::dbr_addr, p.dbr.offset);
    b
}

/// The DESTROY_CQ inbox (what the kernel derives from the create on its own).
pub fn destroy_cq_in(cqn: u32) -> Vec<u8> {
    let mut b = inbox::<DestroyCqIn>(opcode::DESTROY_CQ, 0);
    view::<DestroyCqIn>(&mut b).set(DestroyCqIn::cqn, cqn);
    b
}
