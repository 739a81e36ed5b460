//! Whole-WQE tests against hand-computed ring images. Expected bytes are spelled out
//! from the PRM layouts, not produced by the segment builders under test.

use super::*;
use crate::opcode::FmCeSe;

const FILL: u8 = 0xee;

fn ring_buf<const N: usize>() -> [u8; N] {
    [FILL; N]
}

/// RDMA WRITE with immediate, 150 bytes inline, posted at the last WQEBB of a
/// 4-WQEBB ring: the inline bytes run off the end and continue at offset 0.
#[test]
fn inline_wqe_wraps_around_ring_end() {
    let payload: Vec<u8> = (0..150u32).map(|i| (i * 7 + 1) as u8).collect();
    let (a, b) = payload.split_at(100); // two gather chunks, joined in the WQE
    let chunks: [&[u8]; 2] = [a, b];
    let wr = SendWr::new(
        SendOp::RdmaWriteImm {
            raddr: 0x0000_7f00_dead_0000,
            rkey: 0xcafe_0001,
            imm: 0x1234_5678,
        },
        Payload::Inline(&chunks),
    )
    .signaled();

    let mut buf = ring_buf::<256>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let info = write_send_wqe(&mut sq, 0xffff, 0x000abc, &wr).unwrap();
    // ctrl 1 + raddr 1 + inline ceil((4 + 150) / 16) = 10 -> 12 DS, 3 WQEBBs.
    assert_eq!(
        info,
        WqeInfo {
            wqebb_count: 3,
            ds: 12
        }
    );

    let mut expect = [FILL; 256];
    // WQEBB 3 (0xffff & 3) at byte 192: control segment.
    expect[192..208].copy_from_slice(&[
        0x00, 0xff, 0xff, 0x09, // opmod 0, wqe index 0xffff, opcode RDMA_WRITE_IMM
        0x00, 0x0a, 0xbc, 0x0c, // qpn 0xabc, ds 12
        0x00, 0x00, 0x00, 0x08, // signature, reserved, CQ_UPDATE
        0x12, 0x34, 0x56, 0x78, // immediate
    ]);
    // remote address segment
    expect[208..224].copy_from_slice(&[
        0x00, 0x00, 0x7f, 0x00, 0xde, 0xad, 0x00, 0x00, 0xca, 0xfe, 0x00, 0x01, 0, 0, 0, 0,
    ]);
    // inline header: 0x80000000 | 150
    expect[224..228].copy_from_slice(&[0x80, 0x00, 0x00, 0x96]);
    // 28 bytes fit before the end, the other 122 land at the ring start
    expect[228..256].copy_from_slice(&payload[..28]);
    expect[0..122].copy_from_slice(&payload[28..]);
    // zero padding to the 16-byte boundary (122 -> 128); the rest is untouched
    expect[122..128].fill(0);
    assert_eq!(buf, expect);
}

