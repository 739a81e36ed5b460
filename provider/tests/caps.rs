//! `Context::caps` and `Context::port` against stock `ibv_devinfo -v` (rdma-core's own
//! decoding of the same kernel answers) on softhca through the preload library. The
//! limits and port attributes compared come from softhca's configuration, the same for
//! every instance, so the two processes' devices (different hosts) agree on them.

#[path = "../../softhca/preload/tests/common/mod.rs"]
#[allow(dead_code)]
mod stock;

use provider::{Context, LinkLayer, Mtu, PortState};

/// `name: value` of the first line whose first field is `name:`.
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':').map(str::trim))
        .unwrap_or_else(|| panic!("no {name} in ibv_devinfo's output:\n{out}"))
}

fn num(out: &str, name: &str) -> u64 {
    let v = field(out, name);
    let v = v.split_whitespace().next().unwrap();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => v.parse().unwrap_or_else(|_| panic!("{name}: {v:?}")),
    }
}

#[test]
fn caps_and_port_match_ibv_devinfo() {
    let Some(devinfo) = stock::tool("ibv_devinfo") else { return };
    let out = stock::stock(&devinfo, &["-v", "-d", "softhca0"]).output().expect("run ibv_devinfo");
    assert!(out.status.success(), "ibv_devinfo: {}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8(out.stdout).unwrap();

    let ctx = Context::open(None).expect("embedded softhca");
    let c = ctx.caps();
    let want = |n: &str| num(&out, n);
    assert_eq!(c.max_qp as u64, want("max_qp"));
    assert_eq!(c.max_qp_wr as u64, want("max_qp_wr"));
    assert_eq!(c.max_sge as u64, want("max_sge"));
    assert_eq!(c.max_cq as u64, want("max_cq"));
    assert_eq!(c.max_cqe as u64, want("max_cqe"));
    assert_eq!(c.max_mr as u64, want("max_mr"));
    assert_eq!(c.max_mr_size, want("max_mr_size"));
    assert_eq!(c.max_pd as u64, want("max_pd"));
    assert_eq!(c.max_qp_rd_atom as u64, want("max_qp_rd_atom"));
    assert_eq!(c.max_qp_init_rd_atom as u64, want("max_qp_init_rd_atom"));
    assert_eq!(c.max_srq as u64, want("max_srq"));
    assert_eq!(c.max_srq_wr as u64, want("max_srq_wr"));
    assert_eq!(c.phys_port_cnt as u64, want("phys_port_cnt"));

    let p = ctx.port(1).unwrap();
    // "PORT_ACTIVE (4)", "4096 (5)": the number in parentheses is the enum value.
    let code = |n: &str| -> u8 { field(&out, n).rsplit_once('(').unwrap().1.trim_end_matches(')').parse().unwrap() };
    let state = match code("state") {
        1 => PortState::Down,
        2 => PortState::Init,
        3 => PortState::Armed,
        4 => PortState::Active,
        s => PortState::Other(s),
    };
    assert_eq!(p.state, state);
    assert_eq!(p.max_mtu, Mtu::from_code(code("max_mtu")));
    assert_eq!(p.active_mtu, Mtu::from_code(code("active_mtu")));
    assert_eq!(p.max_mtu.map(Mtu::bytes), field(&out, "max_mtu").split_whitespace().next().unwrap().parse().ok());
    assert_eq!(p.lid as u64, want("port_lid"));
    assert_eq!(p.gid_tbl_len as u64, want("gid_tbl_len"));
    assert_eq!(p.max_msg_sz as u64, want("max_msg_sz"));
    let ll = match field(&out, "link_layer") {
        "Ethernet" => LinkLayer::Ethernet,
        "InfiniBand" => LinkLayer::InfiniBand,
        _ => LinkLayer::Unspecified,
    };
    assert_eq!(p.link_layer, ll);
}
