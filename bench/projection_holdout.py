#!/usr/bin/env python3
"""Hold-out validation of dlscale-project: calibrated on one host, predict two hosts on a shaped link.

On the cluster test bed (tests/cluster/testbed.py; root; docs/cluster-testing.md), for each rate:

  calibrate  one host, 2 ranks: `dlscale run --ranks 2 --phases` (with --bucket-mb 0 and, with
             --buckets, the given size: one case each); the ranks talk within the host
  hold out   the same cases on two hosts, one rank each, the second host's link limited to RATE
             (the bed's tbf at both ends); the measured step_median_s and
             exposed_allreduce_median_s are what the projection must predict
  link       the bed described as a platform TOML: 2 nodes, 1 device each; intra-node = the
             calibration's within-host ring fit (its `projection` group); NIC = the rate that the
             network delivered (by default, `--goodput measured`): what the hold-out job's
             all-reduce microbenchmark got, alone on the link (its blocking case's; the median
             over every iteration of its sizes from 1 MiB up), as a user describes a cluster
             from a network benchmark run there; the step times of the hold-out stay unseen.
             `--goodput SHARE` takes the rate times SHARE instead (1448/1514 and the ACKs: 0.936,
             the headers' share). Latency: half the one-way latency between the hosts (a TCP
             ping-pong; a route pays 2 x NIC).
  project    dlscale-project on the ONE-host file with that platform at P = 2 (one rank per node)
             and --steps --steps, without --allreduce: it simulates the all-reduce the case
             recorded (a ring: MPI_Allreduce, once or per bucket); its simulated step and exposed
             all-reduce against the hold-out's

With --scale-to HOSTS it holds out a larger scale instead: calibrated on 2 hosts (one rank each)
and held out on HOSTS hosts (one rank each), every host's link at the rate; dlscale-project
--platform measured on the 2-host file (the ring fit of its own all-reduce across the two hosts:
nothing of the larger job) at P = HOSTS against the larger job's steps.

  sudo python3 bench/projection_holdout.py --rates 200mbit,500mbit [--buckets 1] [--repeats 2]
      [--scale-to 4]
      [--goodput SHARE|measured]
      [--workload mnist_fnn:width=512] [--driver libtorch] [--batch 256] [--keep DIR]
      [--sharding none,optimizer] [--grad-compression none,fp16] [--sparse-embedding]
      [--mca NAME=VALUE] [--burst 80kb] [--dlscale build/current/dlscale] [--project build/current/dlscale-project]

The measured exposed all-reduce is given as the diagnosis defines it (from the last rank's
arrival: what the simulation's is) and as the summary's exposed_allreduce_median_s (the slowest
rank's phase, waiting included); "MPI alone" is the microbenchmark the hold-out job ran at the
gradient size, "link" the simulated link's time for it; --mca passes Open MPI settings to both
jobs (docs/projection.md#hold-out-validation has the table and the causes of error).

Prints one row per rate, bucket size and repeat and the errors (simulated / measured - 1); no
figure here is asserted by a test but tests/cluster/test_projection_holdout.py's loose bound
(timings depend on the machine and its load), docs/projection.md quotes them with this command.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "cluster"))
import testbed  # noqa: E402

# What TCP carries of a shaped link that data crosses both ways at once (a 2-rank all-reduce): a
# full 1500-byte-MTU segment with timestamps carries 1448 bytes of payload in the 1514 bytes tbf
# counts for its frame, and the link also carries, for every two frames the other way, one 66-byte
# ACK: 1448 / (1514 + 33) = 0.936. bench/shaped_link.py measured 183+190 Mb/s both ways at 200mbit.
TCP_GOODPUT = 1448 / (1514 + 66 / 2)

# Run inside a host: small-message TCP ping-pong with the peer, print the median round trip in s.
PINGPONG = r"""
import socket, statistics, sys, time
mode, peer, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if mode == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1); print("ready", flush=True)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while (b := c.recv(64)):
        c.sendall(b)
