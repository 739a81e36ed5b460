//! `doorbell devx caps` and `doorbell devx cmd` as a user runs them: the capability
//! page agrees with what `doorbell devinfo -v` (the verbs QUERY_DEVICE of the same
//! device) says, a raw command's outbox is decoded, and the two ways a command fails
//! are told apart: the firmware's status (by its PRM name) and the kernel's errno.

use std::process::{Command, Output};

/// `doorbell ARGS` on its own softhca instance at a free 127.232.x.y address.
fn doorbell(args: &[&str]) -> Output {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut x = std::process::id() ^ nanos;
    let addr = loop {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let ip = std::net::Ipv4Addr::new(127, 232, (x >> 8) as u8, (x as u8).clamp(1, 254));
        if std::net::UdpSocket::bind((ip, 4791)).is_ok() {
            break ip.to_string();
        }
    };
    Command::new(env!("CARGO_BIN_EXE_doorbell")).args(args).env("DOORBELL_SOFTHCA_ADDR", addr)
        .env_remove("DOORBELL_DEVICE").env_remove("RUST_LOG").output().expect("run doorbell")
}

fn field(out: &str, name: &str) -> u64 {
    out.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some(name)).then(|| w.next().unwrap().parse().unwrap())
    }).unwrap_or_else(|| panic!("no {name} in\n{out}"))
}

#[test]
fn caps_agree_with_devinfo() {
    let caps = doorbell(&["devx", "caps"]);
    assert!(caps.status.success(), "{}", String::from_utf8_lossy(&caps.stderr));
    let caps = String::from_utf8(caps.stdout).unwrap();
    let dev = String::from_utf8(doorbell(&["devinfo", "-v"]).stdout).unwrap();
    let attr = |name: &str| -> u64 {
        dev.lines().find_map(|l| l.trim().strip_prefix(&format!("{name}:")).map(|v| v.trim().parse().unwrap()))
            .unwrap_or_else(|| panic!("no {name} in devinfo"))
    };
    // mlx5_ib_query_device: max_qp = 1 << log_max_qp, max_qp_wr = 1 << log_max_qp_sz,
    // max_cqe = (1 << log_max_cq_sz) - 1, max_qp_rd_atom = 1 << log_max_ra_res_qp.
    assert_eq!(1 << field(&caps, "log_max_qp"), attr("max_qp"));
    assert_eq!(1 << field(&caps, "log_max_qp_sz"), attr("max_qp_wr"));
    assert_eq!((1 << field(&caps, "log_max_cq_sz")) - 1, attr("max_cqe"));
    assert_eq!(1 << field(&caps, "log_max_ra_res_qp"), attr("max_qp_rd_atom"));
    assert_eq!(field(&caps, "num_ports"), attr("phys_port_cnt"));
    // softhca has NIC RX flow tables (docs/steering.md) and no software steering:
    // the NIC flow table page's receive table says so.
    let v = String::from_utf8(doorbell(&["devx", "caps", "-v"]).stdout).unwrap();
    assert_eq!(field(&v, "flow_table_properties_nic_receive.ft_support"), 1);
    assert_eq!(field(&v, "flow_table_properties_nic_receive.sw_owner"), 0);
    assert_eq!(field(&caps, "nic_flow_table"), 1);
    for page in ["general (op_mod 0x0):", "roce (op_mod 0x8):", "atomic (op_mod 0x6):", "nic_flow_table (op_mod 0xe):",
                 "general_2 (op_mod 0x40):"] {
        assert!(caps.contains(page), "{page} missing:\n{caps}");
    }
}

#[test]
fn raw_commands_and_their_two_kinds_of_failure() {
    // The atomic page (type 3 << 1): atomic_operations = CAS | FA (3), atomic_size_qp = 8 bytes.
    let ok = doorbell(&["devx", "cmd", "--opcode", "QUERY_HCA_CAP", "--op-mod", "0x6"]);
    let out = String::from_utf8(ok.stdout).unwrap();
    assert!(ok.status.success() && out.starts_with("QUERY_HCA_CAP (opcode 0x0100, op_mod 0x6): status 0x00 OK"), "{out}");
    assert_eq!(field(&out, "atomic_operations"), 3);
    assert_eq!(field(&out, "atomic_size_qp"), 8);

    // A page that does not exist: the firmware answers (PRM status by name, syndrome).
    let bad = doorbell(&["devx", "cmd", "--opcode", "0x100", "--op-mod", "0xfe"]);
    let (out, err) = (String::from_utf8_lossy(&bad.stdout), String::from_utf8_lossy(&bad.stderr));
    assert!(!bad.status.success() && out.contains("status 0x03 BAD_PARAM_ERR, syndrome 0x03000001 (BAD_OP_MOD)") && err.contains("BAD_PARAM_ERR"), "{out}\n{err}");

    // An opcode DevX does not let through as a general command: the kernel's EINVAL,
    // and no made-up status line.
    let refused = doorbell(&["devx", "cmd", "--opcode", "0x7ff"]);
    let (out, err) = (String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
    assert!(!refused.status.success() && out.is_empty() && err.contains("EINVAL"), "{out}\n{err}");

    // --set names a field of the command's inbox layout; a wrong name is refused here.
    let typo = doorbell(&["devx", "cmd", "--opcode", "QUERY_HCA_CAP", "--set", "op_mood=1"]);
    assert!(!typo.status.success() && String::from_utf8_lossy(&typo.stderr).contains("no field \"op_mood\""));
}
