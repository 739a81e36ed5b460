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

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pcap_file::pcap::PcapReader;
use softhca::wire::{BthRepr, Endpoints, Opcode, RethRepr, RocePacket};

fn skip(why: &str) {
    // Straight to stderr, past libtest's capture, so a skip is always visible.
    let _ = writeln!(std::io::stderr(), "SKIP: {why}");
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
