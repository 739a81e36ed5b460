//! perftest's output: the header block (test name, device, QPs, link, MTU, inline,
//! local and remote addresses) and the result tables, bandwidth
//! (`#bytes #iterations BW peak BW average MsgRate`) and latency (`t_min t_max t_typical
//! t_avg t_stdev 99% 99.9%`). MB is 2^20 bytes, as in perftest; `--report_gbits` gives
//! 10^9 bits.

use std::fmt::Write as _;

use super::oob::QpInfo;
use super::opts::{AtomicType, Params, Test, Verb};
use super::resources::Res;

pub const DASHES: &str = "---------------------------------------------------------------------------------------";

fn title(p: &Params) -> String {
    match p.test {
        Test::WriteBw => "RDMA_Write BW Test".into(),
        Test::WriteLat => "RDMA_Write Latency Test".into(),
        Test::ReadBw => "RDMA_Read BW Test".into(),
        Test::ReadLat => "RDMA_Read Latency Test".into(),
        Test::SendBw => "Send BW Test".into(),
        Test::SendLat => "Send Latency Test".into(),
        Test::AtomicBw => match p.atomic {
            AtomicType::FetchAndAdd => "Atomic FETCH_AND_ADD BW Test".into(),
            AtomicType::CmpAndSwap => "Atomic CMP_AND_SWAP BW Test".into(),
        },
    }
}

/// C's `%#0Nx`: zero-padded to `width` characters including a `0x` prefix, which is
/// left out for zero.
fn hexw(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0w$}", 0, w = width)
    } else {
        format!("{:#0w$x}", v, w = width)
    }
}

fn gid_line(gid: &[u8; 16]) -> String {
    let parts: Vec<String> = gid.iter().map(|b| format!("{b:02}")).collect();
    format!(" GID: {}", parts.join(":"))
}

fn address(o: &mut String, who: &str, q: &QpInfo, p: &Params, rd: u8) {
    let out = if matches!(p.test.verb(), Verb::Read | Verb::Atomic) { format!(" OUT {}", hexw(rd as u64, 4)) } else { String::new() };
    let _ = writeln!(
        o,
        " {who} address: LID {} QPN {} PSN {}{out} RKey {} VAddr {}",
        hexw(q.lid as u64, 4),
        hexw(q.qpn as u64, 6),
        hexw(q.psn as u64, 6),
        hexw(q.rkey as u64, 8),
        hexw(q.dst, 16)
    );
    let _ = writeln!(o, "{}", gid_line(&q.gid));
}

/// The block printed before the table.
pub fn header(p: &Params, res: &Res, mtu: u8, local: &[QpInfo], remote: &[QpInfo]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{DASHES}");
    let _ = writeln!(o, "{:>20}{}", "", title(p));
    let _ = writeln!(o, " Dual-port       : OFF\t\tDevice         : {}", res.ctx.name());
    let _ = writeln!(o, " Number of qps   : {}\t\tTransport type : IB", p.qps);
    let _ = writeln!(o, " Connection type : RC\t\tUsing SRQ      : OFF");
    let _ = writeln!(o, " PCIe relax order: OFF");
    let _ = writeln!(o, " ibv_wr* API     : OFF");
    if !p.test.is_lat() {
        let _ = writeln!(o, " TX depth        : {}", p.tx_depth);
    }
    if p.test.verb() == Verb::Send {
        let _ = writeln!(o, " RX depth        : {}", p.rx_depth);
    }
    if !p.test.is_lat() {
        let _ = writeln!(o, " CQ Moderation   : {}", p.cq_mod);
    }
    let _ = writeln!(o, " Mtu             : {}[B]", uverbs::sys::verbs::mtu::bytes(mtu).unwrap_or(0));
    let ll = if res.link_layer == uverbs::sys::verbs::link_layer::ETHERNET { "Ethernet" } else { "IB" };
    let _ = writeln!(o, " Link type       : {ll}");
    let _ = writeln!(o, " GID index       : {}", res.gid_index);
    if matches!(p.test.verb(), Verb::Read | Verb::Atomic) {
        let _ = writeln!(o, " Outstand reads  : {}", res.rd_atomic);
    }
    let _ = writeln!(o, " Max inline data : {}[B]", res.max_inline);
    let _ = writeln!(o, " rdma_cm QPs\t : OFF");
    let _ = writeln!(o, " Data ex. method : Ethernet");
    let _ = writeln!(o, " Completion      : {}", if res.channel.is_some() { "events" } else { "polling" });
    if p.check {
        let _ = writeln!(o, " Data check      : ON");
    }
    if let Some(g) = res.mem.gpu() {
        let _ = writeln!(o, " GPU memory      : {}", g.describe());
    }
    let _ = writeln!(o, "{DASHES}");
    for q in local {
        address(&mut o, "local", q, p, res.rd_atomic);
    }
    for q in remote {
        address(&mut o, "remote", q, p, res.rd_atomic);
    }
    let _ = write!(o, "{DASHES}");
    o
}

