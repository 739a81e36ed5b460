//! What one softhca instance looks like from the outside: its address, identity and port.
//!
//! Each instance is a "host" with its own address. By default that is a loopback address
//! `127.0.0.N`: the first instance in a machine binds UDP `127.0.0.1:4791`, the next finds
//! that taken and binds `127.0.0.2:4791`, and so on, so separate processes are separate
//! hosts on one wire. `DOORBELL_SOFTHCA_ADDR=IP` forces an address (inside network
//! namespaces, where a veth address is the host's identity).
//!
//! Everything else derives from the address, the way a ConnectX-5 derives its identity
//! from its MAC: node GUID `00:02:c9:03:00:xx:xx:xx` (Mellanox OUI, last three address
//! bytes), MAC `00:02:c9:xx:xx:xx`, and the RoCE GID table of a port with one IPv4
//! address: the link-local GID from the MAC (index 0), then the IPv4-mapped GID
//! ([`IP_GID_INDEX`], 1). Softhca speaks RoCE v2 only, so, as for rxe (whose port
//! capability is RoCE UDP encapsulation alone, and the core's `roce_gid_mgmt.c` adds one
//! row per GID type the port supports), each GID is listed once, as RoCE v2. A ConnectX
//! with RoCE v1 enabled lists each twice (v1, v2); a RoCE v1 row here would be a promise
//! softhca does not keep, since every packet leaves as RoCE v2.
//!
//! A destination GID names a peer instance ([`Config::peer_addr`]): an IPv4-mapped GID is
//! that IPv4 address, any other GID that IPv6 address, except a link-local one
//! (`fe80::/64`, the modified EUI-64 of a MAC, GID index 0). Real RoCE resolves
//! those to the peer's MAC on the same link (the kernel reads the MAC out of the GID);
//! softhca's hosts derive their MAC from their address, so the owner of a MAC with the
//! Mellanox OUI is this instance's address with its last three bytes replaced by the
//! MAC's. That is exact for the default `127.x.y.z` instances (127/8 is one link) and for
//! any peer that shares all but the last three address bytes with this one (an IPv4
//! subnet of /8 or narrower, an IPv6 one of /104 or narrower); a link-local GID of any
//! other MAC names no softhca host.
//!
//! The port's active MTU comes from the netdev that carries the address, as mlx5 derives
//! it (`iboe_get_mtu`): the largest IB MTU whose full-size packet, with every RoCEv2
//! header, still fits in the interface MTU ([`ib_mtu_for_netdev`]). Loopback (65536)
//! gives 4096, a 1500-byte veth 1024. `max_mtu` stays 4096.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::device::fault::FaultSpec;
use crate::device::trace::PCAP_ENV;

use uverbs::sys::verbs::{mtu, GID_TYPE_ROCE_V2};

/// The RoCEv2 UDP port.
pub const ROCE_V2_PORT: u16 = 4791;
/// The GID index of the port's IPv4-mapped (or IPv6) GID: the one perftest and NCCL
/// pick (`-x 1`, `NCCL_IB_GID_INDEX=1`). Index 0 is the link-local GID.
pub const IP_GID_INDEX: u8 = 1;
/// Environment variable that forces the instance's address.
pub const ADDR_ENV: &str = "DOORBELL_SOFTHCA_ADDR";
/// Environment variable that places the instance in the PCI tree, for topology reports
/// (`doorbell topo`): a PCI address (`0000:00:06.0`) or a sysfs device path
/// (`/sys/devices/pci0000:00/0000:00:03.0`, or a bridge or host bridge such as
/// `/sys/devices/pci0000:00`). A software HCA has no PCI function of its own; this says
/// where a real NIC doing its job would sit, so that NCCL's GPU-NIC path type and GDR
/// decision can be worked out for it. Unset: the instance is in no PCI tree.
pub const PCI_ENV: &str = "DOORBELL_SOFTHCA_PCI";
/// Environment variable naming the interface of the Ethernet port (raw packet QPs'
/// frames, through an AF_PACKET socket: [`crate::device::port`]), e.g. `veth0`.
pub const ETH_IF_ENV: &str = "DOORBELL_ETH_IF";
/// TEST-ONLY, until flow steering is connected: `1` delivers every received frame that
/// is not this instance's RoCEv2 to every raw packet QP that can receive.
pub const ETH_TEST_FANOUT_ENV: &str = "DOORBELL_ETH_TEST_FANOUT";
/// Mellanox's IEEE OUI.
pub const MELLANOX_OUI: [u8; 3] = [0x00, 0x02, 0xc9];

