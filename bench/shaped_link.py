#!/usr/bin/env python3
"""The all-reduce between two hosts over a shaped link, against what TCP delivers on it, and
(--overlap) the bucketed overlap against one blocking all-reduce across those hosts.

On the cluster test bed (tests/cluster/testbed.py; root): two hosts, one rank each, the second
host's link limited to RATE by tbf at both ends (docs/cluster-testing.md). For each rate:

  tcp        one TCP stream between the hosts for --seconds, each way alone, then both ways at
             once (the same sockets, the same link): what TCP actually delivers there, and the
             machine's CPU time per byte at each end while both ways run (/proc/stat less its idle
             rate: the hosts' network stacks and the shaper, all on the machine's cores)
  allreduce  dlscale allreduce across the two hosts (MPI over TCP): bus bandwidth at the largest
             size, and its ratio to the TCP figures (issue 32: within 25% of what TCP delivers)
  overlap    with --overlap CASES: bench_overlap_vs_blocking across the two hosts
             (--bucket-mb buckets progressed during backward against one all-reduce after it)
  mechanisms with --mechanisms MB: bench_allreduce_mechanisms across the two hosts (MB of
             gradients in --bucket-mb buckets through each MPI call a bucketed all-reduce could use)

  sudo python3 bench/shaped_link.py --rates 200mbit,500mbit [--overlap "resnet50:8"] [--mechanisms 102 [--iterations 3]]
      [--burst 80kb] [--dlscale build/current/dlscale] [--bench build/current/bench/bench_overlap_vs_blocking]

Prints one table; no figure here is asserted by a test (timings depend on the machine and its
load), the note of the change that measured them quotes them with this command.
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "cluster"))
import testbed  # noqa: E402

# Run inside a host: stream bytes to (or from) the peer for a while, print bytes/s.
STREAM = r"""
import socket, sys, time, threading
mode, peer, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
chunk = b"x" * (1 << 20)
def send(conn):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        conn.sendall(chunk)
    conn.shutdown(socket.SHUT_WR)
def receive(conn, out):
    n, start = 0, time.monotonic()
    while True:
        b = conn.recv(1 << 20)
        if not b:
            break
        n += len(b)
    out.append(n / (time.monotonic() - start))
if mode == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1); print("ready", flush=True)
    conn, _ = s.accept()
else:
    conn = socket.create_connection((peer, port))
both = sys.argv[5] == "both"
got = []
t = threading.Thread(target=receive, args=(conn, got))
if both or mode == "serve":
    t.start()
if both or mode == "connect":
    send(conn)
if both or mode == "serve":
    t.join()
    print(f"{got[0]:.0f}")
