//! The rule syntax of `doorbell flow`: a match is whitespace-separated `FIELD=VALUE`
//! terms that must all hold (`any`, or nothing, matches every frame), parsed into the
//! devx crate's [`Match`] (the outer L2-L4 set a ConnectX group masks), and printed
//! back in the same syntax by [`show`].
//!
//! The field names are the protocol's own words (`eth`, `ipv4`, `udp`...) with the
//! header field after the dot, as tcpdump/nftables users read them:
//!
//! | field | value |
//! |---|---|
//! | `eth.dst`, `eth.src` | MAC `02:00:00:00:00:01` |
//! | `eth.type` | `ipv4`, `ipv6`, `arp` or a number (`0x88b5`) |
//! | `vlan` | customer VLAN id 0..4095 |
//! | `ip.proto` | `udp`, `tcp`, `icmp` or 0..255 |
//! | `ipv4.src`, `ipv4.dst`, `ipv6.src`, `ipv6.dst` | an address of that family (`ip.src`/`ip.dst`: either) |
//! | `udp.sport`, `udp.dport`, `tcp.sport`, `tcp.dport` | 0..65535 (imply `ip.proto`) |
//!
//! Numbers are decimal or `0x` hex. Masks are whole fields (exact match): that is what
//! makes a rule one hash lookup in its group, whatever the number of rules.

use std::fmt::Write as _;
use std::net::IpAddr;

use devx::flow::Match;

/// Why a match did not parse (the message names the term).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

fn err<T>(s: String) -> Result<T, SyntaxError> {
    Err(SyntaxError(s))
}

/// Every field name, for the error that lists them.
pub const FIELDS: &[&str] = &[
    "eth.dst", "eth.src", "eth.type", "vlan", "ip.proto", "ip.src", "ip.dst", "ipv4.src", "ipv4.dst", "ipv6.src",
    "ipv6.dst", "udp.sport", "udp.dport", "tcp.sport", "tcp.dport",
];

pub fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn num<T: TryFrom<u64>>(field: &str, v: &str, max: u64) -> Result<T, SyntaxError> {
    match parse_num(v) {
        Some(n) if n <= max => T::try_from(n).map_err(|_| SyntaxError(format!("{field}={v}: out of range"))),
        Some(_) => err(format!("{field}={v}: out of range (at most {max})")),
        None => err(format!("{field}={v}: not a number")),
    }
}

fn mac(field: &str, v: &str) -> Result<[u8; 6], SyntaxError> {
    let parts: Vec<&str> = v.split([':', '-']).collect();
    let mut m = [0u8; 6];
    if parts.len() != 6 {
        return err(format!("{field}={v}: a MAC is six hex bytes (02:00:00:00:00:01)"));
    }
    for (b, p) in m.iter_mut().zip(&parts) {
        *b = match u8::from_str_radix(p, 16) {
            Ok(x) if !p.is_empty() && p.len() <= 2 => x,
            _ => return err(format!("{field}={v}: a MAC is six hex bytes (02:00:00:00:00:01)")),
        };
    }
    Ok(m)
}

fn ip(field: &str, v: &str, family: Option<u8>) -> Result<IpAddr, SyntaxError> {
    let a: IpAddr = v.parse().map_err(|_| SyntaxError(format!("{field}={v}: not an IP address")))?;
    match (family, a) {
        (Some(4), IpAddr::V6(_)) => err(format!("{field}={v}: an IPv6 address in an IPv4 field")),
        (Some(6), IpAddr::V4(_)) => err(format!("{field}={v}: an IPv4 address in an IPv6 field")),
        _ => Ok(a),
    }
}

