//! Checks the assumption the ICRC rests on against the running kernel: softhca never sees the
//! IP header of its datagrams, so `wire::icrc` rebuilds the one Linux emits for an unconnected
//! UDP socket with `IP_MTU_DISCOVER = IP_PMTUDISC_DO` (IPv4: identification 0, DF set, no
//! options). This test sends real softhca packets through such a socket on `lo`, captures
//! them with dumpcap, and recomputes each ICRC from the *captured* headers with a separate,
//! minimal implementation written here. If the kernel ever filled those headers differently,
//! the captured-header ICRC would no longer match the one softhca appended.
//!
//! Skips, saying so, when dumpcap is missing or may not capture (needs root or
//! CAP_NET_RAW), or when the loopback address is unavailable.
//!
//! Also: softhca's own capture (`DOORBELL_PCAP`) holds every packet the instance sent
//! and received once the process has exited, even when the instance was never dropped.

mod common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use pcap_file::pcap::PcapReader;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp};
use softhca::wire::{BthRepr, Endpoints, Opcode, RethRepr, RocePacket};

fn skip(why: &str) {
    // dumpcap, its capture rights (root or CAP_NET_RAW) or a loopback address.
    testkit::skip(testkit::Need::Tool, why);
}

/// What softhca's port does to its socket (see wire::icrc's module doc).
fn set_pmtudisc_do(sock: &UdpSocket, v6: bool) {
    let (level, name, value) = if v6 {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
    };
    // SAFETY: the fd is a live socket owned by `sock` for the duration of the call, and the
    // option value points at a c_int that outlives the call, with its exact size passed.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// An ICRC computed from the real IP/UDP headers of a captured frame (not from a rebuilt
/// header): mask the variant fields in place and CRC the lot.
fn icrc_from_captured(ip_and_rest: &[u8], v6: bool) -> u32 {
    let mut b = ip_and_rest.to_vec();
    let ip_len = if v6 {
        b[0] |= 0x0f; // traffic class (high nibble here) ...
        b[1] = 0xff; // ... and flow label
        b[2] = 0xff;
        b[3] = 0xff;
        b[7] = 0xff; // hop limit
        40
    } else {
        let ihl = usize::from(b[0] & 0x0f) * 4;
        b[1] = 0xff; // TOS
        b[8] = 0xff; // TTL
        b[10] = 0xff; // header checksum
        b[11] = 0xff;
        ihl
    };
    b[ip_len + 6] = 0xff; // UDP checksum
    b[ip_len + 7] = 0xff;
    b[ip_len + 8 + 4] = 0xff; // BTH FECN/BECN/Resv6a
    let end = b.len() - 4;
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    h.update(&b[..end]);
    h.finalize()
}

/// Sends packets from `src` to `dst` until dumpcap has captured `count` of them; returns
/// the captured Ethernet frames, or why it could not.
fn send_and_capture(src: IpAddr, dst: IpAddr, count: usize) -> Result<Vec<Vec<u8>>, String> {
    let v6 = src.is_ipv6();
    let sock = UdpSocket::bind(SocketAddr::new(src, 0)).map_err(|e| format!("bind {src}: {e}"))?;
    set_pmtudisc_do(&sock, v6);
    let src = sock.local_addr().unwrap();
    let dst = SocketAddr::new(dst, 4791);
    let ep = Endpoints::new(src, dst);

    let path = std::env::temp_dir().join(format!(
        "softhca-capture-{}-{}.pcap",
        std::process::id(),
        src.port()
    ));
    let filter = format!(
        "udp and src port {} and dst port 4791 and {} src host {} and dst host {}",
        src.port(),
        if v6 { "ip6" } else { "ip" },
        src.ip(),
        dst.ip()
    );
    let mut dumpcap = Command::new("dumpcap")
        .args([
            "-i",
            "lo",
            "-q",
            "-P",
            "-c",
            &count.to_string(),
            "-a",
            "duration:15",
        ])
        .args(["-f", &filter, "-w"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("dumpcap not runnable: {e} (apt-get install tshark)"))?;

    let payload: Vec<u8> = (0..37u8).collect();
    let deadline = Instant::now() + Duration::from_secs(12);
    let mut psn = 0u32;
    let status = loop {
        if let Some(status) = dumpcap.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = dumpcap.kill();
            let _ = dumpcap.wait();
            let _ = std::fs::remove_file(&path);
            return Err("dumpcap captured nothing within 12 s".into());
        }
        let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcRdmaWriteOnly, 0x12, psn), &payload);
        pkt.reth = Some(RethRepr {
            va: 0x1000,
            rkey: 0x77,
            dma_len: 37,
        });
        sock.send_to(&pkt.to_vec(&ep).unwrap(), dst)
            .map_err(|e| format!("send_to {dst}: {e}"))?;
        psn += 1;
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = dumpcap.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    if !status.success() {
        let _ = std::fs::remove_file(&path);
        return Err(format!(
            "dumpcap cannot capture on lo ({status}): {}",
            err.trim()
        ));
    }
    let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
    let mut reader = PcapReader::new(file).map_err(|e| e.to_string())?;
    let mut frames = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        frames.push(pkt.map_err(|e| e.to_string())?.data.into_owned());
    }
    let _ = std::fs::remove_file(&path);
    Ok(frames)
}