"""


def machine_busy_s():
    """CPU seconds the machine has spent busy (user, nice, system, irq, softirq) since it booted."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def tcp_rate(bed, seconds, both, port=45000):
    """Bytes/s host 1 -> host 0 (and host 0 -> host 1 at the same time when both), and the CPU
    seconds the machine spent per byte at each end beyond its idle rate while they ran."""
    a, b = bed.hosts
    start, busy = time.monotonic(), machine_busy_s()
    time.sleep(1)
    idle_rate = (machine_busy_s() - busy) / (time.monotonic() - start)
    server = bed.popen(a, [sys.executable, "-c", STREAM, "serve", "", str(port), str(seconds),
                           "both" if both else "one"], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    start, busy = time.monotonic(), machine_busy_s()
    client = bed.run(b, [sys.executable, "-c", STREAM, "connect", bed.addresses[a], str(port), str(seconds),
                         "both" if both else "one"], timeout=seconds * 10 + 30)
    into_a = float(server.stdout.read().strip())
    server.wait()
    busy = machine_busy_s() - busy - idle_rate * (time.monotonic() - start)
    into_b = float(client.stdout.strip()) if both else None
    carried = (into_a + (into_b or 0)) * seconds  # every byte is handled at both of its ends
    return into_a, into_b, busy / (2 * carried)


def allreduce_busbw(bed, dlscale, max_bytes, workdir):
    out = os.path.join(workdir, "allreduce.h5")
    r = bed.run(bed.hosts[0], bed.mpirun_args(1) + [dlscale, "allreduce", "--min-bytes", "65536", "--max-bytes",
                                                     str(max_bytes), "--iterations", "5", "--warmup", "2",
                                                     "--out", out, "--overwrite"], timeout=1800, cwd=workdir)
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    rows = [line.split() for line in r.stdout.splitlines() if re.match(r"^\s+\d+\s", line)]
    size, time_us, algbw, busbw, errors = rows[-1]
    return int(size), float(time_us) / 1e6, float(busbw) * 1e9, int(errors)  # busbw in bytes/s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="200mbit,500mbit", help="tc rates, comma-separated; none: unshaped")
    ap.add_argument("--seconds", type=float, default=4, help="each TCP measurement")
    ap.add_argument("--max-bytes", type=int, default=16 << 20)
    ap.add_argument("--dlscale", default=os.path.join(SOURCE, "build", "current", "dlscale"))
    ap.add_argument("--bench", default=os.path.join(SOURCE, "build", "current", "bench", "bench_overlap_vs_blocking"))
    ap.add_argument("--overlap", default="", help="cases for bench_overlap_vs_blocking (its --cases syntax)")
    ap.add_argument("--mechanisms", type=float, default=0, help="MB of gradients for bench_allreduce_mechanisms")
    ap.add_argument("--bucket-mb", default="25")
    ap.add_argument("--drivers", default="libtorch")
    ap.add_argument("--iterations", type=int, default=3, help="timed rounds of --mechanisms")
    ap.add_argument("--burst", default=testbed.SHAPER_BURST, help="the shaper's bucket (tc syntax)")
    args = ap.parse_args()
    args.dlscale, args.bench = os.path.abspath(args.dlscale), os.path.abspath(args.bench)
    reason = testbed.why_unavailable()
    if reason:
        sys.exit(f"shaped_link: {reason}")
    print(f"CPU: {testbed.machine_cpu()}")
    rows = []
    bed = testbed.Cluster(hosts=2)
    try:
        workdir = os.path.join(bed.dir, "work")
        os.makedirs(workdir)
        for rate in args.rates.split(","):
            if rate != "none":  # "none": the link as the bed makes it (a veth pair, CPU-bound)
                bed.shape(bed.hosts[1], rate, burst=args.burst)
            one, _, _ = tcp_rate(bed, args.seconds, both=False)
            in_a, in_b, cpu = tcp_rate(bed, args.seconds, both=True)
            size, t, busbw, errors = allreduce_busbw(bed, args.dlscale, args.max_bytes, workdir)
            # Two ranks: each sends and receives S bytes, both ways at once (a full-duplex ring).
            duplex = min(in_a, in_b)
            rows.append((rate, one, in_a, in_b, cpu, size, t, busbw, errors, busbw / duplex, busbw / one))
            if args.mechanisms:
                mechanisms = os.path.join(os.path.dirname(args.bench), "bench_allreduce_mechanisms")
                r = bed.run(bed.hosts[0], bed.mpirun_args(1) + [mechanisms, "--grad-mb", str(args.mechanisms),
                                                                 "--bucket-mb", args.bucket_mb, "--iterations", str(args.iterations)],
                            timeout=3600, cwd=workdir)
                print(f"-- MPI mechanisms across 2 hosts at {rate}\n{r.stdout}{r.stderr}", flush=True)
            if args.overlap:
                r = bed.run(bed.hosts[0], bed.mpirun_args(1) + [args.bench, "--drivers", args.drivers, "--cases",
                                                                 args.overlap, "--bucket-mb", args.bucket_mb,
                                                                 "--threads", "1"], timeout=3600, cwd=workdir)
                print(f"-- overlap across 2 hosts at {rate}\n{r.stdout}{r.stderr}", flush=True)
            bed.unshape(bed.hosts[1])
    finally:
        bed.close()
    mb = 1e6 / 8  # bytes/s per Mbit/s
    print(f"shaper's burst {args.burst}")
    print(f"{'rate':>9} {'tcp one way':>12} {'tcp both ways':>18} {'CPU/byte/end':>13} {'allreduce':>10} {'time':>8} "
          f"{'busbw':>9} {'busbw/duplex':>13} {'busbw/one-way':>14}")
    for rate, one, in_a, in_b, cpu, size, t, busbw, errors, r_duplex, r_one in rows:
        print(f"{rate:>9} {one / mb:>8.0f} Mb/s {in_a / mb:>6.0f}+{in_b / mb:<6.0f}Mb/s {cpu * 1e9:>10.2f} ns "
              f"{size >> 20:>7} MiB "
              f"{t * 1e3:>6.0f}ms {busbw / mb:>5.0f} Mb/s {r_duplex:>13.2f} {r_one:>14.2f}"
              f"{'' if errors == 0 else f'  {errors} WRONG ELEMENTS'}")


if __name__ == "__main__":
    main()