/// Same wrap with a plain SEND: the inline header sits right after the control
/// segment and only 44 bytes fit before the end.
#[test]
fn inline_send_wraps_after_ctrl() {
    let payload: Vec<u8> = (0..150u32).map(|i| (255 - i) as u8).collect();
    let chunks: [&[u8]; 1] = [&payload];
    let wr = SendWr::new(SendOp::Send, Payload::Inline(&chunks));
    let mut buf = ring_buf::<256>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let info = write_send_wqe(&mut sq, 3, 0xff_ffff, &wr).unwrap();
    assert_eq!(
        info,
        WqeInfo {
            wqebb_count: 3,
            ds: 11
        }
    );

    let mut expect = [FILL; 256];
    expect[192..208].copy_from_slice(&[
        0, 0, 3, 0x0a, 0xff, 0xff, 0xff, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    expect[208..212].copy_from_slice(&[0x80, 0, 0, 150]);
    expect[212..256].copy_from_slice(&payload[..44]);
    expect[0..106].copy_from_slice(&payload[44..]);
    expect[106..112].fill(0);
    assert_eq!(buf, expect);
}

/// UD SEND at the last WQEBB: control + datagram fill it exactly, so both data
/// segments wrap to the start of the ring. The empty SGE is skipped.
#[test]
fn ud_data_segments_wrap() {
    let av = DatagramSeg::from_raw(
        0,
        0,
        0,
        0x30,
        0,
        0xc0de,
        [0x02, 0x11, 0x22, 0x33, 0x44, 0x55],
        0x10,
        0x40,
        0x0012_3456,
        [0xfe; 16],
    );
    let sgl = [
        Sge::new(0x1000, 256, 0x11),
        Sge::new(0x9999, 0, 0x99),
        Sge::new(0xffff_ffff_ffff_fff0, 16, 0xffff_ffff),
    ];
    let wr = SendWr::new(SendOp::SendImm { imm: 0xa1b2_c3d4 }, Payload::Sgl(&sgl))
        .with_flags(FmCeSe::CQ_UPDATE | FmCeSe::SOLICITED)
        .to_ud(UdDest {
            av: &av,
            remote_qpn: 0x00_0042,
            qkey: 0x1111_2222,
        });
    let mut buf = ring_buf::<256>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let info = write_send_wqe(&mut sq, 7, 0x123, &wr).unwrap();
    assert_eq!(
        info,
        WqeInfo {
            wqebb_count: 2,
            ds: 6
        }
    );

    let mut expect = [FILL; 256];
    #[rustfmt::skip]
    expect[192..256].copy_from_slice(&[
        // control: index 7, SEND_IMM; qpn 0x123, ds 6; CQ_UPDATE | SOLICITED; imm
        0x00, 0x00, 0x07, 0x0b, 0x00, 0x01, 0x23, 0x06, 0x00, 0x00, 0x00, 0x0a, 0xa1, 0xb2, 0xc3, 0xd4,
        // datagram: qkey, reserved, ext | dqpn, rate/sl, fl/mlid, rlid
        0x11, 0x11, 0x22, 0x22, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x42, 0x30, 0x00, 0xc0, 0xde,
        // reserved, rmac, tclass, hop limit, grh_gid_fl
        0x00, 0x00, 0x00, 0x00, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x10, 0x40, 0x00, 0x12, 0x34, 0x56,
        // rgid
        0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe,
    ]);
    #[rustfmt::skip]
    expect[0..32].copy_from_slice(&[
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
        0x00, 0x00, 0x00, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0,
    ]);
    assert_eq!(buf, expect);
}

/// RDMA READ with five SGEs at the last WQEBB: two data segments fit after the
/// control and remote-address segments, three wrap.
#[test]
fn rdma_read_data_segments_wrap() {
    let sgl: Vec<Sge> = (1..=5u32)
        .map(|i| Sge::new(0x1000 * i as u64, i * 8, 0x100 + i))
        .collect();
    let wr = SendWr::new(
        SendOp::RdmaRead {
            raddr: 0x1122_3344_5566_7788,
            rkey: 0x99,
        },
        Payload::Sgl(&sgl),
    )
    .signaled();
    let mut buf = ring_buf::<256>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let info = write_send_wqe(&mut sq, 0x0103, 0x10, &wr).unwrap();
    assert_eq!(
        info,
        WqeInfo {
            wqebb_count: 2,
            ds: 7
        }
    );

    let mut expect = [FILL; 256];
    #[rustfmt::skip]
    let wqe: [u8; 112] = [
        0x00, 0x01, 0x03, 0x10, 0x00, 0x00, 0x10, 0x07, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x00, 0x00, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
        0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,
        0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30, 0x00,
        0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0x00,
    ];
    expect[192..256].copy_from_slice(&wqe[..64]);
    expect[..48].copy_from_slice(&wqe[64..]);
    assert_eq!(buf, expect);
}

/// Atomics: remote address, atomic segment, and a data segment whose byte count is
/// always 8 (the SGE's length is ignored, as in libmlx5).
#[test]
fn atomic_wqes() {
    let sgl = [Sge::new(0x7000, 64, 0x55)];
    let mut buf = ring_buf::<128>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let cs = SendWr::new(
        SendOp::CompareSwap {
            raddr: 0x8000,
            rkey: 0x66,
            compare: 1,
            swap: 0x0200_0000_0000_0003,
        },
        Payload::Sgl(&sgl),
    );
    assert_eq!(
        write_send_wqe(&mut sq, 0, 1, &cs).unwrap(),
        WqeInfo {
            wqebb_count: 1,
            ds: 4
        }
    );
    let fa = SendWr::new(
        SendOp::FetchAdd {
            raddr: 0x8008,
            rkey: 0x66,
            add: 0xffff_ffff_ffff_ffff,
        },
        Payload::Sgl(&sgl),
    );
    assert_eq!(
        write_send_wqe(&mut sq, 1, 1, &fa).unwrap(),
        WqeInfo {
            wqebb_count: 1,
            ds: 4
        }
    );
    #[rustfmt::skip]
    let expect: [u8; 128] = [
        0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x01, 0x04, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0x80, 0x00, 0, 0, 0, 0x66, 0, 0, 0, 0,
        0x02, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x01,
        0, 0, 0, 0x08, 0, 0, 0, 0x55, 0, 0, 0, 0, 0, 0, 0x70, 0x00,
        0x00, 0x00, 0x01, 0x12, 0x00, 0x00, 0x01, 0x04, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0x80, 0x08, 0, 0, 0, 0x66, 0, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0x08, 0, 0, 0, 0x55, 0, 0, 0, 0, 0, 0, 0x70, 0x00,
    ];
    assert_eq!(buf, expect);
}

/// Zero-length inline writes no inline header (libmlx5's behaviour): ctrl + raddr.
#[test]
fn empty_inline_and_nop() {
    let mut buf = ring_buf::<64>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let empty: [&[u8]; 1] = [&[]];
    let wr = SendWr::new(
        SendOp::RdmaWrite { raddr: 0, rkey: 0 },
        Payload::Inline(&empty),
    );
    assert_eq!(
        write_send_wqe(&mut sq, 0, 5, &wr).unwrap(),
        WqeInfo {
            wqebb_count: 1,
            ds: 2
        }
    );
    assert_eq!(&buf[32..], &[FILL; 32]);

    let mut buf = ring_buf::<64>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let nop = SendWr::new(SendOp::Nop, Payload::NONE).with_flags(FmCeSe::CQ_UPDATE | FmCeSe::FENCE);
    assert_eq!(
        write_send_wqe(&mut sq, 9, 5, &nop).unwrap(),
        WqeInfo {
            wqebb_count: 1,
            ds: 1
        }
    );
    assert_eq!(
        &buf[..16],
        &[0, 0, 9, 0, 0, 0, 5, 1, 0, 0, 0, 0x88, 0, 0, 0, 0]
    );
    assert_eq!(&buf[16..], &[FILL; 48]);
}

#[test]
fn send_inv_carries_rkey() {
    let mut buf = ring_buf::<64>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let sgl = [Sge::new(0x10, 4, 1)];
    let wr = SendWr::new(SendOp::SendInv { rkey: 0xabcd_0102 }, Payload::Sgl(&sgl));
    write_send_wqe(&mut sq, 0, 1, &wr).unwrap();
    assert_eq!(
        &buf[..16],
        &[0, 0, 0, 0x01, 0, 0, 1, 2, 0, 0, 0, 0, 0xab, 0xcd, 0x01, 0x02]
    );
}

#[test]
fn rejected_requests_write_nothing() {
    let mut buf = ring_buf::<64>();
    let mut sq = SqRing::new(&mut buf).unwrap();
    let data: [&[u8]; 1] = [&[1, 2, 3]];
    let read_inline = SendWr::new(
        SendOp::RdmaRead { raddr: 0, rkey: 0 },
        Payload::Inline(&data),
    );
    assert_eq!(
        write_send_wqe(&mut sq, 0, 1, &read_inline),
        Err(WqeError::InlineNotAllowed(
            crate::opcode::WqeOpcode::RdmaRead
        ))
    );
    let av = DatagramSeg::default();
    let ud_write =
        SendWr::new(SendOp::RdmaWrite { raddr: 0, rkey: 0 }, Payload::NONE).to_ud(UdDest {
            av: &av,
            remote_qpn: 1,
            qkey: 1,
        });
    assert!(matches!(
        write_send_wqe(&mut sq, 0, 1, &ud_write),
        Err(WqeError::NotForUd(_))
    ));
    // 5 SGEs -> 6 DS -> 2 WQEBBs, more than this 1-WQEBB ring
    let sgl = [Sge::new(1, 1, 1); 5];
    let big = SendWr::new(SendOp::Send, Payload::Sgl(&sgl));
    assert_eq!(
        write_send_wqe(&mut sq, 0, 1, &big),
        Err(WqeError::LargerThanRing {
            wqebbs: 2,
            wqe_cnt: 1
        })
    );
    let many = [Sge::new(1, 1, 1); 63];
    let huge = SendWr::new(SendOp::Send, Payload::Sgl(&many));
    assert_eq!(
        write_send_wqe(&mut sq, 0, 1, &huge),
        Err(WqeError::TooLarge)
    );
    assert_eq!(buf, [FILL; 64]);
}

/// A run of posts around the ring: each WQE starts where the previous one ended,
/// and the control segment's index is the unmasked 16-bit counter.
#[test]
fn consecutive_posts_advance_pi() {
    let mut buf = [0u8; 512];
    let mut sq = SqRing::new(&mut buf).unwrap();
    let sgl = [Sge::new(0x1000, 8, 1); 4];
    let mut pi: u16 = 0xfffc;
    let mut starts = Vec::new();
    for n in 0..6 {
        let wr = SendWr::new(SendOp::Send, Payload::Sgl(&sgl[..n % 5]));
        let info = write_send_wqe(&mut sq, pi, 7, &wr).unwrap();
        starts.push((pi, info.wqebb_count));
        pi = pi.wrapping_add(info.wqebb_count);
    }
    assert_eq!(
        starts,
        [
            (0xfffc, 1),
            (0xfffd, 1),
            (0xfffe, 1),
            (0xffff, 1),
            (0x0000, 2),
            (0x0002, 1)
        ]
    );
    assert_eq!(&buf[0..4], &[0, 0, 0, 0x0a]); // index 0x0000 at WQEBB 0
    assert_eq!(&buf[4 * 64..4 * 64 + 4], &[0, 0xff, 0xfc, 0x0a]); // 0xfffc & 7 = 4
    assert_eq!(&buf[7 * 64..7 * 64 + 4], &[0, 0xff, 0xff, 0x0a]);
    assert_eq!(&buf[2 * 64..2 * 64 + 8], &[0, 0, 2, 0x0a, 0, 0, 7, 1]);
}
