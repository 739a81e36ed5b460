//! The faked sysfs as programs that read `/sys` themselves see it (UCX's device and
//! topology code, pyverbs' tests, scripts), not through libibverbs' `SYSFS_PATH`:
//! `tests/c/sysfs_read.c` lists `/sys/class/infiniband` and `/sys/class/infiniband_verbs`,
//! reads attributes with open/read and fopen, stats, readlinks and realpaths the device
//! links, all by their real `/sys` paths, under libdoorbell_preload.so. The expected
//! values are the kernel's formats (drivers/infiniband/core/sysfs.c, drivers/pci/
//! pci-sysfs.c, the uverbs char device 231:192) and what libibverbs itself reports.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn build() -> Option<PathBuf> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/sysfs_read.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sysfs_read");
    testkit::cc(&src, [
        src.as_os_str(), "-o".as_ref(), exe.as_os_str(), "-Wall".as_ref(), "-Wextra".as_ref(), "-Werror".as_ref(),
        "-O1".as_ref(), "-libverbs".as_ref(),
    ])?;
    Some(exe)
}

/// A PCI function's name as the kernel gives it: `dddd:bb:dd.f`, lower-case hex.
fn is_pci_function(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.' && hex(0..4) && hex(5..7) && hex(8..10)
        && (b'0'..=b'7').contains(&b[11])
}

/// A cpulist as the kernel prints one (`%*pbl`): ranges `a` or `a-b`, comma-separated.
fn is_cpulist(s: &str) -> bool {
    !s.is_empty() && s.split(',').all(|r| {
        let mut it = r.splitn(2, '-');
        it.all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
    })
}

/// A cpumask of every online CPU as this machine's kernel prints it: the `local_cpus` of
/// a real PCI function whose `numa_node` is -1 (`cpumask_of_pcibus` is then the online
/// CPUs), or else the `cpumap` of the only NUMA node.
fn kernel_mask() -> Option<(String, String)> {
    let read = |p: &Path| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let online = read(Path::new("/sys/devices/system/cpu/online"))?;
    for e in std::fs::read_dir("/sys/bus/pci/devices").ok()?.flatten() {
        if read(&e.path().join("numa_node")).as_deref() == Some("-1") && read(&e.path().join("local_cpulist")).as_deref() == Some(online.as_str()) {
            if let Some(m) = read(&e.path().join("local_cpus")) {
                return Some((e.path().display().to_string(), m));
            }
        }
    }
    let nodes: Vec<_> = std::fs::read_dir("/sys/devices/system/node").ok()?.flatten()
        .filter(|e| e.file_name().to_string_lossy().strip_prefix("node").is_some_and(|n| n.parse::<u32>().is_ok())).collect();
    match nodes.as_slice() {
        [n] if read(&n.path().join("cpulist")).as_deref() == Some(online.as_str()) => {
            Some((n.path().display().to_string(), read(&n.path().join("cpumap"))?))
        }
        _ => None,
    }
}