/// A GID index at or past the table's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfTable;

/// One row of the GID table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gid {
    pub gid: [u8; 16],
    /// `IB_UVERBS_GID_TYPE_ROCE_V1` or `_V2`.
    pub gid_type: u32,
}

/// The identity and capabilities of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Device name (`ibv_devices`), e.g. "softhca0".
    pub name: String,
    /// The port's IP address; RoCEv2 packets arrive at `addr:4791` and leave from `addr`
    /// and their QP's UDP source port (`crate::device::sport`).
    pub addr: IpAddr,
    /// Node GUID bytes in wire order (`ib_uverbs_query_device_resp.node_guid`).
    pub node_guid: [u8; 8],
    /// System image GUID bytes; equal to the node GUID on a single-port adapter.
    pub sys_image_guid: [u8; 8],
    /// The port's MAC address.
    pub mac: [u8; 6],
    /// Firmware version (major, minor, subminor): printed as 16.35.1012.
    pub fw_ver: (u16, u16, u16),
    /// PCI vendor id of the adapter (0x02c9 as mlx5 reports it).
    pub vendor_id: u32,
    /// PCI device id: 4119 (0x1017) for a ConnectX-5.
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    /// `enum ibv_mtu` codes of the port.
    pub max_mtu: u8,
    pub active_mtu: u8,
    /// IB width and speed codes (`2` = 4X, `32` = EDR: 100 Gb/s).
    pub active_width: u8,
    pub active_speed: u8,
    /// Completion vectors (EQs) offered to CQs.
    pub num_comp_vectors: u32,
    /// Rows of the GID table (`roce_address_table_size`).
    pub gid_tbl_len: u32,
    /// Interface index of the netdev carrying `addr` (0 if none was found).
    pub netdev_ifindex: u32,
    /// Frequency of the free-running timer, in kHz.
    pub core_clock_khz: u64,
    /// Whether the application may use BlueFlame (write-combining) UARs: mlx5 then reports
    /// `bf_reg_size` 512 and accepts BlueFlame UAR allocations.
    pub write_combining: bool,
    /// Whether contexts may use dynamic UARs (`MLX5_LIB_CAP_DYN_UAR`, UAR objects
    /// allocated through the ioctl interface). `false` behaves like a kernel that predates
    /// them: every context gets static UARs mapped at open (`tot_bfregs > 0`), which is the
    /// only mode libmlx5 can use when the device answers no ioctl at all (write() only).
    pub dynamic_uars: bool,
    /// Faults to inject into transmitted packets (tests); `DOORBELL_FAULT` sets it for
    /// every instance of a process (see [`crate::device::fault`]).
    pub fault: Option<FaultSpec>,
    /// Capture every sent and received packet to this pcap file; `DOORBELL_PCAP` sets it
    /// (`{addr}` in the path becomes the instance's address, see [`crate::device::trace`]).
    pub pcap: Option<PathBuf>,
    /// Let the engine sleep on the doorbell trap (write-protected UAR pages, see
    /// [`crate::device::trap`]) when the kernel supports it; `false` (or
    /// `DOORBELL_DOORBELL_TRAP=0`) keeps the timed backoff.
    pub doorbell_trap: bool,
    /// Where the instance sits in the PCI tree, as [`PCI_ENV`] gives it (not validated
    /// here: `gdr::topo` resolves it against sysfs).
    pub pci_path: Option<String>,
    /// Which path packets take to same-host peers (`DOORBELL_WIRE`, see
    /// [`crate::device::link`]).
    pub wire: crate::device::link::Wire,
    /// The interface the Ethernet port of raw packet QPs is attached to ([`ETH_IF_ENV`];
    /// None: no port).
    pub eth_if: Option<String>,
    /// TEST-ONLY until flow steering is connected ([`ETH_TEST_FANOUT_ENV`]).
    pub eth_test_fanout: bool,
}

