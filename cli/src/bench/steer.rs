//! The two ends of the steering benchmark (`cli/bench/steer.sh` runs them with a
//! `doorbell flow serve` between them):
//!
//! * `bench steer-send`: UDP/IPv4 frames as fast as one core can write them, through an
//!   AF_PACKET socket with `sendmmsg` (64 frames a call), destination ports cycling
//!   over `--ports` consecutive ports so that every installed rule is hit;
//! * `bench steer-sniff`: the kernel's own AF_PACKET receive of the same frames on the
//!   receiving interface (`recvmmsg`), counting those of the port range: the reference
//!   the steered RAW_PACKET QP is judged against.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

#[derive(clap::Args)]
pub struct SendArgs {
    /// Interface to send on.
    #[arg(long = "if")]
    ifname: String,
    /// Destination MAC (the receiving interface's).
    #[arg(long)]
    dst_mac: String,
    #[arg(long)]
    src_ip: std::net::Ipv4Addr,
    #[arg(long)]
    dst_ip: std::net::Ipv4Addr,
    /// First destination port.
    #[arg(long, default_value_t = 9000)]
    dport: u16,
    /// Destination ports dport..dport+ports, in turn.
    #[arg(long, default_value_t = 1)]
    ports: u32,
    /// UDP payload bytes (18: a 60-byte frame, the Ethernet minimum).
    #[arg(long, default_value_t = 18)]
    len: usize,
    /// Seconds to send for.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Stop after this many frames.
    #[arg(long)]
    count: Option<u64>,
    /// Pace the frames at this many per second (default: as fast as one core writes
    /// them); a test that changes rules while a stream runs needs a stream that lasts.
    #[arg(long)]
    rate: Option<f64>,
}

#[derive(clap::Args)]
pub struct SniffArgs {
    #[arg(long = "if")]
    ifname: String,
    #[arg(long, default_value_t = 9000)]
    dport: u16,
    #[arg(long, default_value_t = 1)]
    ports: u32,
    /// Seconds to count for.
    #[arg(long)]
    secs: f64,
}

fn ifindex(name: &str) -> Result<i32> {
    let c = std::ffi::CString::new(name)?;
    // SAFETY: c is a NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        bail!("no interface {name}");
    }
    Ok(i as i32)
}

/// An AF_PACKET socket bound to `ifname` for every protocol.
fn packet_socket(ifname: &str) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd as _;
    let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto) };
    if fd < 0 {
        bail!("AF_PACKET socket: {} (needs CAP_NET_RAW)", std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor this function owns.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = proto as u16;
    sa.sll_ifindex = ifindex(ifname)?;
    use std::os::fd::AsRawFd as _;
    // SAFETY: sa is a valid sockaddr_ll of the size given.
    let r = unsafe { libc::bind(fd.as_raw_fd(), &sa as *const _ as *const libc::sockaddr, std::mem::size_of_val(&sa) as u32) };
    if r < 0 {
        bail!("bind to {ifname}: {}", std::io::Error::last_os_error());
    }
    Ok(fd)
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// One Ethernet/IPv4/UDP frame (UDP checksum 0: none, which IPv4 allows).
pub fn udp_frame(dst: [u8; 6], src: [u8; 6], sip: std::net::Ipv4Addr, dip: std::net::Ipv4Addr, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let tot = (20 + 8 + len) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&sip.octets());
    ip[16..20].copy_from_slice(&dip.octets());
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + len) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..len).map(|i| i as u8));
    f
}

fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let v: Vec<u8> = s.split(':').map(|p| u8::from_str_radix(p, 16)).collect::<Result<_, _>>().context("MAC")?;
    v.try_into().map_err(|_| anyhow::anyhow!("a MAC is six bytes: {s}"))
}

fn if_mac(name: &str) -> Result<[u8; 6]> {
    parse_mac(std::fs::read_to_string(format!("/sys/class/net/{name}/address"))?.trim())
}

