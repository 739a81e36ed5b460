//! The builders' bytes at the offsets `mlx5_ifc.h` gives (rdma-core's
//! providers/mlx5/mlx5_ifc.h and, for the CQ context and `wq_umem_offset`, the
//! kernel's include/linux/mlx5/mlx5_ifc.h): every expected position below is a
//! number read from those structures (bit offset / 8 = byte, field widths from
//! the same lines), not from the `prm` layouts the builders use.

use super::caps::query_hca_cap_in;
use super::cq::{create_cq_in, CqParams, UmemRef};
use super::mkey::{create_mkey_in, MkeyParams};
use super::qp::*;

fn be32(b: &[u8], byte: usize) -> u32 {
    u32::from_be_bytes(b[byte..byte + 4].try_into().unwrap())
}

fn be64(b: &[u8], byte: usize) -> u64 {
    u64::from_be_bytes(b[byte..byte + 8].try_into().unwrap())
}

#[test]
fn query_hca_cap_inbox() {
    // query_hca_cap_in: 0x80 bits; opcode @0 (0x100), op_mod @0x30
    let b = query_hca_cap_in(0x4, true);
    assert_eq!(b.len(), 0x10);
    assert_eq!(&b[0..2], &[0x01, 0x00]);
    // RoCE page (4) << 1 | current
    assert_eq!(&b[6..8], &[0x00, 0x09]);
    assert!(b[2..6].iter().chain(&b[8..]).all(|&x| x == 0));
}

#[test]
fn create_cq_inbox() {
    let b = create_cq_in(&CqParams {
        log_cq_size: 7,
        cqe_128: false,
        uar_page: 0x12345,
        c_eqn: 0x2a,
        buf: UmemRef { id: 0x1111, offset: 0x40 },
        dbr: UmemRef { id: 0x2222, offset: 0x80 },
    });
    // create_cq_in: 0x880 bits; opcode 0x400; cq_context @0x80 (byte 0x10)
    assert_eq!(b.len(), 0x110);
    assert_eq!(be32(&b, 0) >> 16, 0x400);
    // cqc: dbr_umem_valid @0x6 (1 bit)
    assert_eq!(b[0x10] & 0x02, 0x02);
    // cqc: dbr_umem_id @0x20
    assert_eq!(be32(&b, 0x14), 0x2222);
    // cqc: log_cq_size @0x63 (5), uar_page @0x68 (24)
    assert_eq!(be32(&b, 0x1c), (7 << 24) | 0x12345);
    // cqc: c_eqn @0xb8 (8)
    assert_eq!(be32(&b, 0x24) & 0xff, 0x2a);
    // cqc: dbr_addr @0x1c0 (64)
    assert_eq!(be64(&b, 0x48), 0x80);
    // create_cq_in: cq_umem_offset @0x280, cq_umem_id @0x2c0, cq_umem_valid @0x2e0
    assert_eq!(be64(&b, 0x50), 0x40);
    assert_eq!(be32(&b, 0x58), 0x1111);
    assert_eq!(b[0x5c] & 0x80, 0x80);
}

