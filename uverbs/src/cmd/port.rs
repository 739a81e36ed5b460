//! QUERY_PORT and the GID table.

use zerocopy::IntoBytes;

use crate::ioctl::Ioctl;
use crate::sys::ids::{device, object};
use crate::sys::verbs::{GidEntry, QueryPort, QueryPortResp, QueryPortRespEx};
use crate::sys::write::CMD_QUERY_PORT;
use crate::write::legacy;
use crate::{Device, Result};

/// `UVERBS_METHOD_QUERY_PORT`.
pub fn query_port_ioctl(dev: &Device, port: u8) -> Result<QueryPortRespEx> {
    let mut resp = QueryPortRespEx::default();
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_PORT);
    c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, port as u64);
    c.out_struct(device::ATTR_QUERY_PORT_RESP, &mut resp);
    c.run(dev)?;
    Ok(resp)
}

/// Legacy QUERY_PORT (write command 2).
pub fn query_port_write(dev: &Device, port: u8) -> Result<QueryPortResp> {
    let cmd = QueryPort { port_num: port, ..Default::default() };
    legacy(dev, CMD_QUERY_PORT, &cmd, &[], &mut [])
}

/// `UVERBS_METHOD_QUERY_GID_ENTRY`: one GID table row.
pub fn query_gid_entry(dev: &Device, port: u32, index: u32) -> Result<GidEntry> {
    let mut e = GidEntry::default();
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_GID_ENTRY);
    c.in_const(device::ATTR_QUERY_GID_ENTRY_PORT, port as u64);
    c.in_const(device::ATTR_QUERY_GID_ENTRY_GID_INDEX, index as u64);
    c.in_value(device::ATTR_QUERY_GID_ENTRY_FLAGS, 0u32);
    c.out_struct(device::ATTR_QUERY_GID_ENTRY_RESP_ENTRY, &mut e);
    c.run(dev)?;
    Ok(e)
}

/// `UVERBS_METHOD_QUERY_GID_TABLE`: every valid GID of every port, at most `max`.
pub fn query_gid_table(dev: &Device, max: usize) -> Result<Vec<GidEntry>> {
    let mut entries = vec![GidEntry::default(); max];
    let mut n = 0u64;
    let esize = std::mem::size_of::<GidEntry>() as u64;
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_GID_TABLE);
    c.in_const(device::ATTR_QUERY_GID_TABLE_ENTRY_SIZE, esize);
    c.in_value(device::ATTR_QUERY_GID_TABLE_FLAGS, 0u32);
    c.out_bytes(device::ATTR_QUERY_GID_TABLE_RESP_ENTRIES, entries.as_mut_bytes());
    c.out_struct(device::ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &mut n);
    c.run(dev)?;
    entries.truncate(n as usize);
    Ok(entries)
}

impl GidEntry {
    /// The 16 GID bytes in network order.
    pub fn raw(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b.copy_from_slice(self.gid.as_bytes());
        b
    }

    /// A table row for `gid`.
    pub fn from_raw(gid: [u8; 16], index: u32, port: u32, gid_type: u32, ifindex: u32) -> GidEntry {
        let mut e = GidEntry { gid_index: index, port_num: port, gid_type, netdev_ifindex: ifindex, ..Default::default() };
        e.gid.as_mut_bytes().copy_from_slice(&gid);
        e
    }
}
