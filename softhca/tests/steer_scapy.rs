//! The steering classifier on frames scapy builds: scapy writes each frame and
//! reports, from its own dissection, the fields a ConnectX matches on; softhca's
//! parse of the same bytes must give the same values, and a rule set over them must
//! deliver each frame where its rule says.
//!
//! Skips, saying so, when python3 or scapy is missing (`pip install scapy`).

use std::process::Command;

use prm::bits::View;
use prm::cmd::flow::matching::FteMatchSetLyr24 as L;
use softhca::device::steer::{Action, Dest, Key, Miss, Steering, Verdict};

const SCRIPT: &str = r#"
from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, TCP, Raw, raw
fs = [
  Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")/IP(src="10.0.0.1", dst="10.0.0.2", tos=0x2e)/UDP(sport=5000, dport=4791)/Raw(b"x"*20),
  Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:03")/Dot1Q(prio=5, vlan=42)/IP(src="10.0.0.3", dst="10.0.0.2")/TCP(sport=40000, dport=80, flags="S"),
  Ether(dst="33:33:00:00:00:01", src="02:00:00:00:00:04")/IPv6(src="fd00::1", dst="fd00::2", hlim=7)/UDP(sport=53, dport=5353)/Raw(b"y"*3),
  Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:05")/IP(src="10.0.0.4", dst="10.0.0.2", ttl=9)/UDP(sport=1, dport=9999),
]
for f in fs:
  f = Ether(raw(f))
  ip = f[IP] if IP in f else f[IPv6]
  l4 = f[UDP] if UDP in f else f[TCP]
  ver = 4 if IP in f else 6
  proto = ip.proto if ver == 4 else ip.nh
  ttl = ip.ttl if ver == 4 else ip.hlim
  vid = f[Dot1Q].vlan if Dot1Q in f else 0
  prio = f[Dot1Q].prio if Dot1Q in f else 0
  l4t = 2 if UDP in f else 1
  print(raw(f).hex(), ver, proto, ttl, vid, prio, l4.sport, l4.dport, l4t)
"#;

/// The frames scapy builds and its dissection of each; Err says why scapy did not run.
fn scapy() -> Result<Vec<(Vec<u8>, Vec<u64>)>, String> {
    let out = Command::new("python3").args(["-c", SCRIPT]).output().map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!("scapy did not run: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| e.to_string())?;
    Ok(
        text.lines()
            .map(|l| {
                let mut w = l.split_whitespace();
                let hex = w.next().unwrap();
                let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
                (bytes, w.map(|x| x.parse().unwrap()).collect())
            })
            .collect(),
    )
}

#[test]
fn parse_agrees_with_scapy_and_rules_deliver() {
    let frames = match scapy() {
        Ok(f) => f,
        Err(why) => return testkit::skip(testkit::Need::Tool, format!("python3 with scapy: {why}")),
    };
    assert_eq!(frames.len(), 4);
    for (f, want) in &frames {
        let k = Key::parse(f);
        let v = View::<L>::new(&k.0).unwrap();
        let got = [
            v.get(L::ip_version) as u64,
            v.get(L::ip_protocol) as u64,
            v.get(L::ttl_hoplimit) as u64,
            v.get(L::first_vid) as u64,
            v.get(L::first_prio) as u64,
            if v.get(L::l4_type) == 2 { v.get(L::udp_sport) } else { v.get(L::tcp_sport) } as u64,
            if v.get(L::l4_type) == 2 { v.get(L::udp_dport) } else { v.get(L::tcp_dport) } as u64,
            v.get(L::l4_type) as u64,
        ];
        assert_eq!(&got[..], &want[..], "frame {:02x?}", &f[..14]);
        assert_eq!(v.get(L::cvlan_tag), want[3] != 0);
    }

    // Rules: UDP 4791 -> TIR 1 (RoCE); TCP dport 80 on VLAN 42 -> TIR 2; the
    // IPv6 destination fd00::2 -> TIR 3; everything else misses.
    let s = Steering::new();
    let t = s.create_table(0, 0, 4, Miss::Default).unwrap();
    let mut mask = Key::default();
    {
        let mut m = prm::bits::ViewMut::<L>::new(&mut mask.0).unwrap();
        m.set(L::ip_protocol, 0xff).set(L::udp_dport, 0xffff);
    }
    let g_udp = s.create_group(t, 0, 3, mask).unwrap();
    let mut roce = Key::default();
    prm::bits::ViewMut::<L>::new(&mut roce.0).unwrap().set(L::ip_protocol, 17).set(L::udp_dport, 4791);
    s.set_entry(t, 0, Some(g_udp), roce, Action { dests: vec![Dest::Tir(1)], ..Default::default() }, false).unwrap();
    let mut mask = Key::default();
    prm::bits::ViewMut::<L>::new(&mut mask.0).unwrap().set(L::cvlan_tag, true).set(L::first_vid, 0xfff).set(L::tcp_dport, 0xffff);
    let g_web = s.create_group(t, 4, 7, mask).unwrap();
    let mut web = Key::default();
    prm::bits::ViewMut::<L>::new(&mut web.0).unwrap().set(L::cvlan_tag, true).set(L::first_vid, 42).set(L::tcp_dport, 80);
    s.set_entry(t, 4, Some(g_web), web, Action { dests: vec![Dest::Tir(2)], flow_tag: 0x42, ..Default::default() }, false).unwrap();
    let mut mask = Key::default();
    prm::bits::ViewMut::<L>::new(&mut mask.0).unwrap().bytes_mut(L::dst_ipv4_dst_ipv6).fill(0xff);
    let g_v6 = s.create_group(t, 8, 15, mask).unwrap();
    let mut v6 = Key::default();
    let fd02: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
    prm::bits::ViewMut::<L>::new(&mut v6.0).unwrap().bytes_mut(L::dst_ipv4_dst_ipv6).copy_from_slice(&fd02.octets());
    s.set_entry(t, 8, Some(g_v6), v6, Action { dests: vec![Dest::Tir(3)], ..Default::default() }, false).unwrap();

    let verdicts: Vec<_> = frames.iter().map(|(f, _)| s.classify(0, f)).collect();
    assert_eq!(
        verdicts,
        [
            Verdict::Deliver { dest: Dest::Tir(1), flow_tag: 0 },
            Verdict::Deliver { dest: Dest::Tir(2), flow_tag: 0x42 },
            Verdict::Deliver { dest: Dest::Tir(3), flow_tag: 0 },
            Verdict::Miss,
        ]
    );
}