pub fn send(a: &SendArgs) -> Result<()> {
    use std::os::fd::AsRawFd as _;
    let fd = packet_socket(&a.ifname)?;
    let (dst, src) = (parse_mac(&a.dst_mac)?, if_mac(&a.ifname)?);
    let frames: Vec<Vec<u8>> = (0..a.ports.max(1))
        .map(|i| udp_frame(dst, src, a.src_ip, a.dst_ip, 40000, a.dport.wrapping_add(i as u16), a.len))
        .collect();
    const BATCH: usize = 64;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.secs);
    let limit = a.count.unwrap_or(u64::MAX);
    let (mut sent, mut next, mut full) = (0u64, 0usize, 0u64);
    let batch = if a.rate.is_some() { 8 } else { BATCH };
    while sent < limit && Instant::now() < end {
        if let Some(rate) = a.rate {
            // Frame `sent` is due at start + sent / rate: sleep until then.
            let due = start + Duration::from_secs_f64(sent as f64 / rate.max(1.0));
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let n = batch.min((limit - sent) as usize);
        let mut iov: Vec<libc::iovec> = (0..n)
            .map(|k| {
                let f = &frames[(next + k) % frames.len()];
                libc::iovec { iov_base: f.as_ptr() as *mut _, iov_len: f.len() }
            })
            .collect();
        // SAFETY: mmsghdr is plain data; zero is valid before the fields are set.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs points at n headers whose iovecs point into `frames`, all alive
        // for the call; the socket is bound, so no address is needed.
        let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as u32, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOBUFS) || e.raw_os_error() == Some(libc::EAGAIN) {
                full += 1;
                std::thread::yield_now();
                continue;
            }
            bail!("sendmmsg: {e}");
        }
        sent += r as u64;
        next = (next + r as usize) % frames.len();
    }
    let dt = start.elapsed().as_secs_f64();
    println!("sent {sent} frames in {dt:.3} s ({:.0} frames/s; {} full-queue retries)", sent as f64 / dt, full);
    Ok(())
}

pub fn sniff(a: &SniffArgs) -> Result<()> {
    use std::os::fd::AsRawFd as _;
    let fd = packet_socket(&a.ifname)?;
    // A 1 ms receive timeout so the deadline is checked while the wire is quiet.
    let tv = libc::timeval { tv_sec: 0, tv_usec: 1000 };
    // SAFETY: tv is a valid timeval of the size given.
    unsafe {
        libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv as *const _ as *const _, std::mem::size_of_val(&tv) as u32);
    }
    let buf_size = 8 << 20;
    // SAFETY: an int option of the size given.
    unsafe {
        libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &buf_size as *const i32 as *const _, 4);
    }
    const BATCH: usize = 64;
    let mut bufs = vec![[0u8; 128]; BATCH];
    let (lo, hi) = (u32::from(a.dport), u32::from(a.dport) + a.ports);
    let end = Instant::now() + Duration::from_secs_f64(a.secs);
    let (mut matched, mut all) = (0u64, 0u64);
    let (mut first, mut last) = (None, None);
    println!("READY");
    while Instant::now() < end {
        let mut iov: Vec<libc::iovec> = bufs.iter_mut().map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut _, iov_len: b.len() }).collect();
        // SAFETY: as in send.
        let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: BATCH headers with iovecs into `bufs`, alive for the call; frames are
        // truncated to 128 bytes (MSG_TRUNC not asked), enough for the headers read below.
        let r = unsafe { libc::recvmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, 0, std::ptr::null_mut()) };
        if r <= 0 {
            continue;
        }
        let now = Instant::now();
        for b in &bufs[..r as usize] {
            all += 1;
            let udp = b[12..14] == [0x08, 0x00] && b[23] == 17;
            let dport = u32::from(u16::from_be_bytes([b[36], b[37]]));
            if udp && (lo..hi).contains(&dport) {
                matched += 1;
                first.get_or_insert(now);
                last = Some(now);
            }
        }
    }
    let span = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f).as_secs_f64(),
        _ => 0.0,
    };
    println!("received {matched} frames of the port range ({all} in all), first to last {span:.3} s");
    Ok(())
}

