//! `doorbell devinfo [-v] [-d DEV]`: what ibv_devinfo prints, in its layout.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

use anyhow::{Context as _, Result};
use provider::device::{self, DeviceEntry};
use provider::Context;
use uverbs::sys::mlx5::QueryDeviceResp as Mlx5DeviceResp;
use uverbs::sys::verbs::{link_layer, mtu, port_state, ExQueryDeviceResp, GidEntry, QueryPortRespEx, GID_TYPE_ROCE_V1, GID_TYPE_ROCE_V2};

#[derive(clap::Args)]
pub struct Args {
    /// Print all attributes, including the GID table.
    #[arg(short, long)]
    verbose: bool,
    /// Only this device (default: all).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Only this port.
    #[arg(short = 'i', long = "ib-port")]
    port: Option<u8>,
    /// Only list device names, like ibv_devinfo -l.
    #[arg(short = 'l', long)]
    list: bool,
}

pub fn run(a: &Args) -> Result<()> {
    let devs = device::list();
    if a.list {
        println!("{} HCA{} found:", devs.len(), if devs.len() == 1 { "" } else { "s" });
        for d in &devs {
            println!("\t{}", d.name());
        }
        return Ok(());
    }
    let selected: Vec<&DeviceEntry> = devs.iter().filter(|d| a.dev.as_deref().is_none_or(|n| n == d.name())).collect();
    if selected.is_empty() {
        anyhow::bail!("IB device '{}' wasn't found", a.dev.as_deref().unwrap_or(""));
    }
    for d in selected {
        let ctx = Context::open(Some(d.name())).with_context(|| format!("open {}", d.name()))?;
        print!("{}", render(&ctx, &board_id(d), a.verbose, a.port)?);
    }
    Ok(())
}

/// The board id, which only sysfs knows (softhca's is a constant of its own).
fn board_id(d: &DeviceEntry) -> String {
    match d {
        DeviceEntry::Soft { .. } => softhca::BOARD_ID.to_string(),
        DeviceEntry::Kernel(k) => {
            let p = uverbs::discovery::sysfs_root().join("class/infiniband").join(&k.name).join("board_id");
            std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default()
        }
    }
}

/// One device's report.
pub fn render(ctx: &Context, board_id: &str, verbose: bool, only_port: Option<u8>) -> Result<String> {
    let mut o = String::new();
    let attr = ctx.device_attr();
    let b = &attr.base;
    writeln!(o, "hca_id:\t{}", ctx.name())?;
    writeln!(o, "\ttransport:\t\t\tInfiniBand (0)")?;
    writeln!(o, "\tfw_ver:\t\t\t\t{}", fw_ver(b.fw_ver))?;
    writeln!(o, "\tnode_guid:\t\t\t{}", guid(b.node_guid))?;
    writeln!(o, "\tsys_image_guid:\t\t\t{}", guid(b.sys_image_guid))?;
    writeln!(o, "\tvendor_id:\t\t\t{:#06x}", b.vendor_id)?;
    writeln!(o, "\tvendor_part_id:\t\t\t{}", b.vendor_part_id)?;
    writeln!(o, "\thw_ver:\t\t\t\t{:#x}", b.hw_ver)?;
    if !board_id.is_empty() {
        writeln!(o, "\tboard_id:\t\t\t{board_id}")?;
    }
    writeln!(o, "\tphys_port_cnt:\t\t\t{}", b.phys_port_cnt)?;
    if verbose {
        device_verbose(&mut o, attr, ctx.mlx5_attr(), ctx.num_comp_vectors())?;
    }
    for p in 1..=b.phys_port_cnt {
        if only_port.is_some_and(|x| x != p) {
            continue;
        }
        let pa = ctx.query_port(p)?;
        port(&mut o, p, &pa, verbose)?;
        if verbose {
            let gids: Vec<GidEntry> = ctx.gid_table()?.into_iter().filter(|g| g.port_num == p as u32).collect();
            for g in gids {
                writeln!(o, "\t\t\tGID[{:>3}]:\t\t{}, {}", g.gid_index, gid_str(&g), gid_type(g.gid_type))?;
            }
        }
    }
    writeln!(o)?;
    Ok(o)
}

fn fw_ver(v: u64) -> String {
    format!("{}.{}.{:04}", v >> 32, (v >> 16) & 0xffff, v & 0xffff)
}

/// GUIDs travel big-endian; print them as sysfs does, four groups of 16 bits.
fn guid(be: u64) -> String {
    let v = u64::from_be(be);
    format!("{:04x}:{:04x}:{:04x}:{:04x}", v >> 48, (v >> 32) & 0xffff, (v >> 16) & 0xffff, v & 0xffff)
}

