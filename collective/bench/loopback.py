#!/usr/bin/env python3
"""The kernel's share of the collective benchmark, without doorbell or Open MPI.

Streams the same bytes over loopback two ways, one sender process and one receiver:

* tcp: 1 MiB `send` calls into a TCP connection, `recv_into` a 1 MiB buffer (what
  Open MPI's tcp BTL leaves to the kernel);
* udp: RoCEv2-sized packets the way softhca sends them: segmented sends (UDP_SEGMENT)
  of 15 packets of header + 4096 B payload + 4 B ICRC, each packet given as three
  pieces, received with UDP_GRO into a 64 KiB buffer.

Prints the rate and the CPU seconds (user + system, both processes) per GB moved. If
the two cost the same per byte, the gap between doorbell and Open MPI in
docs/benchmarks-history.md is in what doorbell does above the socket, not in the transport.

    python3 collective/bench/loopback.py [--gib 4] [--rounds 3]
"""
import argparse
import os
import socket
import time

SOL_UDP, UDP_SEGMENT, UDP_GRO = 17, 103, 104
HEADER, PAYLOAD, ICRC, PER_SEND = 28, 4096, 4, 15


def cpu(t):
    return t.user + t.system + t.children_user + t.children_system


def run(kind, total):
    """Moves `total` bytes; returns (MB/s, CPU seconds per GB)."""
    if kind == "tcp":
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        addr = ls.getsockname()
    else:
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.bind(("127.0.0.1", 0))
        rx.setsockopt(SOL_UDP, UDP_GRO, 1)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        addr = rx.getsockname()
    c0, t0 = os.times(), time.time()
    if os.fork() == 0:
        if kind == "tcp":
            s = socket.create_connection(addr)
            buf, sent = memoryview(bytearray(1 << 20)), 0
            while sent < total:
                s.sendall(buf)
                sent += len(buf)
            s.close()
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(SOL_UDP, UDP_SEGMENT, HEADER + PAYLOAD + ICRC)
            s.connect(addr)
            data = memoryview(bytearray(PAYLOAD * PER_SEND))
            hdr, tail = bytes(HEADER), bytes(ICRC)
            iov = [p for i in range(PER_SEND) for p in (hdr, data[i * PAYLOAD:(i + 1) * PAYLOAD], tail)]
            sent = 0
            while sent < total:
                sent += s.sendmsg(iov)
            s.send(b"x")
        os._exit(0)
    got = 0
    buf = memoryview(bytearray(1 << 20 if kind == "tcp" else 65536))
    if kind == "tcp":
        c, _ = ls.accept()
        while (n := c.recv_into(buf)) > 0:
            got += n
    else:
        while (n := rx.recv_into(buf)) != 1:
            got += n
    os.wait()
    dt, c1 = time.time() - t0, os.times()
    return got / dt / 1e6, (cpu(c1) - cpu(c0)) / (got / 1e9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    total = int(a.gib * (1 << 30))
    print(f"{'round':>5} {'kind':>4} {'MB/s':>8} {'CPU s/GB':>9}")
    for r in range(1, a.rounds + 1):
        for kind in ("tcp", "udp"):
            rate, per_gb = run(kind, total)
            print(f"{r:>5} {kind:>4} {rate:>8.0f} {per_gb:>9.3f}")


if __name__ == "__main__":
    main()
