//! Address handles (`ibv_create_ah`): where a UD send goes, prepared once as the
//! 48-byte address vector every UD WQE copies into its datagram segment.
//!
//! As libmlx5's `mlx5_create_ah` for a RoCE port: a GRH is required (`is_global`);
//! the AV gets the SL in `stat_rate_sl[3:1]`, traffic class, hop limit, source GID
//! index and flow label (`grh` bit clear: reserved on RoCE, where every packet has
//! one), the destination GID, and for a RoCE v2 source GID the UDP source port in the
//! `rlid` field (from the flow label, else random in 0xC000..=0xFFFF, as
//! `mlx5_ah_set_udp_sport`). The kernel's CREATE_AH resolves the destination MAC,
//! which its mlx5 answer carries and the AV holds in `rmac`.

use std::sync::Arc;

use uverbs::sys::verbs::link_layer;
use uverbs::sys::mlx5::CreateAhResp as Mlx5CreateAhResp;
use uverbs::sys::verbs::{AhAttr, CreateAh, CreateAhResp, DestroyAh, GID_TYPE_ROCE_V2};
use uverbs::sys::write::{CMD_CREATE_AH, CMD_DESTROY_AH};
use zerocopy::IntoBytes;

use crate::error::{invalid, Op, Result};
use crate::pd::{Pd, PdInner};
use crate::qp::Ah;
use crate::wqe::{DatagramSeg, UdDest};

/// `ibv_flow_label_to_udp_sport`: the RoCE v2 source port a flow label maps to.
pub fn flow_label_to_udp_sport(fl: u32) -> u16 {
    let (low, high) = (fl & 0x03fff, fl & 0xfc000);
    ((low ^ (high >> 14)) as u16) | 0xc000
}

/// An address handle: the address vector and the kernel object behind it.
pub struct AddressHandle {
    pd: Arc<PdInner>,
    handle: u32,
    av: DatagramSeg,
}

impl Pd {
    /// `ibv_create_ah` towards `attr` (its `dgid`, `sgid_index`, `hop_limit`, ...).
    pub fn create_ah(&self, attr: &Ah) -> Result<AddressHandle> {
        let ctx = &self.inner.ctx;
        let port = ctx.query_port(attr.port)?.legacy_resp;
        if port.link_layer != link_layer::ETHERNET {
            return invalid("create_ah", "only RoCE ports are supported");
        }
        let sgid = ctx.query_gid(attr.port, attr.sgid_index as u32)?;
        let sport = if sgid.gid_type != GID_TYPE_ROCE_V2 {
            0
        } else if attr.flow_label != 0 {
            flow_label_to_udp_sport(attr.flow_label)
        } else {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(attr.flow_label);
            0xc000 | (h.finish() as u16 & 0x3fff)
        };
        let cmd = CreateAh {
            user_handle: 0,
            pd_handle: self.inner.handle,
            attr: AhAttr {
                dgid: attr.dgid,
                flow_label: attr.flow_label,
                sgid_index: attr.sgid_index,
                hop_limit: attr.hop_limit,
                traffic_class: attr.traffic_class,
                sl: attr.sl,
                is_global: 1,
                port_num: attr.port,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut drv = Mlx5CreateAhResp::default();
        let r: CreateAhResp = uverbs::write::legacy(&ctx.dev, CMD_CREATE_AH, &cmd, &[], drv.as_mut_bytes()).op("create_ah")?;
        let grh_gid_fl = ((attr.sgid_index as u32) << 20) | (attr.flow_label & 0xf_ffff);
        let av = DatagramSeg::from_raw(0, 0, 0, (attr.sl & 7) << 1, 0, sport, drv.dmac, attr.traffic_class, attr.hop_limit, grh_gid_fl, attr.dgid);
        tracing::debug!(target: "provider::ah", handle = r.ah_handle, sport, dmac = ?drv.dmac, "create_ah");
        Ok(AddressHandle { pd: self.inner.clone(), handle: r.ah_handle, av })
    }
}

impl AddressHandle {
    /// The address vector UD WQEs copy.
    pub fn av(&self) -> &DatagramSeg {
        &self.av
    }

    /// A UD destination through this handle (`wr.ud.ah`, `remote_qpn`, `remote_qkey`).
    pub fn dest(&self, remote_qpn: u32, qkey: u32) -> UdDest<'_> {
        UdDest { av: &self.av, remote_qpn, qkey }
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        let d = DestroyAh { ah_handle: self.handle };
        if let Err(e) = uverbs::write::legacy_no_resp(&self.pd.ctx.dev, CMD_DESTROY_AH, &d) {
            tracing::warn!(handle = self.handle, errno = %e, "destroy_ah failed");
        }
    }
}

#[cfg(test)]
mod tests {
    // rdma-core's ibv_flow_label_to_udp_sport (verbs.h) for a few labels, worked by hand:
    // low 14 bits XOR the high 6 bits, with the top two bits of the port set.
    #[test]
    fn flow_label_ports() {
        assert_eq!(super::flow_label_to_udp_sport(0), 0xc000);
        assert_eq!(super::flow_label_to_udp_sport(1), 0xc001);
        assert_eq!(super::flow_label_to_udp_sport(0x4000), 0xc001);
        assert_eq!(super::flow_label_to_udp_sport(0xfffff), 0xffc0);
    }
}
