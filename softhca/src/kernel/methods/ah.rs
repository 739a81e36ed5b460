//! CREATE_AH / DESTROY_AH. On RoCE mlx5_ib resolves the destination MAC
//! (`ib_resolve_eth_dmac`) and returns it in the driver response, where libmlx5 copies it
//! into the address vector's `rmac`; softhca answers with the MAC its address resolution
//! gives for the GID (the owning instance's MAC, or the one inside a link-local GID).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::mlx5::CreateAhResp as Mlx5CreateAhResp;
use uverbs::sys::verbs::{CreateAh, CreateAhResp, DestroyAh};

use crate::kernel::uobject::{ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::Result;
use crate::objects::{AddressVector, Ah, Kind, Live};

use super::port::port_valid;
use super::qp::check_sgid;

/// CREATE_AH (write 5).
pub(crate) fn create_ah(c: &mut WCall<'_>) -> Result<()> {
    let cmd: CreateAh = c.request()?;
    let h = c.alloc(ObjType::Ah)?;
    let a = cmd.attr;
    if !port_valid(a.port_num as u64) {
        return Err(Errno::EINVAL);
    }
    let pd = match c.st.table.lookup(cmd.pd_handle as i64, ObjType::Pd)? {
        Uobj::Pd(pd) => pd,
        _ => return Err(Errno::EINVAL),
    };
    // RoCE needs a GRH; its source GID must be a filled row.
    if a.is_global == 0 {
        return Err(Errno::EINVAL);
    }
    check_sgid(c.hca, a.sgid_index)?;
    // mlx5_ib_create_ah: the response must hold the MAC.
    let min_resp = 4 + 6;
    if c.udata.out.len < min_resp {
        return Err(Errno::EINVAL);
    }
    let (dmac, dest_ip) = c.hca.config().resolve(&a.dgid);
    let resp = Mlx5CreateAhResp { response_length: min_resp as u32, dmac, ..Default::default() };
    c.udata.copy_to(&resp.as_bytes()[..min_resp])?;
    let av = AddressVector {
        dgid: a.dgid,
        flow_label: a.flow_label & 0xf_ffff,
        // A user AH's source port is in the address vector libmlx5 builds itself and
        // copies into each WQE (`mlx5_ah_set_udp_sport`); this one is never sent from.
        udp_sport: 0,
        sgid_index: a.sgid_index,
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
        sl: a.sl,
        static_rate: a.static_rate,
        dlid: a.dlid,
        src_path_bits: a.src_path_bits,
        dmac,
        dest_ip,
    };
    pd.usecnt.fetch_add(1, Ordering::SeqCst);
    let ah = Arc::new(Ah { pd, av, port: a.port_num, user_handle: cmd.user_handle,
                           _live: Live::new(c.hca.live_counts(), Kind::Ah) });
    c.st.table.fill(h, Uobj::Ah(ah));
    c.response(CreateAhResp { ah_handle: h }.as_bytes())
}

/// DESTROY_AH (write 8).
pub(crate) fn destroy_ah(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DestroyAh = c.request()?;
    c.st.destroy(c.hca, cmd.ah_handle as i64, ObjType::Ah).map(|_| ())
}