#[test]
fn create_qp_inbox() {
    let b = create_qp_in(&QpParams {
        kind: QpKind::Rc,
        pd: 0xabcd,
        cqn_snd: 0x401,
        cqn_rcv: 0x402,
        uar_page: 0x77,
        user_index: 0x55,
        log_sq_size: 6,
        log_rq_size: 5,
        log_rq_stride: 1,
        wq: UmemRef { id: 9, offset: 0x1000 },
        dbr: UmemRef { id: 10, offset: 0x40 },
    });
    // create_qp_in: 0x880 bits (plus pas); opcode 0x500; qpc @0xc0 (byte 0x18)
    assert_eq!(b.len(), 0x110);
    assert_eq!(be32(&b, 0) >> 16, 0x500);
    // qpc: st @0x8 (8) = RC 0; pm_state @0x13 (2) = MIGRATED 3
    assert_eq!(b[0x19], 0x00);
    assert_eq!((be32(&b, 0x18) >> 11) & 3, 3);
    // qpc: pd @0x28 (24)
    assert_eq!(be32(&b, 0x1c) & 0xff_ffff, 0xabcd);
    // qpc: log_rq_size @0x49 (4), log_rq_stride @0x4d (3), no_sq @0x50, log_sq_size @0x51 (4)
    let dw2 = be32(&b, 0x20);
    assert_eq!(((dw2 >> 19) & 0xf, (dw2 >> 16) & 7, (dw2 >> 15) & 1, (dw2 >> 11) & 0xf), (5, 1, 0, 6));
    // qpc: uar_page @0x68 (24), user_index @0x88 (24)
    assert_eq!(be32(&b, 0x24) & 0xff_ffff, 0x77);
    assert_eq!(be32(&b, 0x28) & 0xff_ffff, 0x55);
    // qpc: cqn_snd @0x3e8 (24), cqn_rcv @0x4e8 (24), dbr_addr @0x500 (64)
    assert_eq!(be32(&b, 0x18 + 0x7c) & 0xff_ffff, 0x401);
    assert_eq!(be32(&b, 0x18 + 0x9c) & 0xff_ffff, 0x402);
    assert_eq!(be64(&b, 0x18 + 0xa0), 0x40);
    // qpc: dbr_umem_valid @0x683 (1), dbr_umem_id @0x720 (32)
    assert_eq!(b[0x18 + 0xd0] & 0x10, 0x10);
    assert_eq!(be32(&b, 0x18 + 0xe4), 10);
    // create_qp_in: wq_umem_offset @0x800 (64), wq_umem_id @0x840, wq_umem_valid @0x860
    assert_eq!(be64(&b, 0x100), 0x1000);
    assert_eq!(be32(&b, 0x108), 9);
    assert_eq!(b[0x10c] & 0x80, 0x80);

    let ud = create_qp_in(&QpParams { kind: QpKind::Ud, ..QpParams {
        kind: QpKind::Rc, pd: 1, cqn_snd: 1, cqn_rcv: 1, uar_page: 1, user_index: 0, log_sq_size: 1,
        log_rq_size: 1, log_rq_stride: 0, wq: UmemRef::default(), dbr: UmemRef::default() } });
    // st UD = 2
    assert_eq!(ud[0x19], 0x02);
}

#[test]
fn transition_inboxes() {
    // rst2init_qp_in: opcode 0x502, qpn @0x48 (24), qpc @0xc0
    let b = rst2init_in(0x123456, &Rst2Init { port: 1, pkey_index: 3, remote_read: true, remote_write: false,
                                              remote_atomic: true, qkey: 0x1111_2222 });
    assert_eq!(b.len(), 0x110);
    assert_eq!(be32(&b, 0) >> 16, 0x502);
    assert_eq!(be32(&b, 8) & 0xff_ffff, 0x123456);
    // qpc: rre @0x490, rwe @0x491, rae @0x492 -> dword 36 bits 15, 14, 13
    let dw = be32(&b, 0x18 + 0x90);
    assert_eq!(((dw >> 15) & 1, (dw >> 14) & 1, (dw >> 13) & 1), (1, 0, 1));
    // qpc: q_key @0x540 (32)
    assert_eq!(be32(&b, 0x18 + 0xa8), 0x1111_2222);
    // qpc.primary_address_path @0xc0: ads.pkey_index @0x10 (16), ads.vhca_port_num @0x128 (8)
    assert_eq!(be32(&b, 0x18 + 0x18) & 0xffff, 3);
    assert_eq!((be32(&b, 0x18 + 0x18 + 0x24) >> 16) & 0xff, 1);

    let gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2];
    let b = init2rtr_in(7, &Init2Rtr {
        mtu: 3, log_msg_max: 30, remote_qpn: 0xbeef, next_rcv_psn: 0x10_2030, min_rnr_nak: 12, log_rra_max: 4,
        path: RocePath { port: 1, rgid: gid, sgid_index: 3, hop_limit: 64, udp_sport: 0xc123, ..Default::default() },
    });
    assert_eq!(be32(&b, 0) >> 16, 0x503);
    // qpc: mtu @0x40 (3), log_msg_max @0x43 (5)
    assert_eq!(b[0x18 + 8], (3 << 5) | 30);
    // qpc: remote_qpn @0xa8 (24)
    assert_eq!(be32(&b, 0x18 + 0x14) & 0xff_ffff, 0xbeef);
    // qpc: next_rcv_psn @0x4a8 (24), min_rnr_nak @0x4a3 (5)
    let dw = be32(&b, 0x18 + 0x94);
    assert_eq!((dw & 0xff_ffff, (dw >> 24) & 0x1f), (0x10_2030, 12));
    // qpc: log_rra_max @0x488 (3)
    assert_eq!((be32(&b, 0x18 + 0x90) >> 21) & 7, 4);
    // ads (@qpc 0xc0): grh @0x28, src_addr_index @0x48 (8), hop_limit @0x58 (8),
    // rgid_rip @0x80 (128), udp_sport @0x110 (16)
    let ads = 0x18 + 0x18;
    assert_eq!(b[ads + 5] & 0x80, 0x80);
    assert_eq!(be32(&b, ads + 8) >> 16 & 0xff, 3);
    assert_eq!(be32(&b, ads + 8) & 0xff, 64);
    assert_eq!(&b[ads + 0x10..ads + 0x20], &gid);
    assert_eq!(be32(&b, ads + 0x20) & 0xffff, 0xc123);

    let b = rtr2rts_in(7, &Rtr2Rts { next_send_psn: 0xabcdef, retry_count: 6, rnr_retry: 5, ack_timeout: 14, log_sra_max: 2 });
    assert_eq!(be32(&b, 0) >> 16, 0x504);
    // qpc: next_send_psn @0x3c8 (24)
    assert_eq!(be32(&b, 0x18 + 0x78) & 0xff_ffff, 0xabcdef);
    // qpc: log_sra_max @0x388 (3), retry_count @0x38d (3), rnr_retry @0x390 (3)
    let dw = be32(&b, 0x18 + 0x70);
    assert_eq!(((dw >> 21) & 7, (dw >> 16) & 7, (dw >> 13) & 7), (2, 6, 5));
    // ads.ack_timeout @0x40 (5)
    assert_eq!(b[0x18 + 0x18 + 8] >> 3, 14);

    for (b, op) in [(qp_2err_in(5), 0x507), (qp_2rst_in(5), 0x50a), (query_qp_in(5), 0x50b)] {
        assert_eq!(b.len(), 0x10);
        assert_eq!(be32(&b, 0) >> 16, op);
        assert_eq!(be32(&b, 8) & 0xff_ffff, 5);
    }
    let b = rts2rts_in(5, 0x20, |q| {
        q.set(prm::cmd::qp::Qpc::min_rnr_nak, 3);
    });
    assert_eq!(be32(&b, 0) >> 16, 0x505);
    // opt_param_mask @0x80
    assert_eq!(be32(&b, 0x10), 0x20);
}

