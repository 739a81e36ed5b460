//! The QP context (`qpc`) and the device half's [`QpAttrs`]: the firmware keeps a QP's
//! context in the PRM's form (what QUERY_QP answers) and hands the device half the same
//! values in its own form after every transition.

use prm::bits::{View, ViewMut};
use prm::cmd::qp::{Ads, Qpc};
use uverbs::sys::verbs::{ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};

use crate::config::Config;
use crate::objects::{AddressVector, QpAttrs, QpState};

/// The primary path's remote GID (`rgid_rip`, 16 bytes at byte 8 of the path).
fn rgid(ads: &View<'_, Ads>) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&ads.bytes(Ads::rgid_rip)[..16]);
    g
}

/// The device half's attributes of a QP whose context is `qpc` and state `state`:
/// the fields the transition commands carry, in `QpAttrs`' units.
pub(crate) fn attrs_of(cfg: &Config, qpc: &View<'_, Qpc>, state: QpState) -> QpAttrs {
    let ads = qpc.sub(Qpc::primary_address_path);
    let dgid = rgid(&ads);
    let (dmac, dest_ip) = cfg.resolve(&dgid);
    let mut access = 0;
    if qpc.get(Qpc::rre) {
        access |= ACCESS_REMOTE_READ;
    }
    if qpc.get(Qpc::rwe) {
        access |= ACCESS_REMOTE_WRITE;
    }
    if qpc.get(Qpc::rae) {
        access |= ACCESS_REMOTE_ATOMIC;
    }
    let log_rra = qpc.get(Qpc::log_rra_max);
    QpAttrs {
        state,
        sq_draining: false,
        path_mtu: qpc.get(Qpc::mtu),
        path_mig_state: 0,
        qkey: qpc.get(Qpc::q_key),
        rq_psn: qpc.get(Qpc::next_rcv_psn),
        sq_psn: qpc.get(Qpc::next_send_psn),
        dest_qpn: qpc.get(Qpc::remote_qpn),
        access,
        access_requested: access,
        resp_depth: 1 << log_rra,
        log_sra_max: qpc.get(Qpc::log_sra_max),
        log_rra_max: log_rra,
        min_rnr_timer: qpc.get(Qpc::min_rnr_nak),
        timeout: ads.get(Ads::ack_timeout),
        retry_cnt: qpc.get(Qpc::retry_count),
        rnr_retry: qpc.get(Qpc::rnr_retry),
        pkey_index: ads.get(Ads::pkey_index),
        port: ads.get(Ads::vhca_port_num),
        av: AddressVector {
            dgid,
            flow_label: ads.get(Ads::flow_label),
            udp_sport: ads.get(Ads::udp_sport),
            sgid_index: ads.get(Ads::src_addr_index),
            hop_limit: ads.get(Ads::hop_limit),
            traffic_class: ads.get(Ads::tclass),
            sl: ads.get(Ads::eth_prio),
            static_rate: 0,
            dlid: 0,
            src_path_bits: 0,
            dmac,
            dest_ip,
        },
        en_sqd_async_notify: false,
        rate_limit: 0,
    }
}

/// Writes a verbs QP's attributes into a context (the inverse of [`attrs_of`] for the
/// fields it reads), so QUERY_QP on a QP made by the verbs answers its live state.
pub(crate) fn write_attrs(a: &QpAttrs, qpc: &mut ViewMut<'_, Qpc>) {
    qpc.set(Qpc::mtu, a.path_mtu)
        .set(Qpc::q_key, a.qkey)
        .set(Qpc::next_rcv_psn, a.rq_psn & 0xff_ffff)
        .set(Qpc::next_send_psn, a.sq_psn & 0xff_ffff)
        .set(Qpc::remote_qpn, a.dest_qpn & 0xff_ffff)
        .set(Qpc::rre, a.access & ACCESS_REMOTE_READ != 0)
        .set(Qpc::rwe, a.access & ACCESS_REMOTE_WRITE != 0)
        .set(Qpc::rae, a.access & ACCESS_REMOTE_ATOMIC != 0)
        .set(Qpc::log_sra_max, a.log_sra_max)
        .set(Qpc::log_rra_max, a.log_rra_max)
        .set(Qpc::min_rnr_nak, a.min_rnr_timer)
        .set(Qpc::retry_count, a.retry_cnt)
        .set(Qpc::rnr_retry, a.rnr_retry);
    let mut ads = qpc.sub_mut(Qpc::primary_address_path);
    ads.set(Ads::ack_timeout, a.timeout)
        .set(Ads::pkey_index, a.pkey_index)
        .set(Ads::vhca_port_num, a.port)
        .set(Ads::flow_label, a.av.flow_label & 0xf_ffff)
        .set(Ads::udp_sport, a.av.udp_sport)
        .set(Ads::src_addr_index, a.av.sgid_index)
        .set(Ads::hop_limit, a.av.hop_limit)
        .set(Ads::tclass, a.av.traffic_class)
        .set(Ads::eth_prio, a.av.sl & 7)
        .set(Ads::rmac_47_32, u16::from_be_bytes([a.av.dmac[0], a.av.dmac[1]]))
        .set(Ads::rmac_31_0, u32::from_be_bytes([a.av.dmac[2], a.av.dmac[3], a.av.dmac[4], a.av.dmac[5]]));
    ads.bytes_mut(Ads::rgid_rip)[..16].copy_from_slice(&a.av.dgid);
}