/// Parses a match (see the module doc). Each field at most once; the terms must agree
/// (one IP version, one L4 protocol).
pub fn parse(text: &str) -> Result<Match, SyntaxError> {
    let mut m = Match::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut proto_given: Option<u8> = None;
    for term in text.split_whitespace() {
        if term == "any" || term == "*" {
            continue;
        }
        let Some((k, v)) = term.split_once('=') else {
            return err(format!("{term:?}: a term is FIELD=VALUE (fields: {})", FIELDS.join(", ")));
        };
        if v.is_empty() {
            return err(format!("{k}=: no value"));
        }
        // ip.src and ipv4.src are the same field.
        let slot = match k {
            "ip.src" | "ipv4.src" | "ipv6.src" => "ip.src",
            "ip.dst" | "ipv4.dst" | "ipv6.dst" => "ip.dst",
            _ => k,
        };
        if seen.contains(&slot) {
            return err(format!("{k}: given twice"));
        }
        match k {
            "eth.dst" => m = m.dmac(mac(k, v)?),
            "eth.src" => m = m.smac(mac(k, v)?),
            "eth.type" => {
                m = m.ethertype(match v {
                    "ipv4" | "ip" => 0x0800,
                    "ipv6" => 0x86dd,
                    "arp" => 0x0806,
                    "vlan" => 0x8100,
                    _ => num(k, v, 0xffff)?,
                })
            }
            "vlan" => m = m.vlan(num(k, v, 4095)?),
            "ip.proto" => {
                let p = match v {
                    "udp" => 17,
                    "tcp" => 6,
                    "icmp" => 1,
                    "icmpv6" => 58,
                    _ => num(k, v, 255)?,
                };
                proto_given = Some(p);
                m = m.ip_protocol(p);
            }
            "ip.src" | "ipv4.src" | "ipv6.src" | "ip.dst" | "ipv4.dst" | "ipv6.dst" => {
                let fam = if k.starts_with("ipv4") { Some(4) } else if k.starts_with("ipv6") { Some(6) } else { None };
                let a = ip(k, v, fam)?;
                m = if slot == "ip.src" { m.src_ip(a) } else { m.dst_ip(a) };
            }
            "udp.sport" => m = m.udp_sport(num(k, v, 0xffff)?),
            "udp.dport" => m = m.udp_dport(num(k, v, 0xffff)?),
            "tcp.sport" => m = m.tcp_sport(num(k, v, 0xffff)?),
            "tcp.dport" => m = m.tcp_dport(num(k, v, 0xffff)?),
            _ => return err(format!("{k}: no such field (fields: {})", FIELDS.join(", "))),
        }
        seen.push(slot);
    }
    let udp = m.udp_sport.is_some() || m.udp_dport.is_some();
    let tcp = m.tcp_sport.is_some() || m.tcp_dport.is_some();
    if udp && tcp {
        return err("udp.* and tcp.* in one match: a frame has one L4 header".into());
    }
    if let Some(p) = proto_given {
        if (udp && p != 17) || (tcp && p != 6) {
            return err(format!("ip.proto={p} contradicts the {} port", if udp { "udp" } else { "tcp" }));
        }
        m.ip_protocol = Some(p);
    }
    if let (Some(s), Some(d)) = (m.src_ip, m.dst_ip) {
        if s.is_ipv4() != d.is_ipv4() {
            return err("an IPv4 and an IPv6 address in one match".into());
        }
    }
    if let (Some(t), Some(a)) = (m.ethertype, m.src_ip.or(m.dst_ip)) {
        let want = if a.is_ipv4() { 0x0800 } else { 0x86dd };
        if t != want {
            return err(format!("eth.type={t:#06x} contradicts an IPv{} address", if a.is_ipv4() { 4 } else { 6 }));
        }
    }
    Ok(m)
}