#[test]
fn create_mkey_inbox() {
    let b = create_mkey_in(&MkeyParams {
        pd: 0x42, key_variant: 0x99, start_addr: 0x7000_0000, len: 0x3000, local_write: true, remote_read: true,
        remote_write: false, atomic: false, log_page_size: 12, mtts: vec![0x1000, 0x2000, 0x3000],
    });
    // create_mkey_in: 0x880 bits + klm_pas_mtt (2 octwords for 3 entries)
    assert_eq!(b.len(), 0x110 + 32);
    assert_eq!(be32(&b, 0) >> 16, 0x200);
    // memory_key_mkey_entry @0x80: mkc.lw @0x14, lr @0x15, rr @0x13, access_mode_1_0 @0x16 (2)
    let dw0 = be32(&b, 0x10);
    assert_eq!(((dw0 >> 11) & 1, (dw0 >> 10) & 1, (dw0 >> 12) & 1, (dw0 >> 8) & 3), (1, 1, 1, 1));
    // mkc.mkey_7_0 @0x38 (8), pd @0x68 (24), start_addr @0x80, len @0xc0
    assert_eq!(b[0x10 + 7], 0x99);
    assert_eq!(be32(&b, 0x10 + 0xc) & 0xff_ffff, 0x42);
    assert_eq!(be64(&b, 0x10 + 0x10), 0x7000_0000);
    assert_eq!(be64(&b, 0x10 + 0x18), 0x3000);
    // mkc.translations_octword_size @0x1a0, log_page_size @0x1db (5)
    assert_eq!(be32(&b, 0x10 + 0x34), 2);
    assert_eq!(be32(&b, 0x10 + 0x38) & 0x1f, 12);
    // create_mkey_in.translations_octword_actual_size @0x300, then the MTT list @0x880
    assert_eq!(be32(&b, 0x60), 2);
    assert_eq!((be64(&b, 0x110), be64(&b, 0x118), be64(&b, 0x120), be64(&b, 0x128)), (0x1000, 0x2000, 0x3000, 0));
}