#[derive(clap::Args)]
pub struct ClassifyArgs {
    /// Rule counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,100,10000")]
    rules: Vec<u32>,
    /// Frames classified per rule count.
    #[arg(long, default_value_t = 2_000_000)]
    frames: u64,
    /// Frames hit only this many of the rules (default: all of them), to tell the
    /// lookup's cost from the cache misses of touching many entries.
    #[arg(long)]
    hot: Option<u32>,
}

/// softhca's steering engine alone, in this process, no wire: N exact-match rules
/// (`ipv4.dst udp.dport`, one group, as steer.sh installs them through DevX) and the
/// time `Steering::classify` takes per frame (parse + lookup + counter), frames cycling
/// over the N ports so every rule is hit. The cost of the lookup should not grow with N.
pub fn classify(a: &ClassifyArgs) -> Result<()> {
    use devx::flow::Match;
    use softhca::device::steer::{Action, Dest, Key, Miss, Steering, Verdict};
    let (sip, dip) = ("10.0.0.2".parse()?, "10.0.0.1".parse()?);
    println!("| rules  | rules hit | ns/frame | frames/s (one core) |");
    println!("|-------:|----------:|---------:|--------------------:|");
    for &n in &a.rules {
        let st = Steering::new();
        let t = st.create_table(0, 0, 20, Miss::Default).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let m0 = Match::new().dst_ip(std::net::IpAddr::V4(dip)).udp_dport(9000);
        let g = st.create_group(t, 0, (1 << 20) - 1, Key::from_bytes(&m0.mask()).expect("a set")).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let c = st.alloc_counter();
        for i in 0..n {
            let m = Match::new().dst_ip(std::net::IpAddr::V4(dip)).udp_dport(9000 + i as u16);
            let act = Action { dests: vec![Dest::Tir(1)], counters: vec![c], ..Default::default() };
            st.set_entry(t, i, Some(g), Key::from_bytes(&m.value()).expect("a set"), act, false).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }
        let hot = a.hot.unwrap_or(n).clamp(1, n);
        let frames: Vec<Vec<u8>> = (0..hot.min(4096)).map(|i| {
            // Spread over the `hot` ports even when only 4096 frames are kept.
            let p = (u64::from(i) * u64::from(hot) / u64::from(hot.min(4096))) as u16;
            udp_frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], sip, dip, 40000, 9000 + p, 18)
        }).collect();
        let t0 = Instant::now();
        let mut hits = 0u64;
        for k in 0..a.frames {
            if let Verdict::Deliver { .. } = st.classify(0, &frames[k as usize % frames.len()]) {
                hits += 1;
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        if hits != a.frames {
            bail!("{n} rules: only {hits} of {} frames matched", a.frames);
        }
        println!("| {n:>6} | {hot:>9} | {:>8.1} | {:>19.0} |", dt * 1e9 / a.frames as f64, a.frames as f64 / dt);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn udp_frame_is_scapys() {
        // scapy 2.8: Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02") /
        // IP(src="10.0.0.2", dst="10.0.0.1", flags="DF", ttl=64, id=0) /
        // UDP(sport=40000, dport=9000, chksum=0) / Raw(bytes(range(18)))
        let want = "02000000000102000000000208004500002e00004000401126bd0a0000020a0000019c402328001a0000\
                    000102030405060708090a0b0c0d0e0f1011";
        let f = super::udp_frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], "10.0.0.2".parse().unwrap(),
                                 "10.0.0.1".parse().unwrap(), 40000, 9000, 18);
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want);
        assert_eq!(f.len(), 60, "the Ethernet minimum without FCS");
    }
}