fn show_mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The match in the syntax [`parse`] reads, fields in a fixed order (`any` for none);
/// `parse(&show(m)) == m`.
pub fn show(m: &Match) -> String {
    let mut s = String::new();
    let mut put = |k: &str, v: String| {
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = write!(s, "{k}={v}");
    };
    if let Some(x) = m.dmac {
        put("eth.dst", show_mac(x));
    }
    if let Some(x) = m.smac {
        put("eth.src", show_mac(x));
    }
    if let Some(t) = m.ethertype {
        put("eth.type", format!("{t:#06x}"));
    }
    if let Some(v) = m.vlan {
        put("vlan", v.to_string());
    }
    let ports = m.udp_sport.or(m.udp_dport).or(m.tcp_sport).or(m.tcp_dport).is_some();
    if let (Some(p), false) = (m.ip_protocol, ports) {
        put("ip.proto", p.to_string());
    }
    for (k, a) in [("src", m.src_ip), ("dst", m.dst_ip)] {
        if let Some(a) = a {
            put(&format!("{}.{k}", if a.is_ipv4() { "ipv4" } else { "ipv6" }), a.to_string());
        }
    }
    for (k, p) in [("udp.sport", m.udp_sport), ("udp.dport", m.udp_dport), ("tcp.sport", m.tcp_sport), ("tcp.dport", m.tcp_dport)] {
        if let Some(p) = p {
            put(k, p.to_string());
        }
    }
    if s.is_empty() {
        s.push_str("any");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_readme_example() {
        let m = parse("ipv4.dst=10.0.0.2 udp.dport=9000").unwrap();
        assert_eq!(m, Match::new().dst_ip("10.0.0.2".parse().unwrap()).udp_dport(9000));
        assert_eq!(m.ip_protocol, Some(17), "a UDP port implies ip_protocol 17 (IANA)");
        // The bytes the device sees: UDP dport 9000 = 0x2328 at byte 0x1e of
        // fte_match_set_lyr_2_4 (mlx5_ifc.h: udp_dport at bit 0xf0).
        assert_eq!(&m.value()[0x1e..0x20], &[0x23, 0x28]);
    }

    #[test]
    fn every_field() {
        let m = parse("eth.dst=02:00:00:78:01:01 eth.src=02-00-00-78-01-02 eth.type=ipv4 vlan=0x64 ip.proto=udp \
                       ip.src=10.1.2.3 ipv4.dst=10.1.2.4 udp.sport=1 udp.dport=0xffff").unwrap();
        assert_eq!(m.dmac, Some([2, 0, 0, 0x78, 1, 1]));
        assert_eq!(m.smac, Some([2, 0, 0, 0x78, 1, 2]));
        assert_eq!(m.ethertype, Some(0x0800));
        assert_eq!(m.vlan, Some(100));
        assert_eq!(m.ip_protocol, Some(17));
        assert_eq!(m.udp_sport, Some(1));
        assert_eq!(m.udp_dport, Some(65535));
        let t = parse("tcp.dport=80 ipv6.src=fe80::1 eth.type=0x86dd").unwrap();
        assert_eq!(t.ip_protocol, Some(6));
        assert_eq!(t.src_ip, Some("fe80::1".parse().unwrap()));
        assert_eq!(parse("ip.proto=icmp").unwrap().ip_protocol, Some(1));
        assert_eq!(parse("eth.type=arp").unwrap().ethertype, Some(0x0806));
    }

    #[test]
    fn any_matches_everything() {
        for s in ["", "any", "*", "  "] {
            let m = parse(s).unwrap();
            assert_eq!(m, Match::new());
            assert!(m.mask().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn show_round_trips() {
        for s in ["any", "ipv4.dst=10.0.0.2 udp.dport=9000", "eth.dst=02:00:00:00:00:01 eth.type=0x88b5", "vlan=7 ip.proto=1",
                  "ipv6.src=fe80::1 ipv6.dst=fe80::2 tcp.sport=22"] {
            let m = parse(s).unwrap();
            assert_eq!(show(&m), s);
            assert_eq!(parse(&show(&m)).unwrap(), m);
        }
        // A given ip.proto that a port implies is printed once, as the port.
        assert_eq!(show(&parse("ip.proto=17 udp.dport=5").unwrap()), "udp.dport=5");
    }

    #[test]
    fn errors_name_the_term() {
        let e = |s: &str| parse(s).unwrap_err().0;
        assert!(e("udp.dport").contains("FIELD=VALUE"));
        assert!(e("udp.port=1").contains("no such field"));
        assert!(e("udp.dport=65536").contains("out of range"));
        assert!(e("udp.dport=x").contains("not a number"));
        assert!(e("udp.dport=").contains("no value"));
        assert!(e("vlan=4096").contains("out of range"));
        assert!(e("ip.proto=256").contains("out of range"));
        assert!(e("eth.dst=02:00:00:00:01").contains("six hex bytes"));
        assert!(e("eth.dst=02:00:00:00:01:zz").contains("six hex bytes"));
        assert!(e("eth.dst=02:00:00:00:01:123").contains("six hex bytes"));
        assert!(e("ipv4.dst=fe80::1").contains("IPv6 address in an IPv4 field"));
        assert!(e("ipv6.dst=10.0.0.1").contains("IPv4 address in an IPv6 field"));
        assert!(e("ipv4.dst=10.0.0.300").contains("not an IP address"));
        assert!(e("udp.dport=1 udp.dport=2").contains("twice"));
        assert!(e("ip.dst=10.0.0.1 ipv4.dst=10.0.0.2").contains("twice"));
        assert!(e("udp.dport=1 tcp.sport=2").contains("one L4 header"));
        assert!(e("ip.proto=tcp udp.dport=2").contains("contradicts"));
        assert!(e("ipv4.src=10.0.0.1 ipv6.dst=::1").contains("IPv4 and an IPv6"));
        assert!(e("eth.type=arp ipv4.dst=10.0.0.1").contains("contradicts"));
    }
}