impl Config {
    /// The configuration of an instance at `addr`.
    pub fn for_addr(addr: IpAddr) -> Config {
        let mac = mac_of(addr);
        let tail = [mac[3], mac[4], mac[5]];
        let [a, b, c] = MELLANOX_OUI;
        let node_guid = [a, b, c, 0x03, 0x00, tail[0], tail[1], tail[2]];
        let netdev = netdev_of(addr);
        let ipv4 = matches!(addr, IpAddr::V4(_)) || matches!(addr, IpAddr::V6(a) if a.to_ipv4_mapped().is_some());
        // Unknown interface MTU: assume a jumbo-capable one, as before MTUs were read.
        let active_mtu = netdev.as_ref().and_then(|(name, _)| netdev_mtu(name))
            .map_or(mtu::MTU_4096, |m| ib_mtu_for_netdev(m, ipv4));
        Config {
            name: "softhca0".to_string(),
            addr,
            node_guid,
            sys_image_guid: node_guid,
            mac,
            fw_ver: (16, 35, 1012),
            vendor_id: 0x02c9,
            vendor_part_id: 0x1017,
            hw_ver: 0,
            max_mtu: mtu::MTU_4096,
            active_mtu,
            active_width: 2,
            active_speed: 32,
            num_comp_vectors: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1).min(64),
            gid_tbl_len: 256,
            netdev_ifindex: netdev.map_or(0, |(_, i)| i),
            core_clock_khz: 156_250,
            write_combining: true,
            dynamic_uars: true,
            fault: FaultSpec::from_env(),
            pcap: std::env::var_os(PCAP_ENV).filter(|p| !p.is_empty()).map(PathBuf::from),
            doorbell_trap: crate::device::trap::env_allows(),
            pci_path: pci_path_from_env(),
            wire: crate::device::link::Wire::from_env(),
            eth_if: std::env::var(ETH_IF_ENV).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
            eth_test_fanout: switched_on(ETH_TEST_FANOUT_ENV),
        }
    }

    /// `fw_ver` packed as `ib_uverbs_query_device_resp.fw_ver`.
    pub fn fw_ver_u64(&self) -> u64 {
        ((self.fw_ver.0 as u64) << 32) | ((self.fw_ver.1 as u64) << 16) | self.fw_ver.2 as u64
    }

    /// The GID a peer addresses this instance by: the IPv4-mapped address (or the IPv6
    /// address itself).
    pub fn ip_gid(&self) -> [u8; 16] {
        match self.addr {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        }
    }

    /// The address of the instance that a destination GID names, as seen from this one
    /// (see the module docs): None for `::` and for a link-local GID whose MAC no softhca
    /// host on this link has.
    pub fn peer_addr(&self, gid: &[u8; 16]) -> Option<IpAddr> {
        let v6 = Ipv6Addr::from(*gid);
        if let Some(v4) = v6.to_ipv4_mapped() {
            return Some(IpAddr::V4(v4));
        }
        if v6.is_unspecified() {
            return None;
        }
        match link_local_mac(gid) {
            Some(mac) => self.owner_of_mac(mac),
            None => Some(IpAddr::V6(v6)),
        }
    }

    /// What MODIFY_QP and CREATE_AH resolve a destination GID to: the destination MAC
    /// (inside a link-local GID, or that of the softhca host the GID names; zero
    /// otherwise) and the host's address ([`Config::peer_addr`]).
    pub fn resolve(&self, gid: &[u8; 16]) -> ([u8; 6], Option<IpAddr>) {
        let ip = self.peer_addr(gid);
        let mac = link_local_mac(gid).or(ip.map(mac_of)).unwrap_or_default();
        (mac, ip)
    }

    /// The address on this instance's link whose MAC is `mac` (the inverse of the MAC
    /// derivation in [`Config::for_addr`]), if it is a softhca MAC.
    pub fn owner_of_mac(&self, mac: [u8; 6]) -> Option<IpAddr> {
        if mac[..3] != MELLANOX_OUI {
            return None;
        }
        Some(match self.addr {
            IpAddr::V4(a) => {
                let o = a.octets();
                IpAddr::V4(Ipv4Addr::new(o[0], mac[3], mac[4], mac[5]))
            }
            IpAddr::V6(a) => {
                let mut o = a.octets();
                o[13..].copy_from_slice(&mac[3..]);
                IpAddr::V6(Ipv6Addr::from(o))
            }
        })
    }

    /// The link-local GID: fe80::/64 with the modified EUI-64 of the MAC.
    pub fn link_local_gid(&self) -> [u8; 16] {
        let m = self.mac;
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..16].copy_from_slice(&[m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]);
        g
    }

    /// The filled rows of the GID table, in index order starting at 0.
    pub fn gids(&self) -> Vec<Gid> {
        let v2 = |gid| Gid { gid, gid_type: GID_TYPE_ROCE_V2 };
        let mut v = vec![v2(self.link_local_gid())];
        let ll = matches!(self.addr, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80);
        if !ll {
            v.push(v2(self.ip_gid()));
        }
        v.truncate(self.gid_tbl_len as usize);
        v
    }

    /// The row at `index`: `Ok(None)` for an empty row inside the table, an error past it.
    pub fn gid(&self, index: u32) -> Result<Option<Gid>, OutOfTable> {
        if index >= self.gid_tbl_len {
            return Err(OutOfTable);
        }
        Ok(self.gids().get(index as usize).copied())
    }
}

