//! CREATE_MKEY: a memory key over a page list (MTT access mode).

use prm::cmd::mkey::{access_mode, CreateMkeyIn, Mkc};
use prm::cmd::opcode;

use super::{inbox, view};

/// What a DevX mkey covers and allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MkeyParams {
    pub pd: u32,
    /// The variant byte (`mkey_7_0`): the low byte of the resulting key.
    pub key_variant: u8,
    pub start_addr: u64,
    pub len: u64,
    pub local_write: bool,
    pub remote_read: bool,
    pub remote_write: bool,
    pub atomic: bool,
    /// log2 of the page size of `mtts` (12 for 4 KiB pages).
    pub log_page_size: u8,
    /// The device addresses of the pages, in order (the `klm_pas_mtt` list).
    pub mtts: Vec<u64>,
}

/// The CREATE_MKEY inbox, with the MTT list as its tail (8 bytes per page, padded to
/// whole 16-byte octwords as `translations_octword_size` counts them).
pub fn create_mkey_in(p: &MkeyParams) -> Vec<u8> {
    let octwords = p.mtts.len().div_ceil(2);
    let mut b = inbox::<CreateMkeyIn>(opcode::CREATE_MKEY, octwords * 16);
    let mut v = view::<CreateMkeyIn>(&mut b);
    v.set(CreateMkeyIn::translations_octword_actual_size, octwords as u32);
    let mut m = v.sub_mut(CreateMkeyIn::memory_key_mkey_entry);
    m.set(Mkc::access_mode_1_0, access_mode::MTT)
        .set(Mkc::lr, true)
        .set(Mkc::lw, p.local_write)
        .set(Mkc::rr, p.remote_read)
        .set(Mkc::rw, p.remote_write)
        .set(Mkc::a, p.atomic)
        .set(Mkc::qpn, 0xff_ffff)
        .set(Mkc::mkey_7_0, p.key_variant)
        .set(Mkc::pd, p.pd)
        .set(Mkc::start_addr, p.start_addr)
        .set(Mkc::len, p.len)
        .set(Mkc::translations_octword_size, octwords as u32)
        .set(Mkc::log_page_size, p.log_page_size);
    for (e, a) in v.tail_mut().chunks_exact_mut(8).zip(&p.mtts) {
        e.copy_from_slice(&a.to_be_bytes());
    }
    b
}
