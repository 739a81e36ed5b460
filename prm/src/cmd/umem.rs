//! CREATE_UMEM / DESTROY_UMEM: user memory the device may reach, described by a list
//! of page addresses (MTT entries) that CQ, QP and mkey contexts then name by
//! `umem_id` and an offset.
//!
//! The page list follows [`Umem`] in the inbox (`mtt[]`, the tail): `num_of_mtt`
//! entries of [`Mtt`], each the address of one page of `4096 << log_page_size` bytes;
//! the UMEM starts `page_offset` bytes into the first page.

use crate::layout;

layout! {
    /// One page-list entry: a page address with its access bits (the address's low
    /// 12 bits are not stored: `ptag_31_8` keeps bits 31..8 and pages are 4 KiB-aligned).
    pub struct Mtt = mtt {
        ptag_63_32: 0x20,
        ptag_31_8: 0x18,
        reserved_at_38: [0x6],
        wr_en: 0x1,
        rd_en: 0x1,
    }
}

impl Mtt {
    /// The page address an entry holds.
    pub fn addr(v: &crate::bits::View<'_, Mtt>) -> u64 {
        (v.get(Mtt::ptag_63_32) as u64) << 32 | (v.get(Mtt::ptag_31_8) as u64) << 8
    }
}

layout! {
    /// The UMEM context.
    pub struct Umem = umem {
        reserved_at_0: [0x80],
        reserved_at_80: [0x1b],
        /// log2 of the page size in 4 KiB units.
        log_page_size: 0x5,
        /// Where the UMEM starts in the first page, in bytes.
        page_offset: 0x20,
        num_of_mtt: 0x40,
    }
}

layout! {
    /// CREATE_UMEM inbox; the page list follows.
    pub struct CreateUmemIn = create_umem_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        umem: Umem,
    }
}

layout! {
    /// CREATE_UMEM outbox: the new UMEM's id.
    pub struct CreateUmemOut = create_umem_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        umem_id: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_UMEM inbox.
    pub struct DestroyUmemIn = destroy_umem_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        umem_id: 0x18,
        reserved_at_60: [0x20],
    }
}