/// Whether an on/off environment switch is set to off: `0`, `false`, `off` or `no`, in
/// any case and with surrounding blanks. Unset or anything else leaves the feature on.
pub fn switched_off(var: &str) -> bool {
    is_off(std::env::var(var).ok().as_deref())
}

/// [`switched_off`] of a value (`None`: unset).
pub fn is_off(v: Option<&str>) -> bool {
    v.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "off" | "no"))
}

/// Whether an opt-in environment switch is set to on: `1`, `true`, `on` or `yes`, in any
/// case and with surrounding blanks. Unset or anything else leaves the feature off.
pub fn switched_on(var: &str) -> bool {
    is_on(std::env::var(var).ok().as_deref())
}

/// [`switched_on`] of a value (`None`: unset).
pub fn is_on(v: Option<&str>) -> bool {
    v.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "on" | "yes"))
}

/// The PCI placement [`PCI_ENV`] configures (trimmed; unset or blank is `None`).
pub fn pci_path_from_env() -> Option<String> {
    std::env::var(PCI_ENV).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The MAC of the softhca host at `addr`: the Mellanox OUI and the address's last three
/// bytes.
pub fn mac_of(addr: IpAddr) -> [u8; 6] {
    let t = match addr {
        IpAddr::V4(a) => {
            let o = a.octets();
            [o[1], o[2], o[3]]
        }
        IpAddr::V6(a) => {
            let o = a.octets();
            [o[13], o[14], o[15]]
        }
    };
    let [a, b, c] = MELLANOX_OUI;
    [a, b, c, t[0], t[1], t[2]]
}

/// The MAC a link-local GID (`fe80::/64` with a modified EUI-64 interface identifier,
/// `xx:xx:xx:ff:fe:xx:xx:xx`) was built from, as the kernel's `rdma_get_ll_mac` reads it;
/// None for any other GID.
pub fn link_local_mac(gid: &[u8; 16]) -> Option<[u8; 6]> {
    let g = gid;
    let fe80 = g[0] == 0xfe && g[1] == 0x80 && g[2..8].iter().all(|&b| b == 0);
    if !fe80 || g[11] != 0xff || g[12] != 0xfe {
        return None;
    }
    Some([g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]])
}