/// RoCE v2 GIDs print as IPv6 addresses; the others as eight 16-bit groups.
fn gid_str(g: &GidEntry) -> String {
    let raw = g.raw();
    if g.gid_type == GID_TYPE_ROCE_V2 {
        return Ipv6Addr::from(raw).to_string();
    }
    raw.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

fn gid_type(t: u32) -> &'static str {
    match t {
        GID_TYPE_ROCE_V2 => "RoCE v2",
        GID_TYPE_ROCE_V1 => "RoCE v1",
        _ => "IB",
    }
}

fn port_state_str(s: u8) -> &'static str {
    match s {
        port_state::DOWN => "PORT_DOWN",
        port_state::INIT => "PORT_INIT",
        port_state::ARMED => "PORT_ARMED",
        port_state::ACTIVE => "PORT_ACTIVE",
        _ => "invalid state",
    }
}

fn mtu_str(m: u8) -> String {
    mtu::bytes(m).map(|b| b.to_string()).unwrap_or_else(|| "invalid MTU".into())
}

fn port(o: &mut String, p: u8, pa: &QueryPortRespEx, verbose: bool) -> Result<()> {
    let l = &pa.legacy_resp;
    writeln!(o, "\t\tport:\t{p}")?;
    writeln!(o, "\t\t\tstate:\t\t\t{} ({})", port_state_str(l.state), l.state)?;
    writeln!(o, "\t\t\tmax_mtu:\t\t{} ({})", mtu_str(l.max_mtu), l.max_mtu)?;
    writeln!(o, "\t\t\tactive_mtu:\t\t{} ({})", mtu_str(l.active_mtu), l.active_mtu)?;
    writeln!(o, "\t\t\tsm_lid:\t\t\t{}", l.sm_lid)?;
    writeln!(o, "\t\t\tport_lid:\t\t{}", l.lid)?;
    writeln!(o, "\t\t\tport_lmc:\t\t{:#04x}", l.lmc)?;
    let ll = match l.link_layer {
        link_layer::ETHERNET => "Ethernet",
        link_layer::INFINIBAND => "InfiniBand",
        _ => "Unknown",
    };
    writeln!(o, "\t\t\tlink_layer:\t\t{ll}")?;
    if verbose {
        writeln!(o, "\t\t\tmax_msg_sz:\t\t{:#x}", l.max_msg_sz)?;
        writeln!(o, "\t\t\tport_cap_flags:\t\t{:#010x}", l.port_cap_flags)?;
        writeln!(o, "\t\t\tport_cap_flags2:\t{:#06x}", pa.port_cap_flags2)?;
        writeln!(o, "\t\t\tmax_vl_num:\t\t{} ({})", vl(l.max_vl_num), l.max_vl_num)?;
        writeln!(o, "\t\t\tbad_pkey_cntr:\t\t{:#x}", l.bad_pkey_cntr)?;
        writeln!(o, "\t\t\tqkey_viol_cntr:\t\t{:#x}", l.qkey_viol_cntr)?;
        writeln!(o, "\t\t\tsm_sl:\t\t\t{}", l.sm_sl)?;
        writeln!(o, "\t\t\tpkey_tbl_len:\t\t{}", l.pkey_tbl_len)?;
        writeln!(o, "\t\t\tgid_tbl_len:\t\t{}", l.gid_tbl_len)?;
        writeln!(o, "\t\t\tsubnet_timeout:\t\t{}", l.subnet_timeout)?;
        writeln!(o, "\t\t\tinit_type_reply:\t{}", l.init_type_reply)?;
        writeln!(o, "\t\t\tactive_width:\t\t{} ({})", width(l.active_width), l.active_width)?;
        writeln!(o, "\t\t\tactive_speed:\t\t{} ({})", speed(l.active_speed), l.active_speed)?;
        writeln!(o, "\t\t\tphys_state:\t\t{} ({})", phys_state(l.phys_state), l.phys_state)?;
    }
    Ok(())
}

fn vl(v: u8) -> String {
    match v {
        1 => "1".into(),
        2 => "2".into(),
        3 => "4".into(),
        4 => "8".into(),
        5 => "15".into(),
        _ => "invalid value".into(),
    }
}

fn width(w: u8) -> &'static str {
    match w { 1 => "1X", 2 => "4X", 4 => "8X", 8 => "12X", 16 => "2X", _ => "invalid width" }
}

fn speed(s: u8) -> &'static str {
    match s {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

fn phys_state(s: u8) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION TRAINNING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY TEST",
        _ => "invalid physical state",
    }
}

