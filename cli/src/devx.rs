//! `doorbell devx caps [-v] [-d DEV]` and `doorbell devx cmd --opcode OP ...`: the
//! firmware's capability pages decoded field by field, and raw PRM commands for
//! experiments, both through DevX (the `devx` crate).

use anyhow::{bail, Context as _, Result};
use clap::Subcommand;
use devx::cmd::table::{self, Flat};
use devx::DevxContext;
use prm::cmd::hca_cap::cap_type;
use prm::cmd::header::MboxIn;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(Subcommand)]
enum Sub {
    /// QUERY_HCA_CAP: the general, RoCE, atomic, NIC flow table and second general
    /// pages, field by field (the fields users ask about; -v: every named field).
    Caps(CapsArgs),
    /// Send one general command (QUERY_HCA_CAP, QUERY_QP, ...) and print the outbox
    /// with its status and syndrome decoded.
    Cmd(CmdArgs),
}

#[derive(clap::Args)]
struct CapsArgs {
    /// Every named field of every page, zeros included.
    #[arg(short, long)]
    verbose: bool,
    /// The device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// The values currently set instead of the maxima.
    #[arg(long)]
    current: bool,
}

#[derive(clap::Args)]
struct CmdArgs {
    /// The device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// The opcode: a number (0x50b) or a PRM name (QUERY_QP).
    #[arg(long)]
    opcode: String,
    /// The op_mod field.
    #[arg(long, default_value = "0")]
    op_mod: String,
    /// The whole inbox as hex bytes (spaces allowed); --opcode overwrites its opcode,
    /// a nonzero --op-mod its op_mod.
    #[arg(long = "in", conflicts_with = "set")]
    inbox: Option<String>,
    /// Set an inbox field by its PRM path: `qpn=0x12`, `qpc.log_sq_size=6`.
    #[arg(long, value_name = "FIELD=VALUE")]
    set: Vec<String>,
    /// Outbox length in bytes (default: the command's outbox layout, else 4112).
    #[arg(long)]
    out_len: Option<usize>,
    /// Print every named outbox field, zeros included.
    #[arg(short, long)]
    verbose: bool,
}

pub fn run(a: &Args) -> Result<()> {
    match &a.cmd {
        Sub::Caps(c) => caps(c),
        Sub::Cmd(c) => cmd(c),
    }
}

fn open(dev: Option<&str>) -> Result<DevxContext> {
    DevxContext::open(dev).with_context(|| format!("open {} with DevX", dev.unwrap_or("softhca0")))
}

/// The pages, in the order `mlx5_core` reads them, with the layout each is decoded by.
const PAGES: &[(&str, u16, Option<&str>)] = &[
    ("general", cap_type::GENERAL, Some("cmd_hca_cap")),
    ("roce", cap_type::ROCE, Some("roce_cap")),
    ("atomic", cap_type::ATOMIC, Some("atomic_caps")),
    ("nic_flow_table", cap_type::NIC_FLOW_TABLE, Some("flow_table_nic_cap")),
    ("general_2", cap_type::GENERAL_2, Some("cmd_hca_cap_2")),
];

/// The general page's fields most users look for (the rest with -v).
const COMMON: &[&str] = &[
    "log_max_qp", "log_max_qp_sz", "log_max_cq", "log_max_cq_sz", "log_max_eq", "log_max_eq_sz", "log_max_mkey",
    "log_max_pd", "log_max_srq", "log_max_srq_sz", "log_max_msg", "log_max_ra_req_qp", "log_max_ra_res_qp",
    "max_wqe_sz_sq", "max_wqe_sz_rq", "log_max_klm_list_size", "max_indirection", "gid_table_size", "pkey_table_size",
    "num_ports", "port_type", "cqe_version", "roce", "atomic", "rc", "ud", "uc", "xrc", "dct", "uar_4k", "uar_sz",
    "log_bf_reg_size", "bf", "log_pg_sz", "cache_line_128byte", "general_obj_types", "umem_uid_0", "max_qp_mcg",
    "log_max_mcg", "sq_ts_format", "rq_ts_format", "qp_data_in_order", "hca_cap_2", "nic_flow_table",
];