else:
    c = socket.create_connection((peer, port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = []
    for _ in range(n):
        t = time.perf_counter(); c.sendall(b"x" * 8); c.recv(64); rtt.append(time.perf_counter() - t)
    c.close()
    print(statistics.median(rtt))
"""


def one_way_latency_s(bed, port=45100, n=200):
    """Half the median round trip of an 8-byte TCP message between the first two hosts."""
    a, b = bed.hosts[:2]
    server = bed.popen(a, [sys.executable, "-c", PINGPONG, "serve", "", str(port), str(n)],
                       stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    r = bed.run(b, [sys.executable, "-c", PINGPONG, "connect", bed.addresses[a], str(port), str(n)], timeout=60)
    server.wait(timeout=30)
    server.stdout.close()
    return float(r.stdout.strip()) / 2


def dlscale_run(bed, dlscale, ranks_per_host, hosts, out, workload, driver, batch, buckets, iterations, warmup, cwd,
                mca=(), patterns=()):
    """One job of `--phases` cases on every rank (one per bucket size, and per pattern: `patterns`
    are more dlscale options, e.g. --sharding none,optimizer) on `hosts`; the file's path."""
    cmd = bed.mpirun_args(ranks_per_host, hosts=hosts) + [a for m in mca for a in ("--mca", *m.split("=", 1))] + [
        dlscale, "run", "-w", workload, "-d", driver, "--threads", "1", "--batch", str(batch),
        "--ranks", str(ranks_per_host * len(hosts)), "--bucket-mb", ",".join(buckets), "--phases", "--iterations", str(iterations),
        "--warmup", str(warmup), "--peak", "skip", "--progress", "none", "--out", out, "--overwrite", *patterns]
    r = bed.run(bed.hosts[0], cmd, timeout=600, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return out


def diagnosis(case):
    """The measured step's parts as docs/metrics.md's diagnosis defines them (and as dlscale-project
    simulates them), of the median iteration by step time: (step, straggler wait, exposed all-reduce)."""
    phases = case["phase_time_s"][()]                  # [rank, iteration, forward/backward/allreduce/update]
    fb = phases[:, :, 0] + phases[:, :, 1]
    step = case["iter_time_s"][()].max(axis=0)
    straggler = fb.max(axis=0) - fb.mean(axis=0)
    exposed = (fb + phases[:, :, 2]).max(axis=0) - fb.max(axis=0)
    order = np.argsort(step, kind="stable")
    mid = order[[(len(order) - 1) // 2, len(order) // 2]]   # one iteration, or the two middle ones
    return float(step[mid].mean()), float(straggler[mid].mean()), float(exposed[mid].mean())


def case_key(c):
    """A case's bucket size and pattern: (bucket_mb, sharding, grad_compression, sparse embedding)."""
    sparse = c.attrs.get("sparse_embedding_rows_share", float("nan"))
    return (float(c.attrs["bucket_mb"]), str(c.attrs.get("sharding", "none")),
            str(c.attrs.get("grad_compression", "none")), bool(np.isfinite(sparse)))


def pattern_name(key):
    """"fp32", or what the case did beyond the dense float32 all-reduce: "sharded", "fp16", "rows"."""
    _, sharding, compression, sparse = key
    words = (["sharded"] if sharding != "none" else []) + ([compression] if compression != "none" else []) + (
        ["rows"] if sparse else [])
    return "+".join(words) or "fp32"


def cases(path):
    """{case_key: dict of the case}: its name, hosts, overlap, grad_bytes, summary's step_median_s and
    exposed_allreduce_median_s, the diagnosis' parts, the within-host ring fit (alpha, beta), the
    all-reduce microbenchmark that followed the case at its gradient size (slowest rank, median),
    and its large sizes' samples: (bytes, slowest rank's seconds) of every iteration at each size
    from 1 MiB (or the gradient, when smaller) up."""
    got = {}
    with h5py.File(path, "r") as f:
        alone = {}
        for g in f.get("allreduce", {}).values():
            sizes = list(g["bytes"][()])
            alone[g.attrs["case"]] = (sizes, g["time_s"][()].max(axis=0))   # [size, iteration]
        for name in f["cases"]:
            c = f["cases"][name]
            s, p = c["summary"].attrs, c["projection"].attrs
            grad = int(c.attrs["grad_bytes"])
            mpi_alone, large = float("nan"), []
            if name in alone and grad in alone[name][0]:
                sizes, times = alone[name]
                mpi_alone = float(np.median(times[sizes.index(grad)]))
                large = [(n, float(t)) for i, n in enumerate(sizes) if min(1 << 20, grad) <= n <= grad
                         for t in times[i]]
            step, straggler, exposed = diagnosis(c)
            got[case_key(c)] = dict(
                case=name, hosts=int(c.attrs["hosts"]), overlap=int(c.attrs["overlap"]), grad_bytes=grad,
                step_median=float(s["step_median_s"]), exposed_median=float(s["exposed_allreduce_median_s"]),
                step=step, straggler=straggler, exposed=exposed, mpi_alone=mpi_alone, mpi_large=large,
                fit=(float(p["within_alpha_s"]), float(p["within_beta_s_per_byte"])))
    return got


def platform_toml(rate_bits, latency_s, within_fit, goodput, nodes=2):
    """The bed as dlscale-project's platform: `nodes` nodes of 1 device; the route between the
    devices is intra + NIC + NIC + intra: bandwidth min(intra, NIC), latency 2 x intra + 2 x NIC."""
    alpha, beta = within_fit
    # A fit of beta 0 (the sizes could not tell the per-byte time from zero: within a host, a few
    # noisy small sizes can outweigh the rest): a link far faster than the NIC, as dlscale-project's
    # --platform measured takes it. No fit (NaN: nothing measured within a host): the same, at no latency.
    intra_gbps = 1 / beta / 1e9 if beta > 0 else 1e6
    alpha = alpha if np.isfinite(alpha) else 0.0
    return (f'name = "testbed-{rate_bits / 1e6:.0f}mbit"\nnodes = {nodes}\ndevices_per_node = 1\nplacement = "cyclic"\n'
            f"[intra_node]\nbandwidth_GBps = {intra_gbps:.6g}\nlatency_us = {alpha / 2 * 1e6:.6g}\n"
            f"[nic]\ncount = 1\nbandwidth_GBps = {rate_bits * goodput / 8 / 1e9:.6g}\n"
            f"latency_us = {latency_s / 2 * 1e6:.6g}\n[fabric]\ntopology = \"star\"\n")


def simulate(project, path, case, platform, steps, ranks=2):
    """dlscale-project on one case at P = `ranks` on `platform` (a TOML file, or measured),
    simulating the all-reduce the case recorded: {step, straggler, exposed, allreduce} of the group
    it adds."""
    r = subprocess.run([project, path, "--platform", platform, "--ranks", str(ranks), "--case", case,
                        "--steps", str(steps)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    with h5py.File(path, "r") as f:
        sims = f["cases"][case]["simulations"]
        g = sims[sorted(sims)[-1]]
        i = list(g["ranks"][()]).index(ranks)
        return dict(step=float(g["step_s"][i]), straggler=float(g["straggler_wait_s"][i]),
                    exposed=float(g["exposed_allreduce_s"][i]), allreduce=str(g.attrs["allreduce"]))


def parse_rate(rate):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, m in units.items():
        if rate.endswith(u):
            return float(rate[:-len(u)]) * m
    raise ValueError(f"rate {rate!r}: use kbit, mbit or gbit")


def holdout(bed, dlscale, project, rate, workdir, workload="mnist_fnn:width=512", driver="libtorch", batch=256,
            buckets=("0",), iterations=20, warmup=3, steps=20, goodput=None, tag="", mca=(), burst=testbed.SHAPER_BURST,
            patterns=()):
    """One calibration (first host alone) and one hold-out (both hosts, RATE) with the same cases;
    a row per bucket size and pattern (`patterns`: more dlscale options): measured and simulated
    step and exposed all-reduce, and the inputs. goodput: the NIC's share of RATE; None: what the
    hold-out's blocking microbenchmark got."""
    one = dlscale_run(bed, dlscale, 2, [bed.hosts[0]], os.path.join(workdir, f"one-host{tag}.h5"), workload, driver,
                      batch, buckets, iterations, warmup, workdir, mca, patterns)
    bed.shape(bed.hosts[1], rate, burst=burst)
    try:
        latency = one_way_latency_s(bed)
        two = dlscale_run(bed, dlscale, 1, bed.hosts, os.path.join(workdir, f"two-hosts{tag}.h5"), workload, driver,
                          batch, buckets, iterations, warmup, workdir, mca, patterns)
    finally:
        bed.unshape(bed.hosts[1])
    calibrated, held_out = cases(one), cases(two)
    if goodput is None:
        # What the link delivered to the blocking case's microbenchmark, n / B + 2 a for P = 2: the
        # median over every iteration of its sizes from 1 MiB up. On the bed, one all-reduce in a
        # few loses a segment at the shaper and waits out TCP's recovery (at 100 Mbit/s, 224 ms
        # took 270-355 ms): the median of the gradient size's 5 iterations alone was sometimes
        # such a wait, and with it the whole link a third slow.
        # The blocking case of the dense float32 all-reduce where the job has one, else the first.
        blocking = next((k for k in sorted(held_out) if k[0] == 0 and k[1:3] == ("none", "none")), min(held_out))
        samples = held_out[blocking]["mpi_large"]
        goodput = statistics.median(n / (t - 2 * latency) for n, t in samples) * 8 / parse_rate(rate)
    rows = []
    for key, cal in sorted(calibrated.items()):
        two_hosts = held_out[key]
        assert cal["hosts"] == 1 and two_hosts["hosts"] == 2, (cal["hosts"], two_hosts["hosts"])
        toml = os.path.join(workdir, f"testbed-{rate}{tag}.toml")
        with open(toml, "w") as f:
            f.write(platform_toml(parse_rate(rate), latency, cal["fit"], goodput))
        sim = simulate(project, one, cal["case"], toml, steps)
        allreduce = sim["allreduce"]
        # The simulated ring all-reduce of the whole gradient alone: n / B + 2 a for P = 2.
        link = parse_rate(rate) * goodput / 8
        rows.append(dict(rate=rate, bucket_mb=key[0], pattern=pattern_name(key), allreduce=allreduce, overlap=cal["overlap"], latency_s=latency,
                         goodput=goodput, calibration=cal,
                         measured=two_hosts, simulated=sim, link_alone=cal["grad_bytes"] / link + 2 * latency,
                         step_error=sim["step"] / two_hosts["step_median"] - 1,
                         exposed_error=sim["exposed"] / two_hosts["exposed"] - 1,
                         exposed_median_error=sim["exposed"] / two_hosts["exposed_median"] - 1))
    return rows


def scale_holdout(bed, dlscale, project, rate, workdir, hosts_to, workload="mnist_fnn:width=512", driver="libtorch",
                  batch=256, buckets=("0",), iterations=20, warmup=3, steps=20, tag="", mca=(),
                  burst=testbed.SHAPER_BURST, patterns=()):
    """Calibrated on 2 hosts and held out on `hosts_to`, one rank each, every host's link at RATE:
    dlscale-project on the 2-host file at P = hosts_to, on the bed described as `holdout` does
    (hosts_to nodes; NIC = the rate the 2-host job's blocking all-reduce microbenchmark got over
    its large sizes, latency = half the one-way latency: nothing of the larger job), against the
    larger job's cases; a row per bucket size and pattern. (The 2-host case's own ring fit,
    --platform measured, weighs every size alike and on a shaped link its small sizes pass in the
    shaper's burst: it describes the link several times too fast for large buffers.)"""
    for h in bed.hosts:
        bed.shape(h, rate, burst=burst)
    try:
        latency = one_way_latency_s(bed)
        small = dlscale_run(bed, dlscale, 1, bed.hosts[:2], os.path.join(workdir, f"two-hosts{tag}.h5"), workload,
                            driver, batch, buckets, iterations, warmup, workdir, mca, patterns)
        large = dlscale_run(bed, dlscale, 1, bed.hosts[:hosts_to], os.path.join(workdir, f"{hosts_to}-hosts{tag}.h5"),
                            workload, driver, batch, buckets, iterations, warmup, workdir, mca, patterns)
    finally:
        for h in bed.hosts:
            bed.unshape(h)
    calibrated, held_out = cases(small), cases(large)
    blocking = next((k for k in sorted(calibrated) if k[0] == 0 and k[1:3] == ("none", "none")), min(calibrated))
    goodput = statistics.median(n / (t - 2 * latency) for n, t in calibrated[blocking]["mpi_large"]) * 8 / parse_rate(rate)
    toml = os.path.join(workdir, f"testbed-{rate}{tag}-{hosts_to}-nodes.toml")
    with open(toml, "w") as f:
        f.write(platform_toml(parse_rate(rate), latency, (float("nan"), float("nan")), goodput, nodes=hosts_to))
    rows = []
    for key, cal in sorted(calibrated.items()):
        big = held_out[key]
        assert cal["hosts"] == 2 and big["hosts"] == hosts_to, (cal["hosts"], big["hosts"])
        sim = simulate(project, small, cal["case"], toml, steps, ranks=hosts_to)
        rows.append(dict(rate=rate, bucket_mb=key[0], pattern=pattern_name(key), allreduce=sim["allreduce"],
                         calibration=cal, measured=big, simulated=sim, goodput=goodput, latency_s=latency,
                         step_error=sim["step"] / big["step_median"] - 1,
                         exposed_error=sim["exposed"] / big["exposed"] - 1,
                         exposed_median_error=sim["exposed"] / big["exposed_median"] - 1))
    return rows


def print_scale_row(r, hosts_to, header=False):
    if header:
        print(f"{'rate':>8} {'bucket':>6} {'pattern':>12} | {'2 hosts':>7} | {hosts_to:>2} hosts {'sim':>7} {'error':>7} | "
              f"{'exposed':>7} {'sim':>7} {'error':>7} | {'compute ms':>10} {'NIC':>6}")
        print(f"{'':>8} {'MB':>6} {'':>12} | {'step ms':>7} | {'step ms':>8} {'':>7} {'':>7} | {'ms':>7} {'':>7} {'':>7} | "
              f"{'2 -> ' + str(hosts_to):>10} {'share':>6}")
    m, sim, cal = r["measured"], r["simulated"], r["calibration"]
    compute = f"{(cal['step'] - cal['exposed'] - cal['straggler']) * 1e3:.1f}->{(m['step'] - m['exposed'] - m['straggler']) * 1e3:.1f}"
    print(f"{r['rate']:>8} {r['bucket_mb']:>6g} {r['pattern']:>12} | {cal['step_median'] * 1e3:>7.1f} | "
          f"{m['step_median'] * 1e3:>8.1f} {sim['step'] * 1e3:>7.1f} {r['step_error'] * 100:>+6.1f}% | "
          f"{m['exposed'] * 1e3:>7.1f} {sim['exposed'] * 1e3:>7.1f} {r['exposed_error'] * 100:>+6.1f}% | {compute:>10} "
          f"{r['goodput']:>6.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="200mbit,500mbit", help="tc rates, comma-separated")
    ap.add_argument("--buckets", default="", help="bucket sizes in MB besides 0 (one all-reduce after backward)")
    ap.add_argument("--repeats", type=int, default=1, help="calibration + hold-out pairs per rate")
    ap.add_argument("--workload", default="mnist_fnn:width=512")
    ap.add_argument("--driver", default="libtorch")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20, help="dlscale-project --steps")
    ap.add_argument("--goodput", default="measured",
                    help="the NIC's rate in the platform: measured (default): what the hold-out job's all-reduce "
                         f"microbenchmark got; or a share of the tc rate ({TCP_GOODPUT:.4f}: TCP/IP's headers)")
    ap.add_argument("--mca", action="append", default=[], metavar="NAME=VALUE",
                    help="an Open MPI parameter for both jobs, e.g. coll_libnbc_iallreduce_algorithm=1 (ring)")
    ap.add_argument("--burst", default=testbed.SHAPER_BURST, help="the shaper's bucket (tc syntax)")
    ap.add_argument("--sharding", default="none", help="dlscale --sharding list, e.g. none,optimizer")
    ap.add_argument("--grad-compression", default="none", help="dlscale --grad-compression list, e.g. none,fp16")
    ap.add_argument("--sparse-embedding", action="store_true", help="dlscale --sparse-embedding (an LSTM workload)")
    ap.add_argument("--scale-to", type=int, default=0, metavar="HOSTS",
                    help="calibrate on 2 hosts and hold out on HOSTS (one rank each, every link at the rate, "
                         "--platform measured) instead of one host against two")
    ap.add_argument("--keep", default="", help="copy the results files and platform TOMLs into this folder")
    ap.add_argument("--dlscale", default=os.path.join(SOURCE, "build", "current", "dlscale"))
    ap.add_argument("--project", default=os.path.join(SOURCE, "build", "current", "dlscale-project"))
    args = ap.parse_args()
    try:
        goodput = None if args.goodput == "measured" else float(args.goodput)
    except ValueError:
        sys.exit(f"projection_holdout: --goodput {args.goodput}: a share of the rate, or measured")
    args.dlscale, args.project = os.path.abspath(args.dlscale), os.path.abspath(args.project)
    reason = testbed.why_unavailable()
    if reason:
        sys.exit(f"projection_holdout: {reason}")
    print(f"CPU: {testbed.machine_cpu()}")
    print(f"{args.workload}, batch {args.batch}, {args.driver}, 1 thread, {args.iterations} iterations; "
          f"NIC = rate x {'the measured share' if goodput is None else f'{goodput:.4f}'}; "
          f"dlscale-project --steps {args.steps}; shaper's burst {args.burst}"
          f"{''.join(' --mca ' + m for m in args.mca)}", flush=True)
    buckets = ["0"] + [b for b in args.buckets.split(",") if b]
    patterns = ["--sharding", args.sharding, "--grad-compression", args.grad_compression] + (
        ["--sparse-embedding"] if args.sparse_embedding else [])
    rows = []
    bed = testbed.Cluster(hosts=max(2, args.scale_to))
    try:
        workdir = os.path.join(bed.dir, "work")
        os.makedirs(workdir)
        for rate in args.rates.split(","):
            for rep in range(args.repeats):
                if args.scale_to:
                    for row in scale_holdout(bed, args.dlscale, args.project, rate, workdir, args.scale_to,
                                             args.workload, args.driver, args.batch, buckets, args.iterations,
                                             steps=args.steps, tag=f"-{rate}-{rep}", mca=args.mca, burst=args.burst,
                                             patterns=patterns):
                        print_scale_row(row, args.scale_to, header=not rows)
                        rows.append(row)
                    continue
                got = holdout(bed, args.dlscale, args.project, rate, workdir, args.workload, args.driver,
                              args.batch, buckets, args.iterations, steps=args.steps, goodput=goodput,
                              tag=f"-{rate}-{rep}", mca=args.mca, burst=args.burst, patterns=patterns)
                for row in got:
                    print_row(row, header=not rows)
                    rows.append(row)
        if args.keep:
            shutil.copytree(workdir, args.keep, dirs_exist_ok=True)
    finally:
        bed.close()
    steps = [abs(r["step_error"]) for r in rows]
    exposed = [abs(r["exposed_error"]) for r in rows]
    print(f"|error| over {len(rows)} rows: step median {statistics.median(steps) * 100:.1f}%, max "
          f"{max(steps) * 100:.1f}%; exposed all-reduce median {statistics.median(exposed) * 100:.1f}%, max "
          f"{max(exposed) * 100:.1f}%")


def print_row(r, header=False):
    if header:
        print(f"{'rate':>8} {'bucket':>6} {'pattern':>10} {'sim.':>8} {'1-host':>7} | {'2 hosts':>7} {'sim':>7} {'error':>7} | {'exposed':>7} "
              f"{'sim':>7} {'error':>7} | {'summary':>7} {'error':>7} | {'MPI alone':>9} {'link':>7} {'NIC':>6}")
        print(f"{'':>8} {'MB':>6} {'':>10} {'ring or':>8} {'step ms':>7} | {'step ms':>7} {'':>7} {'':>7} | {'ms':>7} {'':>7} {'':>7} | "
              f"{'exp. ms':>7} {'':>7} | {'ms':>9} {'ms':>7} {'share':>6}")
    m, sim = r["measured"], r["simulated"]
    print(f"{r['rate']:>8} {r['bucket_mb']:>6g} {r['pattern']:>10} {r['allreduce']:>8} {r['calibration']['step_median'] * 1e3:>7.1f} | "
          f"{m['step_median'] * 1e3:>7.1f} {sim['step'] * 1e3:>7.1f} {r['step_error'] * 100:>+6.1f}% | "
          f"{m['exposed'] * 1e3:>7.1f} {sim['exposed'] * 1e3:>7.1f} {r['exposed_error'] * 100:>+6.1f}% | "
          f"{m['exposed_median'] * 1e3:>7.1f} {r['exposed_median_error'] * 100:>+6.1f}% | "
          f"{m['mpi_alone'] * 1e3:>9.1f} {r['link_alone'] * 1e3:>7.1f} {r['goodput']:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