fn check_frames(frames: &[Vec<u8>], v6: bool) {
    assert!(!frames.is_empty());
    for f in frames {
        // `lo` captures carry a 14-byte Ethernet header with zero MACs.
        let ethertype = u16::from_be_bytes([f[12], f[13]]);
        let ip = &f[14..];
        let (ip_len, src, dst) = if v6 {
            assert_eq!(ethertype, 0x86dd);
            assert_eq!(ip[0] >> 4, 6);
            assert_eq!(ip[6], 17, "next header UDP, no extension headers");
            let a: [u8; 16] = ip[8..24].try_into().unwrap();
            let b: [u8; 16] = ip[24..40].try_into().unwrap();
            (
                40,
                IpAddr::from(Ipv6Addr::from(a)),
                IpAddr::from(Ipv6Addr::from(b)),
            )
        } else {
            assert_eq!(ethertype, 0x0800);
            // The fields the reconstruction assumes, as the kernel actually set them.
            assert_eq!(ip[0], 0x45, "IPv4 without options");
            assert_eq!(&ip[4..6], &[0, 0], "identification 0");
            assert_eq!(&ip[6..8], &[0x40, 0x00], "DF, fragment offset 0");
            assert_eq!(ip[9], 17);
            let a: [u8; 4] = ip[12..16].try_into().unwrap();
            let b: [u8; 4] = ip[16..20].try_into().unwrap();
            (
                20,
                IpAddr::from(Ipv4Addr::from(a)),
                IpAddr::from(Ipv4Addr::from(b)),
            )
        };
        let udp = &ip[ip_len..ip_len + 8];
        let roce = &ip[ip_len + 8..];
        let carried = u32::from_le_bytes(roce[roce.len() - 4..].try_into().unwrap());
        assert_eq!(
            icrc_from_captured(ip, v6),
            carried,
            "ICRC over the kernel's real headers differs from softhca's"
        );
        let ep = Endpoints::new(
            SocketAddr::new(src, u16::from_be_bytes([udp[0], udp[1]])),
            SocketAddr::new(dst, u16::from_be_bytes([udp[2], udp[3]])),
        );
        let parsed = RocePacket::parse(roce, &ep).expect("captured packet parses, ICRC good");
        assert_eq!(parsed.bth.opcode, Opcode::RcRdmaWriteOnly);
        assert_eq!(parsed.payload.len(), 37);
    }
}

#[test]
fn kernel_ipv4_header_matches_the_icrc_reconstruction() {
    let (a, b) = (Ipv4Addr::new(127, 0, 0, 201), Ipv4Addr::new(127, 0, 0, 202));
    match send_and_capture(a.into(), b.into(), 3) {
        Ok(frames) => check_frames(&frames, false),
        Err(why) => skip(&format!("IPv4 capture check not run: {why}")),
    }
}