/// The name and interface index of the netdev that has `addr`.
fn netdev_of(addr: IpAddr) -> Option<(String, u32)> {
    let index = |name: &str| nix::net::if_::if_nametoindex(name).ok().map(|i| (name.to_string(), i));
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for ifa in addrs {
            let Some(sa) = ifa.address else { continue };
            let matches = match addr {
                IpAddr::V4(a) => sa.as_sockaddr_in().map(|s| s.ip() == a).unwrap_or(false),
                IpAddr::V6(a) => sa.as_sockaddr_in6().map(|s| s.ip() == a).unwrap_or(false),
            };
            if matches {
                return index(ifa.interface_name.as_str());
            }
        }
    }
    // Every 127/8 address belongs to the loopback device even when only 127.0.0.1 is listed.
    match addr {
        IpAddr::V4(a) if a.is_loopback() => index("lo"),
        IpAddr::V6(a) if a.is_loopback() => index("lo"),
        _ => None,
    }
}

/// The MTU of the netdev `name` (`/sys/class/net/<name>/mtu`).
fn netdev_mtu(name: &str) -> Option<u32> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?.trim().parse().ok()
}

/// Bytes a RoCEv2 packet adds around a full-MTU payload, as mlx5 counts them
/// (`iboe_get_mtu`): the IP header (20 for IPv4, 40 for IPv6), UDP 8, BTH 12, the
/// largest extension headers of any packet (28: the AtomicETH, more than RETH + ImmDt =
/// 20 or DETH + ImmDt = 12) and the ICRC 4.
pub const fn roce_overhead(ipv4: bool) -> u32 {
    (if ipv4 { 20 } else { 40 }) + 8 + 12 + 28 + 4
}

/// The largest IB MTU code (`enum ibv_mtu`, 256 .. 4096) whose packets fit in an
/// interface MTU of `netdev_mtu` bytes; 256 when even that does not fit (mlx5 then still
/// reports 256).
pub fn ib_mtu_for_netdev(netdev_mtu: u32, ipv4: bool) -> u8 {
    let room = netdev_mtu.saturating_sub(roce_overhead(ipv4));
    [(4096, mtu::MTU_4096), (2048, mtu::MTU_2048), (1024, mtu::MTU_1024), (512, mtu::MTU_512)]
        .into_iter()
        .find(|&(bytes, _)| room >= bytes)
        .map_or(mtu::MTU_256, |(_, code)| code)
}

/// Binds the RoCEv2 socket at `addr:4791` with `IP_MTU_DISCOVER = IP_PMTUDISC_DO`: the
/// wire module rebuilds the IPv4 header for the ICRC and needs DF set and a zero
/// identification (see `crate::wire::icrc`).
pub fn bind_roce_socket(addr: IpAddr) -> io::Result<UdpSocket> {
    bind_roce_socket_at(addr, ROCE_V2_PORT)
}

/// [`bind_roce_socket`] at `port`: a socket that sends RoCEv2 packets from that source
/// port (see `crate::device::sport`).
pub fn bind_roce_socket_at(addr: IpAddr, port: u16) -> io::Result<UdpSocket> {
    let sock = UdpSocket::bind(SocketAddr::new(addr, port))?;
    let (level, name, value) = match addr {
        IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO),
        IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_DO),
    };
    // SAFETY: setsockopt on a socket we own with a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(sock.as_raw_fd(), level, name, (&value as *const libc::c_int).cast(),
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// The address `DOORBELL_SOFTHCA_ADDR` forces, if set. An unparsable value is an error.
pub fn forced_addr() -> io::Result<Option<IpAddr>> {
    match std::env::var(ADDR_ENV) {
        Ok(s) => s.trim().parse::<IpAddr>().map(Some).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{ADDR_ENV}={s}: {e}"))
        }),
        Err(_) => Ok(None),
    }
}

