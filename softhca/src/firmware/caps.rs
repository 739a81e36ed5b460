//! QUERY_HCA_CAP: the capability pages softhca's firmware answers.
//!
//! The values are the ones the kernel half already advertises through QUERY_DEVICE,
//! QUERY_PORT and mlx5's GET_CONTEXT ([`crate::kernel::mlx5`]'s `caps`), written
//! here in the PRM's form, so that a DevX user reading the pages and a verbs user
//! reading the device attributes see the same device: mlx5_ib derives its
//! `ib_device_attr` from exactly these fields (`mlx5_ib_query_device`), and the test
//! `caps_agree_with_query_device` recomputes that derivation. Every feature softhca
//! lacks is zero (libmlx5 and DPDK act on each set bit): XRC, DC, SRQ-based tag
//! matching, memory windows, CQE compression, CQ moderation and resize,
//! raw packet offloads, device memory, UMR, signature offloads, LAG.
//!
//! One exception keeps the two views equal: `log_max_srq`/`log_max_srq_sz` are the
//! SRQ limits QUERY_DEVICE reports (`max_srq`, `max_srq_wr`), although CREATE_SRQ is
//! not implemented; changing that is the verbs' decision, not the firmware's.
//!
//! `op_mod` selects the page (`type << 1 | current`); softhca has no SET_HCA_CAP, so
//! the current values are the maximum ones. The NIC flow table page advertises the
//! NIC receive tables the firmware's flow commands implement ([`write_nic_flow_table`]:
//! `nic_flow_table` is set in the general page), the RoCE page is all zero (its
//! version and UDP port range sit in bits `prm` keeps reserved), and the second
//! general page has nothing to report.

use prm::bits::ViewMut;
use prm::cmd::hca_cap::{cap_type, AtomicCaps, CmdHcaCap, FlowTableNicCap, FlowTablePropLayout, HcaCapUnion, QueryHcaCapIn, QueryHcaCapOut};

use super::status::syndrome;
use super::{bad_param, internal, Cmd, R};
use crate::config::Config;
use crate::kernel::mlx5::caps;

/// `cmd_hca_cap.port_type` of an Ethernet (RoCE) port (`MLX5_CAP_PORT_TYPE_ETH`).
pub const PORT_TYPE_ETH: u8 = 1;
/// `atomic_caps.atomic_operations` bits (`MLX5_ATOMIC_OPS_CMP_SWAP`, `_FETCH_ADD`).
pub const ATOMIC_OPS_CMP_SWAP: u16 = 1 << 0;
pub const ATOMIC_OPS_FETCH_ADD: u16 = 1 << 1;
/// `atomic_caps.atomic_size_qp`: 8-byte atomics (`MLX5_ATOMIC_SIZE_QP_8BYTES`).
pub const ATOMIC_SIZE_QP_8BYTES: u16 = 1 << 3;

/// Writes the general page (`cmd_hca_cap`).
pub fn write_general(cfg: &Config, p: &mut ViewMut<'_, CmdHcaCap>) {
    type C = CmdHcaCap;
    // EQs 0..FIRST_COMP_EQN are mlx5_core's command, async and page-request EQs, then one
    // per completion vector: QUERY_EQN's answers must fit under 1 << log_max_eq.
    let eqs = super::FIRST_COMP_EQN + cfg.num_comp_vectors;
    p.set(C::hca_cap_2, true)
        .set(C::log_max_eq, eqs.next_power_of_two().trailing_zeros() as u8)
        .set(C::log_max_srq_sz, caps::LOG_MAX_SRQ_SZ as u8)
        .set(C::log_max_qp_sz, caps::LOG_MAX_QP_SZ as u8)
        .set(C::log_max_qp, caps::LOG_MAX_QP as u8)
        .set(C::log_max_srq, caps::LOG_MAX_SRQ as u8)
        .set(C::log_max_cq_sz, caps::LOG_MAX_CQ_SZ as u8)
        .set(C::log_max_cq, caps::LOG_MAX_CQ as u8)
        .set(C::log_max_mkey, caps::LOG_MAX_MKEY as u8)
        // mlx5_ib reports max_mr_size as ~0: any length.
        .set(C::log_max_mrw_sz, 64)
        .set(C::log_max_ra_req_qp, caps::LOG_MAX_RA_REQ_QP as u8)
        .set(C::log_max_ra_res_qp, caps::LOG_MAX_RA_RES_QP as u8)
        // RTS2RTS_QP takes a new UDP source port (mlx5dv_modify_qp_udp_sport).
        .set(C::rts2rts_qp_udp_sport, true)
        .set(C::end_pad, true)
        .set(C::gid_table_size, cfg.gid_tbl_len.min(u16::MAX as u32) as u16)
        // 0 is 128 entries (mlx5_to_sw_pkey_sz: 128 << value).
        .set(C::pkey_table_size, (caps::PKEY_TABLE_LEN / 128).trailing_zeros() as u16)
        .set(C::local_ca_ack_delay, caps::LOCAL_CA_ACK_DELAY)
        .set(C::port_type, PORT_TYPE_ETH)
        .set(C::num_ports, 1)
        .set(C::log_max_msg, caps::LOG_MAX_MSG as u8)
        .set(C::cqe_version, caps::CQE_VERSION)
        .set(C::pkv, true)
        .set(C::qkv, true)
        .set(C::roce, true)
        .set(C::atomic, true)
        .set(C::rc, true)
        .set(C::uc, true)
        .set(C::xrc, true)
        // A ConnectX-5's log_max_xrcd.
        .set(C::log_max_xrcd, 24)
        .set(C::ud, true)
        .set(C::uar_4k, true)
        .set(C::uar_sz, 0)
        .set(C::log_pg_sz, 12)
        .set(C::bf, cfg.write_combining)
        .set(C::log_bf_reg_size, caps::LOG_BF_REG_SIZE as u8)
        .set(C::max_wqe_sz_sq, caps::MAX_WQE_SZ_SQ as u16)
        .set(C::max_wqe_sz_rq, caps::MAX_WQE_SZ_RQ as u16)
        .set(C::max_qp_mcg, caps::MAX_QP_MCG)
        .set(C::log_max_mcg, caps::LOG_MAX_MCG as u8)
        .set(C::log_max_pd, caps::LOG_MAX_PD as u8)
        // DevX: user contexts and UMEMs (mlx5_ib offers DevX when log_max_uctx != 0).
        .set(C::log_max_uctx, super::uctx::LOG_MAX_UCTX)
        .set(C::log_max_umem, super::uctx::LOG_MAX_UMEM)
        // NIC RX flow tables and single flow counters (firmware/flow): the count
        // is split over two fields.
        .set(C::nic_flow_table, true)
        .set(C::max_flow_counter_15_0, (MAX_FLOW_COUNTER & 0xffff) as u16)
        .set(C::max_flow_counter_31_16, (MAX_FLOW_COUNTER >> 16) as u16);
}