/// `enum ibv_device_cap_flags` names, by bit.
const CAP_FLAGS: &[(u32, &str)] = &[
    (0, "RESIZE_MAX_WR"), (1, "BAD_PKEY_CNTR"), (2, "BAD_QKEY_CNTR"), (3, "RAW_MULTI"),
    (4, "AUTO_PATH_MIG"), (5, "CHANGE_PHY_PORT"), (6, "UD_AV_PORT_ENFORCE"), (7, "CURR_QP_STATE_MOD"),
    (8, "SHUTDOWN_PORT"), (9, "INIT_TYPE"), (10, "PORT_ACTIVE_EVENT"), (11, "SYS_IMAGE_GUID"),
    (12, "RC_RNR_NAK_GEN"), (13, "SRQ_RESIZE"), (14, "N_NOTIFY_CQ"), (17, "MEM_WINDOW"),
    (18, "UD_IP_CSUM"), (20, "XRC"), (21, "MEM_MGT_EXTENSIONS"), (23, "MEM_WINDOW_TYPE_2A"),
    (24, "MEM_WINDOW_TYPE_2B"), (25, "RC_IP_CSUM"), (26, "RAW_IP_CSUM"), (29, "MANAGED_FLOW_STEERING"),
];

/// The extended capability bits ibv_devinfo names (bits above 31).
const CAP_FLAGS_EX: &[(u32, &str)] = &[(34, "RAW_SCATTER_FCS"), (36, "PCI_WRITE_END_PADDING")];

fn flag_names(o: &mut String, v: u64, table: &[(u32, &str)]) -> Result<()> {
    for (bit, name) in table {
        if v & (1u64 << bit) != 0 {
            writeln!(o, "\t\t\t\t\t{name}")?;
        }
    }
    Ok(())
}

/// `ibv_odp_transport_cap_bits` names.
fn odp_caps(o: &mut String, label: &str, caps: u32) -> Result<()> {
    writeln!(o, "\t{label}:")?;
    if caps == 0 {
        writeln!(o, "\t\t\t\t\tNO SUPPORT")?;
    }
    let names = [(0, "SUPPORT_SEND"), (1, "SUPPORT_RECV"), (2, "SUPPORT_WRITE"), (3, "SUPPORT_READ"),
                 (4, "SUPPORT_ATOMIC"), (5, "SUPPORT_SRQ")];
    flag_names(o, caps as u64, &names)
}