/// The table's column titles.
pub fn table_head(p: &Params, gbits: bool) -> String {
    if p.test.is_lat() {
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ".into()
    } else {
        let u = if gbits { "Gb/sec" } else { "MB/sec" };
        format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]")
    }
}

/// Bandwidth in the table's unit from bytes per second.
pub fn bw_unit(bps: f64, gbits: bool) -> f64 {
    if gbits {
        bps * 8.0 / 1e9
    } else {
        bps / (1u64 << 20) as f64
    }
}

/// One bandwidth row.
pub fn bw_row(size: u64, iters: u64, peak_bps: f64, avg_bps: f64, msg_rate: f64, gbits: bool) -> String {
    format!(
        " {:<10} {:<10}       {:<10.2}         {:<10.2}           {:.6}",
        size,
        iters,
        bw_unit(peak_bps, gbits),
        bw_unit(avg_bps, gbits),
        msg_rate / 1e6
    )
}

/// Latency statistics over per-iteration samples (microseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatStats {
    pub min: f64,
    pub max: f64,
    /// The median.
    pub typical: f64,
    pub avg: f64,
    pub stdev: f64,
    pub p99: f64,
    pub p999: f64,
}

impl LatStats {
    pub fn from_samples(mut v: Vec<f64>) -> LatStats {
        if v.is_empty() {
            return LatStats::default();
        }
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = v.len();
        let avg = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
        let pct = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        LatStats { min: v[0], max: v[n - 1], typical: v[n / 2], avg, stdev: var.sqrt(), p99: pct(0.99), p999: pct(0.999) }
    }
}

/// One latency row.
pub fn lat_row(size: u64, iters: u64, s: &LatStats) -> String {
    format!(
        " {:<7} {:<10}     {:<10.2}     {:<10.2}   {:<10.2}         {:<10.2}     {:<10.2}      {:<10.2}             {:<10.2}",
        size, iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )
}

/// The peak rate over windows of at least `window` operations, from (time, operations
/// completed) samples taken as completions were harvested.
pub fn peak_rate(samples: &[(std::time::Instant, u64)], window: u64) -> f64 {
    let mut best = 0.0f64;
    let mut j = 0;
    for i in 0..samples.len() {
        if j < i {
            j = i;
        }
        while j < samples.len() && samples[j].1 - samples[i].1 < window {
            j += 1;
        }
        if j == samples.len() {
            break;
        }
        let dt = samples[j].0.duration_since(samples[i].0).as_secs_f64();
        if dt > 0.0 {
            best = best.max((samples[j].1 - samples[i].1) as f64 / dt);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_style_hex() {
        assert_eq!(hexw(0, 4), "0000");
        assert_eq!(hexw(0x108, 6), "0x0108");
        assert_eq!(hexw(0x5d3f7a, 6), "0x5d3f7a");
        assert_eq!(hexw(0x7f0e3c5a1000, 16), "0x007f0e3c5a1000");
    }

    #[test]
    fn gid_decimal_bytes() {
        let g = std::net::Ipv6Addr::from([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1]).octets();
        assert_eq!(gid_line(&g), " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:01");
    }

    #[test]
    fn stats() {
        let s = LatStats::from_samples((1..=1000).map(|x| x as f64).collect());
        assert_eq!((s.min, s.max, s.typical, s.p99, s.p999), (1.0, 1000.0, 501.0, 990.0, 999.0));
        assert!((s.avg - 500.5).abs() < 1e-9);
    }
}