/// Picks this instance's address and binds its socket: the forced address, or the first
/// free `127.0.0.N` (N = 1 ... 254).
pub fn bind_default() -> io::Result<(IpAddr, UdpSocket)> {
    if let Some(a) = forced_addr()? {
        return bind_roce_socket(a).map(|s| (a, s));
    }
    let mut last = io::Error::from(io::ErrorKind::AddrInUse);
    for n in 1..=254u8 {
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, n));
        match bind_roce_socket(a) {
            Ok(s) => return Ok((a, s)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

impl Default for Config {
    /// The configuration for `127.0.0.1` (no socket is bound by this call).
    fn default() -> Config {
        Config::for_addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// `::` as a GID, for tests.
pub const ZERO_GID: [u8; 16] = Ipv6Addr::UNSPECIFIED.octets();

#[cfg(test)]
mod tests {
    use super::*;

    /// Each switch: unset and the other switch's words leave the default; its own words,
    /// in any case and with blanks, flip it.
    #[test]
    fn on_and_off_switches() {
        let cases: [(fn(Option<&str>) -> bool, &str, [&str; 5]); 2] =
            [(is_off, "1", ["0", " 0 ", "false", "OFF", "no"]), (is_on, "0", ["1", " 1 ", "true", "ON", "yes"])];
        for (flipped, other, words) in cases {
            assert!(!flipped(None));
            assert!(!flipped(Some(other)));
            assert!(!flipped(Some("")));
            for w in words {
                assert!(flipped(Some(w)), "{w:?}");
            }
        }
    }

    #[test]
    fn identity_derives_from_the_address() {
        let c = Config::for_addr("127.0.0.5".parse().unwrap());
        assert_eq!(c.node_guid, [0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x05]);
        assert_eq!(c.mac, [0x00, 0x02, 0xc9, 0x00, 0x00, 0x05]);
        assert_eq!(c.fw_ver_u64(), (16 << 32) | (35 << 16) | 1012);
        // rxe's table for one IPv4 address: fe80:: + EUI-64, then ::ffff:a.b.c.d, both
        // RoCE v2 (IB_UVERBS_GID_TYPE_ROCE_V2 = 2 in rdma/ib_user_ioctl_verbs.h).
        let g = c.gids();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].gid[..2], [0xfe, 0x80]);
        assert_eq!(g[0].gid[8..], [0x02, 0x02, 0xc9, 0xff, 0xfe, 0x00, 0x00, 0x05]);
        assert_eq!(g[1].gid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 5]);
        assert!(g.iter().all(|g| g.gid_type == 2), "{g:?}");
        assert_eq!(c.gid(IP_GID_INDEX as u32), Ok(Some(g[1])));
        assert_eq!(c.gid(2), Ok(None));
        assert_eq!(c.gid(256), Err(OutOfTable));
        assert_ne!(c.netdev_ifindex, 0, "127/8 is on lo");
    }

    #[test]
    fn link_local_gids_name_the_instance_that_owns_the_mac() {
        let a = Config::for_addr("127.0.0.5".parse().unwrap());
        let b = Config::for_addr("127.3.2.1".parse().unwrap());
        assert_eq!(link_local_mac(&b.link_local_gid()), Some(b.mac));
        assert_eq!(a.peer_addr(&b.link_local_gid()), Some(b.addr));
        assert_eq!(b.peer_addr(&a.link_local_gid()), Some(a.addr));
        assert_eq!(a.peer_addr(&a.link_local_gid()), Some(a.addr), "loopback to itself");
        assert_eq!(a.peer_addr(&b.ip_gid()), Some(b.addr));
        assert_eq!(a.peer_addr(&ZERO_GID), None);
        // Another link: the first byte comes from this instance's address.
        let c = Config::for_addr("10.231.0.1".parse().unwrap());
        let d = Config::for_addr("10.231.0.12".parse().unwrap());
        assert_eq!(c.peer_addr(&d.link_local_gid()), Some(d.addr));
        let v6 = |s: &str| Config::for_addr(s.parse().unwrap());
        let (e, f) = (v6("fd00::1:1"), v6("fd00::1:2"));
        assert_eq!(e.peer_addr(&f.link_local_gid()), Some(f.addr));
        // A MAC no softhca host has, a link-local GID that is no EUI-64, a global IPv6 GID.
        let foreign: [u8; 16] = "fe80::211:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap().octets();
        assert_eq!(link_local_mac(&foreign), Some([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]));
        assert_eq!(a.peer_addr(&foreign), None);
        let odd: [u8; 16] = "fe80::1".parse::<Ipv6Addr>().unwrap().octets();
        assert_eq!((link_local_mac(&odd), a.peer_addr(&odd)), (None, Some("fe80::1".parse().unwrap())));
        let global: [u8; 16] = "2001:db8::2:3".parse::<Ipv6Addr>().unwrap().octets();
        assert_eq!(a.peer_addr(&global), Some("2001:db8::2:3".parse().unwrap()));
    }

    #[test]
    fn active_mtu_from_the_netdev_mtu() {
        // Loopback, jumbo frames, Ethernet, and the edges around each IB MTU.
        assert_eq!(ib_mtu_for_netdev(65536, true), mtu::MTU_4096);
        assert_eq!(ib_mtu_for_netdev(9000, true), mtu::MTU_4096);
        assert_eq!(ib_mtu_for_netdev(4096 + 72, true), mtu::MTU_4096);
        assert_eq!(ib_mtu_for_netdev(4096 + 71, true), mtu::MTU_2048);
        assert_eq!(ib_mtu_for_netdev(4096 + 72, false), mtu::MTU_2048, "IPv6 needs 20 more");
        assert_eq!(ib_mtu_for_netdev(4096 + 92, false), mtu::MTU_4096);
        assert_eq!(ib_mtu_for_netdev(1500, true), mtu::MTU_1024);
        assert_eq!(ib_mtu_for_netdev(1500, false), mtu::MTU_1024);
        assert_eq!(ib_mtu_for_netdev(1024 + 72, true), mtu::MTU_1024);
        assert_eq!(ib_mtu_for_netdev(1024 + 71, true), mtu::MTU_512);
        assert_eq!(ib_mtu_for_netdev(576, true), mtu::MTU_256);
        assert_eq!(ib_mtu_for_netdev(68, true), mtu::MTU_256);
        assert_eq!(ib_mtu_for_netdev(0, true), mtu::MTU_256);
        // The largest packet at each MTU fits: IPv4 + UDP + BTH + RETH + ImmDt + payload + ICRC.
        for m in [576u32, 1280, 1500, 2000, 4000, 4200, 9000] {
            let bytes = 128u32 << ib_mtu_for_netdev(m, true);
            assert!(bytes == 256 || 20 + 8 + 12 + 16 + 4 + bytes + 4 <= m, "{m}");
        }
        // The loopback instance: lo's MTU is 65536.
        let c = Config::for_addr("127.0.0.5".parse().unwrap());
        if netdev_mtu("lo").is_some_and(|m| m >= 4096 + 72) {
            assert_eq!(c.active_mtu, mtu::MTU_4096);
        }
        assert_eq!(c.max_mtu, mtu::MTU_4096);
    }

    #[test]
    fn sockets_get_distinct_loopback_addresses() {
        if forced_addr().unwrap().is_some() {
            testkit::skip(testkit::Need::Env, format!("{ADDR_ENV} forces one address (unset it)"));
            return;
        }
        let (a, _s1) = bind_default().unwrap();
        let (b, _s2) = bind_default().unwrap();
        assert_ne!(a, b);
        assert!(matches!(a, IpAddr::V4(v) if v.is_loopback()));
    }
}