fn device_verbose(o: &mut String, a: &ExQueryDeviceResp, m: &Mlx5DeviceResp, ncv: u32) -> Result<()> {
    let b = &a.base;
    writeln!(o, "\tmax_mr_size:\t\t\t{:#x}", b.max_mr_size)?;
    writeln!(o, "\tpage_size_cap:\t\t\t{:#x}", b.page_size_cap)?;
    writeln!(o, "\tmax_qp:\t\t\t\t{}", b.max_qp)?;
    writeln!(o, "\tmax_qp_wr:\t\t\t{}", b.max_qp_wr)?;
    writeln!(o, "\tdevice_cap_flags:\t\t{:#010x}", b.device_cap_flags)?;
    flag_names(o, b.device_cap_flags as u64, CAP_FLAGS)?;
    writeln!(o, "\tmax_sge:\t\t\t{}", b.max_sge)?;
    writeln!(o, "\tmax_sge_rd:\t\t\t{}", b.max_sge_rd)?;
    writeln!(o, "\tmax_cq:\t\t\t\t{}", b.max_cq)?;
    writeln!(o, "\tmax_cqe:\t\t\t{}", b.max_cqe)?;
    writeln!(o, "\tmax_mr:\t\t\t\t{}", b.max_mr)?;
    writeln!(o, "\tmax_pd:\t\t\t\t{}", b.max_pd)?;
    writeln!(o, "\tmax_qp_rd_atom:\t\t\t{}", b.max_qp_rd_atom)?;
    writeln!(o, "\tmax_ee_rd_atom:\t\t\t{}", b.max_ee_rd_atom)?;
    writeln!(o, "\tmax_res_rd_atom:\t\t{}", b.max_res_rd_atom)?;
    writeln!(o, "\tmax_qp_init_rd_atom:\t\t{}", b.max_qp_init_rd_atom)?;
    writeln!(o, "\tmax_ee_init_rd_atom:\t\t{}", b.max_ee_init_rd_atom)?;
    let atomic = match b.atomic_cap { 0 => "ATOMIC_NONE", 1 => "ATOMIC_HCA", 2 => "ATOMIC_GLOB", _ => "invalid atomic capability" };
    writeln!(o, "\tatomic_cap:\t\t\t{} ({})", atomic, b.atomic_cap)?;
    writeln!(o, "\tmax_ee:\t\t\t\t{}", b.max_ee)?;
    writeln!(o, "\tmax_rdd:\t\t\t{}", b.max_rdd)?;
    writeln!(o, "\tmax_mw:\t\t\t\t{}", b.max_mw)?;
    writeln!(o, "\tmax_raw_ipv6_qp:\t\t{}", b.max_raw_ipv6_qp)?;
    writeln!(o, "\tmax_raw_ethy_qp:\t\t{}", b.max_raw_ethy_qp)?;
    writeln!(o, "\tmax_mcast_grp:\t\t\t{}", b.max_mcast_grp)?;
    writeln!(o, "\tmax_mcast_qp_attach:\t\t{}", b.max_mcast_qp_attach)?;
    writeln!(o, "\tmax_total_mcast_qp_attach:\t{}", b.max_total_mcast_qp_attach)?;
    writeln!(o, "\tmax_ah:\t\t\t\t{}", b.max_ah)?;
    writeln!(o, "\tmax_fmr:\t\t\t{}", b.max_fmr)?;
    writeln!(o, "\tmax_srq:\t\t\t{}", b.max_srq)?;
    writeln!(o, "\tmax_srq_wr:\t\t\t{}", b.max_srq_wr)?;
    writeln!(o, "\tmax_srq_sge:\t\t\t{}", b.max_srq_sge)?;
    writeln!(o, "\tmax_pkeys:\t\t\t{}", b.max_pkeys)?;
    writeln!(o, "\tlocal_ca_ack_delay:\t\t{}", b.local_ca_ack_delay)?;
    writeln!(o, "\tgeneral_odp_caps:")?;
    flag_names(o, a.odp_general_caps, &[(0, "ODP_SUPPORT"), (1, "ODP_SUPPORT_IMPLICIT")])?;
    odp_caps(o, "rc_odp_caps", a.odp_rc_caps)?;
    odp_caps(o, "uc_odp_caps", a.odp_uc_caps)?;
    odp_caps(o, "ud_odp_caps", a.odp_ud_caps)?;
    odp_caps(o, "xrc_odp_caps", a.xrc_odp_caps)?;
    if a.hca_core_clock != 0 {
        writeln!(o, "\tcompletion timestamp_mask:\t\t\t{:#018x}", a.timestamp_mask)?;
        writeln!(o, "\thca_core_clock:\t\t\t{}kHZ", a.hca_core_clock)?;
    } else {
        writeln!(o, "\tcompletion_timestamp_mask not supported")?;
        writeln!(o, "\tcore clock not supported")?;
    }
    writeln!(o, "\tdevice_cap_flags_ex:\t\t0x{:X}", a.device_cap_flags_ex)?;
    flag_names(o, a.device_cap_flags_ex, CAP_FLAGS_EX)?;
    writeln!(o, "\ttso_caps:")?;
    writeln!(o, "\t\tmax_tso:\t\t\t{}", m.max_tso)?;
    writeln!(o, "\trss_caps:")?;
    writeln!(o, "\t\tmax_rwq_indirection_tables:\t\t\t{}", a.rss_max_rwq_indirection_tables)?;
    writeln!(o, "\t\tmax_rwq_indirection_table_size:\t\t\t{}", a.rss_max_rwq_indirection_table_size)?;
    writeln!(o, "\t\trx_hash_function:\t\t\t\t{:#x}", m.rx_hash_function)?;
    writeln!(o, "\t\trx_hash_fields_mask:\t\t\t\t{:#x}", m.rx_hash_fields_mask)?;
    writeln!(o, "\tmax_wq_type_rq:\t\t\t{}", a.max_wq_type_rq)?;
    writeln!(o, "\tpacket_pacing_caps:")?;
    writeln!(o, "\t\tqp_rate_limit_min:\t{}kbps", m.qp_rate_limit_min)?;
    writeln!(o, "\t\tqp_rate_limit_max:\t{}kbps", m.qp_rate_limit_max)?;
    if a.tm_max_num_tags == 0 {
        writeln!(o, "\ttag matching not supported")?;
    } else {
        writeln!(o, "\ttag matching supported: max_num_tags {}", a.tm_max_num_tags)?;
    }
    writeln!(o, "\tnum_comp_vectors:\t\t{ncv}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_and_fw_formats() {
        assert_eq!(guid(0x0002_c903_0001_0203u64.to_be()), "0002:c903:0001:0203");
        assert_eq!(fw_ver((16 << 32) | (35 << 16) | 1012), "16.35.1012");
    }
}
