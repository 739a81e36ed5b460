//! CREATE_MKEY and the memory key context (`mkc`).
//!
//! The mkey is `mkey_index << 8 | mkey_7_0`: the firmware picks the index, the
//! caller the low byte (the "variant"), which is how a real mkey's key byte changes
//! from one registration to the next. With `access_mode` MTT the page list
//! (`klm_pas_mtt`, 8 bytes per page) follows the inbox, or `mkey_umem_valid` names a
//! UMEM instead.

use crate::layout;

/// `mkc.access_mode_1_0` values.
pub mod access_mode {
    /// Physical addresses (kernel use).
    pub const PA: u8 = 0x0;
    /// A page list: what reg_mr makes.
    pub const MTT: u8 = 0x1;
    pub const KLMS: u8 = 0x2;
    /// Fixed-size indirect entries (`MLX5_MKC_ACCESS_MODE_KSM`).
    pub const KSM: u8 = 0x3;
}

layout! {
    /// The memory key context.
    pub struct Mkc = mkc {
        reserved_at_0: [0x1],
        free: 0x1,
        reserved_at_2: [0x1],
        access_mode_4_2: 0x3,
        reserved_at_6: [0x7],
        relaxed_ordering_write: 0x1,
        reserved_at_e: [0x1],
        small_fence_on_rdma_read_response: 0x1,
        umr_en: 0x1,
        a: 0x1,
        rw: 0x1,
        rr: 0x1,
        lw: 0x1,
        lr: 0x1,
        access_mode_1_0: 0x2,
        reserved_at_18: [0x8],
        qpn: 0x18,
        mkey_7_0: 0x8,
        reserved_at_40: [0x20],
        length64: 0x1,
        bsf_en: 0x1,
        sync_umr: 0x1,
        reserved_at_63: [0x2],
        expected_sigerr_count: 0x1,
        reserved_at_66: [0x1],
        en_rinval: 0x1,
        pd: 0x18,
        start_addr: 0x40,
        len: 0x40,
        bsf_octword_size: 0x20,
        reserved_at_120: [0x80],
        translations_octword_size: 0x20,
        reserved_at_1c0: [0x19],
        relaxed_ordering_read: 0x1,
        reserved_at_1da: [0x1],
        log_page_size: 0x5,
        reserved_at_1e0: [0x3],
        crypto_en: 0x2,
        reserved_at_1e5: [0x1b],
    }
}

layout! {
    /// CREATE_MKEY inbox: the context, then the page list (`klm_pas_mtt`, the tail).
    pub struct CreateMkeyIn = create_mkey_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x20],
        pg_access: 0x1,
        mkey_umem_valid: 0x1,
        reserved_at_62: [0x1e],
        memory_key_mkey_entry: Mkc,
        reserved_at_280: [0x80],
        translations_octword_actual_size: 0x20,
        reserved_at_320: [0x560],
    }
}

layout! {
    /// CREATE_MKEY outbox: the new key's index.
    pub struct CreateMkeyOut = create_mkey_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        mkey_index: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_MKEY inbox.
    pub struct DestroyMkeyIn = destroy_mkey_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        mkey_index: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_MKEY outbox.
    pub struct DestroyMkeyOut = destroy_mkey_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}