#[test]
fn kernel_ipv6_header_matches_the_icrc_reconstruction() {
    if UdpSocket::bind("[::1]:0").is_err() {
        skip("IPv6 capture check not run: ::1 unavailable");
        return;
    }
    match send_and_capture(Ipv6Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into(), 2) {
        Ok(frames) => check_frames(&frames, true),
        Err(why) => skip(&format!("IPv6 capture check not run: {why}")),
    }
}

/// Where `pcap_file_is_complete_at_exit` runs its child.
const PCAP_CHILD: &str = "DOORBELL_PCAP_CHILD";

/// The child: two capturing instances that are never dropped (like a program's default
/// instance, a static), some traffic, the packet counts on stdout, and an exit right
/// after the last completion.
fn pcap_child(dir: &Path) {
    // The timed fallback keeps an engine stepping for 2 ms after its last packet before
    // it sleeps (and flushes its capture): longer than this process takes to exit.
    let mk = |hint| Host::at(hint, |c| {
        c.pcap = Some(dir.join("cap-{addr}.pcap"));
        c.doorbell_trap = false;
    });
    let (a, b) = (mk([127, 1, 6, 1]), mk([127, 1, 6, 2]));
    let o = Opts { mtu: 1, ..Default::default() };
    let (mut ea, eb) = connect(&a, &b, &o);
    let src = a.mem(4096, all_access());
    let dst = b.mem(4096, all_access());
    src.buf.fill_pattern(3);
    for i in 0..40u64 {
        let len = 1 + (i as usize * 397) % 4000;
        let op = if i % 2 == 0 {
            SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }
        } else {
            SendOp::RdmaRead { raddr: dst.addr(), rkey: dst.mr.rkey() }
        };
        ea.qp.post_send(i, &signaled(op, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    }
    // Every packet sent has arrived and is counted ...
    let start = Instant::now();
    loop {
        let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
        if ca.tx_packets == cb.rx_packets && cb.tx_packets == ca.rx_packets {
            break;
        }
        assert!(start.elapsed() < WAIT, "packets still in flight: {ca:?} {cb:?}");
        std::thread::yield_now();
    }
    // ... and the engine steps that counted (and captured) them are over: a
    // deregistration waits for the engine lock.
    drop((src, dst));
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    println!("PCAP {} {} {} {}", a.addr(), ca.tx_packets + ca.rx_packets, b.addr(), cb.tx_packets + cb.rx_packets);
    std::io::stdout().flush().unwrap();
    std::mem::forget((ea, eb, a, b));
}

/// `DOORBELL_PCAP` in a process that exits normally right after its last packets: the
/// file holds every packet the device counted, sent and received. (The capture used to
/// be flushed only when the engine slept or stopped, and a never-dropped instance lost
/// its last packets at exit.)
#[test]
fn pcap_file_is_complete_at_exit() {
    if let Some(dir) = std::env::var_os(PCAP_CHILD) {
        return pcap_child(Path::new(&dir));
    }
    let dir = std::env::temp_dir().join(format!("softhca-pcap-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "pcap_file_is_complete_at_exit", "--nocapture", "--test-threads", "1"])
        .env(PCAP_CHILD, &dir)
        .env_remove("DOORBELL_FAULT")
        .output()
        .expect("spawn the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find_map(|l| l.find("PCAP ").map(|i| &l[i + 5..])).expect("the child's counts");
    let f: Vec<&str> = line.split_whitespace().collect();
    for host in f.chunks(2) {
        let (addr, counted): (&str, usize) = (host[0], host[1].parse().unwrap());
        let frames = captured(&dir.join(format!("cap-{addr}.pcap")));
        assert!(counted > 80, "{addr}: {counted} packets");
        assert_eq!(frames.len(), counted, "{addr}: packets in the capture vs. sent + received");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
