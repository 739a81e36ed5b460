//! The raw Ethernet queue layouts ([`wq`], [`sq`], [`rq`], [`tis`], [`tir`]) against
//! offsets read off the kernel's `include/linux/mlx5/mlx5_ifc.h` (summing the
//! `u8 name[width]` widths of `mlx5_ifc_{wq,sqc,rqc,tisc,tirc}_bits` and the
//! create/modify/destroy mailboxes by hand), written down here; kept apart from
//! `tests.rs` so the flow steering layouts can grow there independently.

use super::*;
use crate::bits::{FieldInfo, Layout};

fn check<L: Layout>(bits: usize, rows: &[(&str, usize, usize)]) {
    assert_eq!(L::BITS, bits, "{} size", L::NAME);
    for &(name, off, width) in rows {
        let f = L::FIELDS.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{}: no field {name}", L::NAME));
        assert_eq!((f.bit_off, f.bits), (off, width), "{}.{name}", L::NAME);
    }
    reserved_names::<L>();
}

/// Every `reserved_at_<hex>` states its own offset; fields tile the layout.
fn reserved_names<L: Layout>() {
    let fields: &[FieldInfo] = L::FIELDS;
    for f in fields.iter().filter(|f| f.is_reserved()) {
        let hex = f.name.strip_prefix("reserved_at_").unwrap();
        assert_eq!(usize::from_str_radix(hex, 16).unwrap(), f.bit_off, "{}.{}", L::NAME, f.name);
    }
    for w in fields.windows(2) {
        assert_eq!(w[0].bit_off + w[0].bits, w[1].bit_off, "{}: {} -> {}", L::NAME, w[0].name, w[1].name);
    }
}

#[test]
fn wq_matches_kernel() {
    check::<wq::Wq>(0x600, &[
        ("wq_type", 0, 4), ("wq_signature", 4, 1), ("end_padding_mode", 5, 2), ("page_offset", 0x2b, 5),
        ("lwm", 0x30, 0x10), ("pd", 0x48, 0x18), ("uar_page", 0x68, 0x18), ("dbr_addr", 0x80, 0x40),
        ("hw_counter", 0xc0, 0x20), ("sw_counter", 0xe0, 0x20), ("log_wq_stride", 0x10c, 4),
        ("log_wq_pg_sz", 0x113, 5), ("log_wq_sz", 0x11b, 5), ("dbr_umem_valid", 0x120, 1),
        ("wq_umem_valid", 0x121, 1), ("dbr_umem_id", 0x140, 0x20), ("wq_umem_id", 0x160, 0x20),
        ("wq_umem_offset", 0x180, 0x40),
    ]);
}

#[test]
fn sq_matches_kernel() {
    check::<sq::Sqc>(0x780, &[
        ("flush_in_error_en", 3, 1), ("allow_multi_pkt_send_wqe", 4, 1), ("min_wqe_inline_mode", 5, 3),
        ("state", 8, 4), ("allow_swp", 0xd, 1), ("user_index", 0x28, 0x18), ("cqn", 0x48, 0x18),
        ("packet_pacing_rate_limit_index", 0xf0, 0x10), ("tis_lst_sz", 0x100, 0x10),
        ("tis_num_0", 0x168, 0x18), ("wq", 0x180, 0x600),
    ]);
    check::<sq::CreateSqIn>(0x880, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("ctx", 0x100, 0x780)]);
    check::<sq::CreateSqOut>(0x80, &[("sqn", 0x48, 0x18)]);
    check::<sq::ModifySqIn>(0x880, &[
        ("sq_state", 0x40, 4), ("sqn", 0x48, 0x18), ("modify_bitmask", 0x80, 0x40), ("ctx", 0x100, 0x780),
    ]);
    check::<sq::DestroySqIn>(0x80, &[("sqn", 0x48, 0x18)]);
}

#[test]
fn rq_matches_kernel() {
    check::<rq::Rqc>(0x780, &[
        ("rlky", 0, 1), ("vsd", 3, 1), ("mem_rq_type", 4, 4), ("state", 8, 4), ("flush_in_error_en", 0xd, 1),
        ("user_index", 0x28, 0x18), ("cqn", 0x48, 0x18), ("counter_set_id", 0x60, 8), ("rmpn", 0x88, 0x18),
        ("wq", 0x180, 0x600),
    ]);
    check::<rq::CreateRqIn>(0x880, &[("ctx", 0x100, 0x780)]);
    check::<rq::CreateRqOut>(0x80, &[("rqn", 0x48, 0x18)]);
    check::<rq::ModifyRqIn>(0x880, &[("rq_state", 0x40, 4), ("rqn", 0x48, 0x18), ("ctx", 0x100, 0x780)]);
    check::<rq::DestroyRqIn>(0x80, &[("rqn", 0x48, 0x18)]);
}

#[test]
fn tis_tir_match_kernel() {
    check::<tis::Tisc>(0x500, &[
        ("lag_tx_port_affinity", 4, 4), ("prio", 0xc, 4), ("transport_domain", 0x128, 0x18),
        ("underlay_qpn", 0x148, 0x18), ("pd", 0x168, 0x18),
    ]);
    check::<tis::CreateTisIn>(0x600, &[("ctx", 0x100, 0x500)]);
    check::<tis::CreateTisOut>(0x80, &[("tisn", 0x48, 0x18)]);
    check::<tis::DestroyTisIn>(0x80, &[("tisn", 0x48, 0x18)]);
    check::<tir::Tirc>(0x780, &[
        ("disp_type", 0x20, 4), ("inline_rqn", 0xe8, 0x18), ("tunneled_offload_en", 0x102, 1),
        ("indirect_table", 0x108, 0x18), ("rx_hash_fn", 0x120, 4), ("self_lb_block", 0x126, 2),
        ("transport_domain", 0x128, 0x18), ("rx_hash_toeplitz_key", 0x140, 0x140),
        ("rx_hash_field_selector_outer", 0x280, 0x20),
    ]);
    check::<tir::CreateTirIn>(0x880, &[("ctx", 0x100, 0x780)]);
    check::<tir::CreateTirOut>(0x80, &[("syndrome", 0x20, 0x20), ("tirn", 0x48, 0x18)]);
    check::<tir::DestroyTirIn>(0x80, &[("tirn", 0x48, 0x18)]);
}

/// The opcodes of `enum mlx5_cmd_op` (kernel and rdma-core mlx5_ifc.h).
#[test]
fn raw_opcodes() {
    use opcode::*;
    assert_eq!(
        [CREATE_TIR, DESTROY_TIR, CREATE_SQ, MODIFY_SQ, DESTROY_SQ, CREATE_RQ, MODIFY_RQ, DESTROY_RQ, CREATE_TIS,
         DESTROY_TIS],
        [0x900, 0x902, 0x904, 0x905, 0x906, 0x908, 0x909, 0x90a, 0x912, 0x914]
    );
}