#[test]
fn programs_reading_sys_directly_see_a_connectx() {
    let Some(exe) = build() else { return };
    let done = common::spawn(common::stock(&exe, &[]), "sysfs_read").wait_until(Instant::now() + Duration::from_secs(60));
    let report = done.report();
    assert!(done.ok(), "{report}");
    // "<KEY> <path> <value>" lines, by "<KEY> <path>".
    let mut facts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in done.stdout.lines() {
        let mut f = l.splitn(3, ' ');
        let (k, a, v) = (f.next().unwrap_or(""), f.next().unwrap_or(""), f.next().unwrap_or(""));
        facts.entry(format!("{k} {a}")).or_default().push(v.to_string());
    }
    let one = |key: &str| -> String {
        match facts.get(key).map(|v| v.as_slice()) {
            Some([v]) => v.clone(),
            other => panic!("{key}: {other:?}\n{report}"),
        }
    };
    let ib = "/sys/class/infiniband";
    let dev = format!("{ib}/softhca0");
    let uv = "/sys/class/infiniband_verbs";

    // The listings: one device, its uverbs node, the ABI file.
    assert_eq!(facts.get(&format!("LIST {ib}")), Some(&vec!["softhca0".to_string()]), "{report}");
    let mut verbs = facts.get(&format!("LIST {uv}")).cloned().unwrap_or_default();
    verbs.sort();
    assert_eq!(verbs, ["abi_version", "uverbs0"], "{report}");

    // The kernel's layout: class entries are links into the PCI function's directory,
    // whose device links point back at it.
    assert_eq!(one(&format!("LSTAT {dev}")), "link");
    assert_eq!(one(&format!("STAT {dev}")), "dir");
    assert_eq!(one(&format!("LSTAT {dev}/device")), "link");
    assert_eq!(one(&format!("STAT {dev}/device")), "dir");
    let to_dev = one(&format!("LINK {dev}"));
    let parts: Vec<&str> = to_dev.split('/').collect();
    assert!(matches!(parts.as_slice(), ["..", "..", "devices", bus, f, "infiniband", "softhca0"]
                     if bus.starts_with("pci") && is_pci_function(f)), "class link {to_dev}");
    let func = parts[4];
    assert_eq!(one(&format!("LINK {dev}/device")), format!("../../../{func}"));
    assert_eq!(one(&format!("LINK {uv}/uverbs0/device")), format!("../../../{func}"));
    // realpath gives a /sys path, and the function's files are readable by it.
    let real = one(&format!("REAL {dev}/device"));
    assert_eq!(real, format!("/sys/devices/{}/{func}", parts[3]), "{report}");
    assert_eq!(one(&format!("FILE {real}/vendor")), "0x15b3");

    // uverbs: ABI 6, driver ABI 1 (libmlx5), the char device's number.
    assert_eq!(one(&format!("FILE {uv}/abi_version")), "6");
    assert_eq!(one(&format!("FILE {uv}/uverbs0/ibdev")), "softhca0");
    assert_eq!(one(&format!("FILE {uv}/uverbs0/dev")), "231:192");
    assert_eq!(one(&format!("FILE {uv}/uverbs0/abi_version")), "1");

    // ib_core's attributes ("%d: %s" node type, port state, link layer).
    assert_eq!(one(&format!("FILE {dev}/node_type")), "1: CA");
    assert_eq!(one(&format!("FOPEN {dev}/node_type")), "1: CA");
    assert_eq!(one(&format!("FILE {dev}/ports/1/state")), "4: ACTIVE");
    assert_eq!(one(&format!("FILE {dev}/ports/1/link_layer")), "Ethernet");

    // pci-sysfs: "0x%04x" ids, "0x%06x" class, "%d" node, a cpulist; a ConnectX-5.
    assert_eq!(one(&format!("FILE {dev}/device/vendor")), "0x15b3");
    assert_eq!(one(&format!("FILE {dev}/device/device")), "0x1017");
    assert_eq!(one(&format!("FILE {dev}/device/subsystem_vendor")), "0x15b3");
    assert_eq!(one(&format!("FILE {dev}/device/class")), "0x020000");
    let node: i32 = one(&format!("FILE {dev}/device/numa_node")).parse().expect("numa_node is a number");
    assert!(node >= -1);
    let cpus = one(&format!("FILE {dev}/device/local_cpulist"));
    assert!(is_cpulist(&cpus), "local_cpulist {cpus:?}");
    if let Ok(online) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        assert_eq!(cpus, online.trim(), "a function without a NUMA node is local to every online CPU");
    }
    // local_cpus is the same set as a cpumask ("%*pb"): compared with what this kernel
    // prints for a real PCI function without a NUMA node, or for the only NUMA node.
    let mask = one(&format!("FILE {dev}/device/local_cpus"));
    match kernel_mask() {
        Some((from, m)) => assert_eq!(mask, m, "local_cpus as {from} prints it"),
        None => testkit::skip(testkit::Need::Kernel, "no real PCI function without a NUMA node and no single NUMA node to compare local_cpus with"),
    }

    // device/net names a real interface (the one the instance's address is on).
    let names: Vec<&str> = facts.keys().filter_map(|k| k.strip_prefix("NET ")).collect();
    assert!(matches!(names.as_slice(), [n] if *n != "ERR"), "one netdev under device/net: {names:?}\n{report}");
    assert!(Path::new("/sys/class/net").join(names[0]).exists(), "{} is a real interface", names[0]);

    // The GID table: each populated row's type in ib_cache's words, the same as
    // libibverbs reports for that index; the RoCE v2 GIDs rc_pair.h uses (index 3) exist.
    let gids: usize = facts.keys().find_map(|k| k.strip_prefix("GIDS ")).and_then(|n| n.parse().ok()).expect("GIDS count");
    assert!(gids >= 4, "{report}");
    let mut v2 = 0;
    for i in 0..gids {
        let sys = facts.get(&format!("GIDTYPE {i}")).map(|v| v[0].clone());
        let verbs = facts.get(&format!("VERBS_GIDTYPE {i}")).map(|v| v[0].clone());
        match (sys.as_deref(), verbs.as_deref()) {
            (Some("RoCE v2"), Some("v2")) => v2 += 1,
            (Some("IB/RoCE v1"), Some("v1")) | (None, None) => {}
            other => panic!("GID {i}: sysfs and libibverbs disagree: {other:?}\n{report}"),
        }
    }
    assert!(v2 >= 1 && facts.get("GIDTYPE 3").is_some_and(|v| v[0] == "RoCE v2"), "{report}");
    eprint!("{}", done.stdout);
}
