#!/usr/bin/env python3
"""Independent RoCEv2 packet builder for softhca's wire tests.

Reads a JSON list of packet descriptions (field values only) on stdin, builds each packet
with scapy (IP/IPv6, UDP, scapy.contrib.roce BTH/AETH, which computes the ICRC) and prints
one line per packet: "<name> <hex of the UDP payload, ICRC included>". Given
{"sports": [[flow_label, lqpn, rqpn], ...]} instead, prints the RoCEv2 UDP source port
Linux derives for each (one per line).

The extension-header layouts and their order are written here from the IBA field tables,
independently of the Rust code under test.

Exit status 3 means scapy is not importable (the Rust test then skips).
"""
import json
import struct
import sys

try:
    import logging
    logging.getLogger("scapy").setLevel(logging.ERROR)
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw, raw
    from scapy.contrib.roce import BTH, AETH
except Exception as exc:  # pragma: no cover - environment dependent
    print(f"scapy unavailable: {exc}", file=sys.stderr)
    sys.exit(3)


def ext_after_aeth(case):
    """Bytes of the headers that come after the AETH: AtomicAckETH, ImmDt, IETH."""
    out = b""
    if case.get("atomic_ack_eth") is not None:
        out += struct.pack("!Q", case["atomic_ack_eth"][0])
    if case.get("immdt") is not None:
        out += struct.pack("!I", case["immdt"])
    if case.get("ieth") is not None:
        out += struct.pack("!I", case["ieth"])
    return out


def ext_before_aeth(case):
    """Bytes of DETH (Q_Key, reserved byte, 24-bit source QP), RETH (VA, R_Key, DMA length)
    and AtomicETH (VA, R_Key, swap/add, compare)."""
    out = b""
    if case.get("deth") is not None:
        qkey, sqp = case["deth"]
        out += struct.pack("!IB", qkey, 0) + sqp.to_bytes(3, "big")
    if case.get("reth") is not None:
        out += struct.pack("!QII", *case["reth"])
    if case.get("atomic_eth") is not None:
        out += struct.pack("!QIQQ", *case["atomic_eth"])
    return out


def build(case):
    payload = bytes.fromhex(case["payload"])
    pad = (-len(payload)) % 4
    b = case["bth"]
    bth = BTH(
        opcode=b["opcode"], solicited=b["se"], migreq=b["m"], padcount=pad, version=0,
        pkey=b["pkey"], fecn=b["fecn"], becn=b["becn"], dqpn=b["dqpn"],
        ackreq=b["ackreq"], psn=b["psn"],
    )
    if case["ipv"] == 4:
        ip = IP(src=case["src"], dst=case["dst"], id=0, flags="DF",
                tos=case["tos"], ttl=case["ttl"])
    else:
        ip = IPv6(src=case["src"], dst=case["dst"], tc=case["tc"], fl=case["fl"],
                  hlim=case["ttl"])
    pkt = ip / UDP(sport=case["sport"], dport=case["dport"]) / bth
    if ext_before_aeth(case):
        pkt = pkt / Raw(ext_before_aeth(case))
    if case.get("aeth") is not None:
        syndrome, msn = case["aeth"]
        pkt = pkt / AETH(syndrome=syndrome, msn=msn)
    tail = ext_after_aeth(case) + payload + b"\x00" * pad
    if tail:
        pkt = pkt / Raw(tail)
    return raw(pkt[BTH])


# RoCEv2 UDP source ports, written here from the kernel's definitions in
# include/rdma/ib_verbs.h (rdma_calc_flow_label, rdma_flow_label_to_udp_sport,
# rdma_get_udp_sport), independently of softhca/src/wire/udp_sport.rs.
ROCE_SPORT_MIN = 0xC000  # IB_ROCE_UDP_ENCAP_VALID_PORT_MIN
FLOW_LABEL_MASK = 0xFFFFF  # IB_GRH_FLOWLABEL_MASK


def calc_flow_label(lqpn, rqpn):
    v = (lqpn * rqpn) & 0xFFFFFFFFFFFFFFFF
    v ^= v >> 20
    v ^= v >> 40
    return v & FLOW_LABEL_MASK


def flow_label_to_udp_sport(fl):
    fl_low, fl_high = fl & 0x03FFF, fl & 0xFC000
    fl_low ^= fl_high >> 14
    return (fl_low | ROCE_SPORT_MIN) & 0xFFFF


def get_udp_sport(fl, lqpn, rqpn):
    if not fl:
        fl = calc_flow_label(lqpn, rqpn)
    return flow_label_to_udp_sport(fl)


def main():
    cases = json.load(sys.stdin)
    if isinstance(cases, dict):
        # {"sports": [[flow_label, local_qpn, remote_qpn], ...]}: one port per line.
        for fl, lqpn, rqpn in cases["sports"]:
            print(get_udp_sport(fl, lqpn, rqpn))
        return
    for case in cases:
        print(case["name"], build(case).hex())


if __name__ == "__main__":
    main()
