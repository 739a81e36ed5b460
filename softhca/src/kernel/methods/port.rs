//! QUERY_PORT (ioctl and write) and the GID table.

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::device as dev;
use uverbs::sys::verbs::{
    link_layer, port_state, GidEntry, QueryPort, QueryPortResp, QueryPortRespEx, PCF_CM_SUP, PCF_IP_BASED_GIDS,
    QPF_GRH_REQUIRED,
};

use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::mlx5::caps;
use crate::kernel::write::WCall;
use crate::kernel::Result;

/// `enum ib_port_phys_state` LINK_UP.
const PHYS_STATE_LINK_UP: u8 = 5;

/// The single port is port 1.
pub(crate) fn port_valid(port: u64) -> bool {
    port == 1
}

/// `mlx5_query_port_roce` as the core copies it.
pub(crate) fn port_attrs(hca: &Hca) -> QueryPortResp {
    let cfg = hca.config();
    QueryPortResp {
        port_cap_flags: PCF_CM_SUP | PCF_IP_BASED_GIDS,
        max_msg_sz: 1 << caps::LOG_MAX_MSG,
        gid_tbl_len: cfg.gid_tbl_len,
        pkey_tbl_len: caps::PORT_PKEY_TBL_LEN,
        state: port_state::ACTIVE,
        max_mtu: cfg.max_mtu,
        active_mtu: cfg.active_mtu,
        active_width: cfg.active_width,
        active_speed: cfg.active_speed,
        phys_state: PHYS_STATE_LINK_UP,
        link_layer: link_layer::ETHERNET,
        flags: QPF_GRH_REQUIRED,
        ..Default::default()
    }
}

/// `UVERBS_METHOD_QUERY_PORT`.
pub(crate) fn query_port_ioctl(c: &mut Call<'_>) -> Result<()> {
    c.st.ctx()?;
    let port = c.b.get_const(dev::ATTR_QUERY_PORT_PORT_NUM, u8::MAX as u64)?;
    if !port_valid(port) {
        return Err(Errno::EINVAL);
    }
    let resp = QueryPortRespEx { legacy_resp: port_attrs(c.hca), ..Default::default() };
    c.b.copy_to_struct_or_zero(dev::ATTR_QUERY_PORT_RESP, resp.as_bytes())
}

/// QUERY_PORT (write 2).
pub(crate) fn query_port_write(c: &mut WCall<'_>) -> Result<()> {
    c.st.ctx()?;
    let cmd: QueryPort = c.request()?;
    if !port_valid(cmd.port_num as u64) {
        return Err(Errno::EINVAL);
    }
    c.response(port_attrs(c.hca).as_bytes())
}

fn entry(hca: &Hca, index: u32, gid: crate::config::Gid) -> GidEntry {
    GidEntry::from_raw(gid.gid, index, 1, gid.gid_type, hca.config().netdev_ifindex)
}

/// `UVERBS_METHOD_QUERY_GID_TABLE`: every filled row, when the buffer holds them all.
pub(crate) fn query_gid_table(c: &mut Call<'_>) -> Result<()> {
    c.b.get_flags32(dev::ATTR_QUERY_GID_TABLE_FLAGS, 0)?;
    let esize = c.b.get_const(dev::ATTR_QUERY_GID_TABLE_ENTRY_SIZE, u64::MAX)? as usize;
    if esize == 0 {
        return Err(Errno::EINVAL);
    }
    let out = c.b.out_buf(dev::ATTR_QUERY_GID_TABLE_RESP_ENTRIES).ok_or(Errno::EINVAL)?;
    if out.len % esize != 0 || out.len / esize == 0 {
        return Err(Errno::EINVAL);
    }
    let max = out.len / esize;
    c.st.ctx()?;
    let gids = c.hca.config().gids();
    if gids.len() > max {
        return Err(Errno::EINVAL);
    }
    let mut bytes = Vec::with_capacity(gids.len() * esize);
    for (i, g) in gids.iter().enumerate() {
        let e = entry(c.hca, i as u32, *g);
        let b = e.as_bytes();
        let n = esize.min(b.len());
        bytes.extend_from_slice(&b[..n]);
        bytes.resize(bytes.len() + (esize - n), 0);
    }
    c.b.copy_to(dev::ATTR_QUERY_GID_TABLE_RESP_ENTRIES, &bytes)?;
    c.b.copy_to(dev::ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, (gids.len() as u64).as_bytes())
}

/// `UVERBS_METHOD_QUERY_GID_ENTRY`: one row; ENODATA for an empty row inside the table.
pub(crate) fn query_gid_entry(c: &mut Call<'_>) -> Result<()> {
    c.b.get_flags32(dev::ATTR_QUERY_GID_ENTRY_FLAGS, 0)?;
    let port = c.b.get_const(dev::ATTR_QUERY_GID_ENTRY_PORT, u32::MAX as u64)?;
    let index = c.b.get_const(dev::ATTR_QUERY_GID_ENTRY_GID_INDEX, u32::MAX as u64)? as u32;
    c.st.ctx()?;
    if !port_valid(port) {
        return Err(Errno::EINVAL);
    }
    let gid = c.hca.config().gid(index).map_err(|_| Errno::EINVAL)?.ok_or(Errno::ENODATA)?;
    c.b.copy_to_struct_or_zero(dev::ATTR_QUERY_GID_ENTRY_RESP_ENTRY, entry(c.hca, index, gid).as_bytes())
}