fn caps(a: &CapsArgs) -> Result<()> {
    let d = open(a.dev.as_deref())?;
    println!("{}: QUERY_HCA_CAP ({} values)", d.device().name(), if a.current { "current" } else { "maximum" });
    for (name, ty, layout) in PAGES {
        let op_mod = prm::cmd::hca_cap::op_mod(*ty, a.current);
        match d.query_hca_cap(*ty, a.current) {
            Err(e) => println!("\n{name} (op_mod {op_mod:#x}): {e}"),
            Ok(page) => {
                println!("\n{name} (op_mod {op_mod:#x}):");
                match layout {
                    Some(l) => {
                        // The general page: the common fields (zeros too: a zero there is
                        // news), -v everything; the other pages are short: all of them.
                        // The flow table page is 150 fields of six tables: its zeros only with -v.
                        let common = *name == "general" && !a.verbose;
                        let zeros = a.verbose || common || !matches!(*name, "general" | "nic_flow_table");
                        let n = print_fields(&table::flatten(l), page.bytes(),
                                             |f| !common || COMMON.contains(&f.path.as_str()), zeros);
                        if n == 0 {
                            println!("  (all zero: no capability of this page advertised)");
                        }
                    }
                    None => print_dwords(page.bytes()),
                }
            }
        }
    }
    Ok(())
}

/// Prints the fields `show` picks (zeros only when `zeros`); returns how many lines.
fn print_fields(fields: &[Flat], b: &[u8], show: impl Fn(&Flat) -> bool, zeros: bool) -> usize {
    let w = fields.iter().map(|f| f.path.len()).max().unwrap_or(0);
    let mut n = 0;
    for f in fields.iter().filter(|f| show(f)) {
        let Some(v) = table::get_bits(b, f.bit_off, f.bits) else { continue };
        if v == 0 && !zeros {
            continue;
        }
        println!("  {:<w$}  {:>10}  ({v:#x})", f.path, v);
        n += 1;
    }
    n
}

fn print_dwords(b: &[u8]) {
    let nz: Vec<(usize, u32)> = b.chunks_exact(4).enumerate()
        .map(|(i, c)| (i * 4, u32::from_be_bytes(c.try_into().unwrap())))
        .filter(|(_, v)| *v != 0)
        .collect();
    if nz.is_empty() {
        println!("  (all zero: no capability of this page advertised)");
    }
    for (off, v) in nz {
        println!("  dword at {off:#05x}  {v:#010x}");
    }
}

fn parse_num(s: &str) -> Result<u64> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        s.parse()
    };
    r.with_context(|| format!("not a number: {s:?}"))
}

fn parse_hex(s: &str) -> Result<Vec<u8>> {
    let h: String = s.chars().filter(|c| !c.is_whitespace() && *c != ':').collect();
    let h = h.strip_prefix("0x").unwrap_or(&h);
    if h.len() % 2 != 0 {
        bail!("odd number of hex digits");
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).context("bad hex byte")).collect()
}

/// Builds the inbox `doorbell devx cmd` sends.
fn build_inbox(a: &CmdArgs) -> Result<(Vec<u8>, Option<table::CmdInfo>)> {
    let opcode = match table::command_by_name(&a.opcode) {
        Some(c) => c.opcode,
        None => u16::try_from(parse_num(&a.opcode)?).context("opcodes are 16 bits")?,
    };
    let info = table::command(opcode);
    let op_mod = u16::try_from(parse_num(&a.op_mod)?).context("op_mod is 16 bits")?;
    let mut inb = match &a.inbox {
        Some(h) => parse_hex(h)?,
        None => vec![0u8; info.and_then(|c| table::bytes_of(c.inbox)).unwrap_or(prm::cmd::header::MboxIn::BYTES)],
    };
    if inb.len() < MboxIn::BYTES {
        inb.resize(MboxIn::BYTES, 0);
    }
    table::set_bits(&mut inb, MboxIn::opcode.off(), 16, opcode as u64);
    if a.inbox.is_none() || op_mod != 0 {
        table::set_bits(&mut inb, MboxIn::op_mod.off(), 16, op_mod as u64);
    }
    let fields = info.map(|c| table::flatten(c.inbox)).unwrap_or_default();
    for s in &a.set {
        let (k, v) = s.split_once('=').with_context(|| format!("--set wants FIELD=VALUE, got {s:?}"))?;
        let Some(f) = fields.iter().find(|f| f.path == k) else {
            bail!("{} has no field {k:?} (fields: {})", info.map(|c| c.inbox).unwrap_or("this command"),
                  fields.iter().map(|f| f.path.as_str()).collect::<Vec<_>>().join(", "));
        };
        let v = parse_num(v)?;
        if !table::set_bits(&mut inb, f.bit_off, f.bits, v) {
            bail!("{v:#x} does not fit in {k} ({} bits)", f.bits);
        }
    }
    Ok((inb, info))
}