/// Flow counters a device offers (`max_flow_counter_31_16:15_0`).
pub const MAX_FLOW_COUNTER: u32 = 1 << 16;
/// log2 of the flow tables of one type (`log_max_ft_num`), of the destinations of one
/// entry (`log_max_destination`), of the counters of one entry
/// (`log_max_flow_counter`), and of the entries of all tables (`log_max_flow`).
pub const LOG_MAX_FT_NUM: u8 = 16;
pub const LOG_MAX_DESTINATION: u8 = 4;
pub const LOG_MAX_FLOW_COUNTER: u8 = 4;
pub const LOG_MAX_FLOW: u8 = 24;

/// Writes the NIC flow table page: only the receive tables, with what
/// `firmware/flow` executes. `flow_modify_en` is SET_FLOW_TABLE_ENTRY's op_mod 1,
/// `modify_root` SET_FLOW_TABLE_ROOT, `identified_miss_table_mode` a forward miss;
/// `flow_table_modify` (MODIFY_FLOW_TABLE), reformat, decap, VLAN push/pop and
/// `sw_owner` (software steering through ICM) stay 0.
pub fn write_nic_flow_table(p: &mut ViewMut<'_, FlowTableNicCap>) {
    type P = FlowTablePropLayout;
    let mut rx = p.sub_mut(FlowTableNicCap::flow_table_properties_nic_receive);
    rx.set(P::ft_support, true)
        .set(P::flow_counter, true)
        .set(P::flow_modify_en, true)
        .set(P::modify_root, true)
        .set(P::identified_miss_table_mode, true)
        .set(P::sw_owner, false)
        .set(P::log_max_ft_size, crate::device::steer::LOG_MAX_FT_SIZE)
        .set(P::max_ft_level, crate::device::steer::MAX_FT_LEVEL)
        .set(P::log_max_ft_num, LOG_MAX_FT_NUM)
        .set(P::log_max_flow_counter, LOG_MAX_FLOW_COUNTER)
        .set(P::log_max_destination, LOG_MAX_DESTINATION)
        .set(P::log_max_flow, LOG_MAX_FLOW);
}

/// Writes the atomic page: 8-byte compare-and-swap and fetch-and-add on RC QPs,
/// answered in big-endian (`atomic_req_8B_endianness_mode` 0), which mlx5_ib reports
/// as `IB_ATOMIC_HCA` — QUERY_DEVICE's `atomic_cap` 1.
pub fn write_atomic(p: &mut ViewMut<'_, AtomicCaps>) {
    p.set(AtomicCaps::atomic_req_8B_endianness_mode, 0)
        .set(AtomicCaps::atomic_operations, ATOMIC_OPS_CMP_SWAP | ATOMIC_OPS_FETCH_ADD)
        .set(AtomicCaps::atomic_size_qp, ATOMIC_SIZE_QP_8BYTES);
}

pub(super) fn query_hca_cap(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<QueryHcaCapIn>()?;
    if inp.get(QueryHcaCapIn::other_function) {
        return Err(bad_param(syndrome::OTHER_FUNCTION));
    }
    let ty = inp.get(QueryHcaCapIn::op_mod) >> 1;
    let off = QueryHcaCapOut::capability.off() / 8;
    let page = c.outbox.get_mut(off..off + HcaCapUnion::BYTES).ok_or_else(internal)?;
    match ty {
        cap_type::GENERAL => write_general(c.hca.config(), &mut ViewMut::new(page).map_err(|_| internal())?),
        cap_type::ATOMIC => write_atomic(&mut ViewMut::new(page).map_err(|_| internal())?),
        cap_type::NIC_FLOW_TABLE => write_nic_flow_table(&mut ViewMut::new(page).map_err(|_| internal())?),
        cap_type::ROCE | cap_type::GENERAL_2 => {}
        _ => return Err(bad_param(syndrome::BAD_OP_MOD)),
    }
    Ok(())
}