fn cmd(a: &CmdArgs) -> Result<()> {
    let (inb, info) = build_inbox(a)?;
    let out_len = a.out_len.or(info.and_then(|c| table::bytes_of(c.outbox))).unwrap_or(0x1010);
    let d = open(a.dev.as_deref())?;
    let mut out = vec![0u8; out_len];
    let name = info.map(|c| c.name).unwrap_or("command");
    let r = d.general_cmd(&inb, &mut out);
    let (opcode, op_mod) = (devx::error::opcode_of(&inb), u16::from_be_bytes([inb[6], inb[7]]));
    match &r {
        // The kernel refused it: nothing reached the firmware, the outbox is untouched.
        Err(devx::Error::Os { .. }) => bail!("{name} (opcode {opcode:#06x}, op_mod {op_mod:#x}): {}", r.unwrap_err()),
        _ => {
            let status = out[0];
            let syndrome = u32::from_be_bytes(out[4..8].try_into().unwrap());
            // A software device's syndromes have names (softhca's); a ConnectX's do not.
            let sname = if d.device().is_kernel() { None } else { devx::error::softhca_syndrome_name(syndrome) };
            println!("{name} (opcode {opcode:#06x}, op_mod {op_mod:#x}): status {status:#04x} {}, syndrome {syndrome:#010x}{}",
                     prm::cmd::status::name(status).unwrap_or("(unknown status)"),
                     sname.map(|n| format!(" ({n})")).unwrap_or_default());
        }
    }
    if let Err(e) = r {
        bail!("{e}");
    }
    // QUERY_HCA_CAP's page is a union: decode it by the page op_mod asked for.
    if opcode == prm::cmd::opcode::QUERY_HCA_CAP {
        match PAGES.iter().find(|p| p.1 == op_mod >> 1) {
            Some((_, _, Some(l))) => {
                print_fields(&table::flatten(l), &out[0x10..], |_| true, a.verbose);
            }
            _ => print_dwords(&out[0x10..]),
        }
        return Ok(());
    }
    match info {
        Some(c) => {
            print_fields(&table::flatten(c.outbox), &out, |f| f.path != "status" && f.path != "syndrome", a.verbose);
        }
        None => print_dwords(&out[0x10..]),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(opcode: &str, set: &[&str]) -> CmdArgs {
        CmdArgs { dev: None, opcode: opcode.into(), op_mod: "0".into(), inbox: None,
                  set: set.iter().map(|s| s.to_string()).collect(), out_len: None, verbose: false }
    }

    #[test]
    fn inbox_from_fields() {
        // query_qp_in: opcode 0x50b @0, qpn @0x48 (24)
        let (b, info) = build_inbox(&args("QUERY_QP", &["qpn=0x123"])).unwrap();
        assert_eq!(info.unwrap().opcode, 0x50b);
        assert_eq!(b.len(), 16);
        assert_eq!(&b[..2], &[0x05, 0x0b]);
        assert_eq!(&b[8..12], &[0, 0, 0x01, 0x23]);
        assert!(build_inbox(&args("0x50b", &["nope=1"])).is_err());
        assert!(build_inbox(&args("0x50b", &["qpn=0x1000000"])).is_err(), "25 bits in a 24-bit field");
        let mut a = args("0x100", &[]);
        a.op_mod = "0x9".into();
        let (b, _) = build_inbox(&a).unwrap();
        assert_eq!(&b[..8], &[0x01, 0x00, 0, 0, 0, 0, 0, 0x09]);
    }
}
