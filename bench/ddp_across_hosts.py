#!/usr/bin/env python3
"""dlscale's data-parallel step across hosts against PyTorch DDP's, on the cluster test bed.

On the bed (tests/cluster/testbed.py; root): H hosts, one rank each, every host's link limited to
RATE by tbf at both ends (docs/cluster-testing.md). For each host count, rate and workload, in
alternating rounds:

  ddp        PyTorch DistributedDataParallel over gloo with its defaults (25 MB buckets reduced
             during backward), the same network as dlscale's (`dlscale list --json`, built as
             bench/pytorch_eager.py builds it), batch per rank, one thread per rank, plain SGD
  blocking   dlscale -d libtorch --bucket-mb 0: one all-reduce after backward
  buckets    dlscale -d libtorch --bucket-mb 25: buckets reduced during backward
and with --compression fp16 (or bf16), two more:
  ddp hook   DDP as above with fp16_compress_hook (bf16_compress_hook): gradients divided by the
             ranks, all-reduced in 16 bits, widened
  compressed dlscale --bucket-mb 25 --grad-compression fp16 (bf16), a job of its own
and with --sparse-embedding, two more:
  ddp sparse DDP as above with the embedding's nn.Embedding(sparse=True): its gradient's rows
             all-reduced sparse by gloo
  sparse     dlscale --bucket-mb 25 --sparse-embedding, a job of its own
and with --sharding optimizer, two more:
  zero       DDP as above stepping torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO stage 1
             over SGD): each rank updates its share, then broadcasts it to the others
  sharded    dlscale --bucket-mb 25 --sharding optimizer, a job of its own

dlscale runs both of its cases in one job, the blocking one first in even rounds and the bucketed
one first in odd ones.

Per configuration: the median step (slowest rank, per iteration) of each, their ratios, and
dlscale's exposed all-reduce with buckets over the blocking one, twice, both from the summary:
the slowest rank's (exposed_allreduce_median_s, which includes its wait for the others'
backward) and the least rank's (exposed_allreduce_least_median_s: per iteration the lowest over
ranks, the one whose backward ended last, whose exposed all-reduce is what the network still had
to do then); as it goes, each round's
bucketed/blocking ratio, whose range is the spread of the bed. PyTorch comes from the Python
that runs this script (Debian's python3-torch: the same ATen as Debian's LibTorch); without it,
or without gloo, the bench says so in one line and exits 1.

  sudo /usr/bin/python3 bench/ddp_across_hosts.py [--hosts 2,4] [--rates 200mbit,1gbit,none]
      [--workloads resnet50:8,lstm32:64] [--rounds 2] [--iterations 5] [--warmup 2]
      [--compression fp16|bf16] [--sparse-embedding] [--sharding optimizer]
      [--dlscale build/current/dlscale]

Prints one table; no figure here is asserted by a test (timings depend on the machine and its
load): the note of the change that measured them quotes them with this command.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "cluster"))
import testbed  # noqa: E402

PORT = 29511


def worker(args):
    """One DDP rank inside a host: prints the seconds of each timed step as JSON."""
    import torch
    import torch.distributed as dist
    from torch import nn
    sys.path.insert(0, HERE)
    import pytorch_eager

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{PORT}", rank=args.rank,
                            world_size=args.world)
    w = json.load(open(args.network))
    torch.manual_seed(0)
    net = pytorch_eager.build(w).train()
    if args.sparse:
        for i, m in enumerate(net):
            if isinstance(m, nn.Embedding):
                net[i] = nn.Embedding(m.num_embeddings, m.embedding_dim, sparse=True)
    model = nn.parallel.DistributedDataParallel(net)  # bucket_cap_mb 25
    if args.hook != "none":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, getattr(default_hooks, f"{args.hook}_compress_hook"))
    batch = args.batch
    if w["input_kind"] == "tokens":
        x = torch.randint(0, w["vocab"], [batch] + w["input_shape"])
    else:
        x = torch.randn([batch] + w["input_shape"])
    steps = w["input_shape"][0] if w["label_per_step"] else 1
    if w["loss"] == "sigmoid_bce":
        y = torch.randint(0, 2, (batch,)).float()
        loss_fn = lambda out: nn.functional.binary_cross_entropy_with_logits(out.reshape(-1), y)  # noqa: E731
    else:
        y = torch.randint(0, w["num_classes"], (batch * steps,))
        loss_fn = lambda out: nn.functional.cross_entropy(out.reshape(-1, w["num_classes"]), y)  # noqa: E731
    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for it in range(args.warmup + args.iterations):
        dist.barrier()  # every rank starts the step together, as dlscale's steps do
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss_fn(model(x)).backward()  # returns once DDP's bucketed all-reduce has finished
        opt.step()
        if it >= args.warmup:
            times.append(time.perf_counter() - start)
    dist.destroy_process_group()
    print(json.dumps(times), flush=True)


def ddp_step(bed, hosts, network, batch, args, hook="none", sparse=False, zero=False):
    """Median over iterations of the slowest rank's DDP step (with a compression hook: fp16, bf16;
    with a sparse embedding; stepping ZeroRedundancyOptimizer)."""
    master = bed.addresses[hosts[0]]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--master", master, "--world", str(len(hosts)),
           "--network", network, "--batch", str(batch), "--iterations", str(args.iterations), "--warmup",
           str(args.warmup), "--threads", "1", "--hook", hook] + (["--sparse"] if sparse else []) + \
        (["--zero"] if zero else [])
    # gloo binds to the interface the host name resolves to; the bed's hosts have no such entry.
    procs = [bed.popen(h, cmd + ["--rank", str(r)], env={"GLOO_SOCKET_IFNAME": "eth0"}, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True) for r, h in enumerate(hosts)]
    # A rank that fails leaves the others waiting for it: end them too.
    while any(p.poll() is None for p in procs) and not any(p.returncode not in (None, 0) for p in procs):
        time.sleep(0.5)
    for p in procs:
        if p.poll() is None:
            p.kill()
    outs = [p.communicate() for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"DDP rank failed (exit {p.returncode}): {err[-2000:]}")
    per_rank = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    return statistics.median(max(t) for t in zip(*per_rank))


def dlscale_steps(bed, hosts, workload, batch, args, workdir, order, extra=()):
    """((step, exposed all-reduce, the least exposed rank's, mechanism) of the blocking case, the
    same of the bucketed one), medians in s; `order` ("0,25" or "25,0") says which of the two the
    job runs first; or "25" alone, with `extra` arguments: that case's."""
    import h5py

    out = os.path.join(workdir, "dlscale.h5")
    r = bed.run(hosts[0], bed.mpirun_args(1, hosts) + [
        args.dlscale, "run", "-d", "libtorch", "-w", workload, "--batch", str(batch), "--threads", "1",
        "--bucket-mb", order, *extra, "--warmup", str(args.warmup), "--iterations",
        str(args.iterations), "--peak", "skip", "--progress", "none", "--out", out, "--overwrite"], timeout=7200,
        cwd=workdir)
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    with h5py.File(out, "r") as f:
        cases = [f["cases"][n] for n in sorted(f["cases"])]
        got = {}
        for c in cases:
            s = c["summary"].attrs
            got[float(c.attrs["bucket_mb"])] = (s["step_median_s"], s["exposed_allreduce_median_s"],
                                                s["exposed_allreduce_least_median_s"],
                                                str(c.attrs["allreduce_mechanism"]))
    return (got[0.0], got[25.0]) if order != "25" else got[25.0]


def pattern_line(where, peer_name, peer, peer_short, ours_name, ours, bucketed, plain_name):
    """One line for a communication pattern: dlscale's median step with it (`ours`: dlscale_steps
    results) against PyTorch's own (`peer`: steps) and against dlscale's plain buckets."""
    s, d = statistics.median(x[0] for x in ours), statistics.median(peer)
    b = statistics.median(x[0] for x in bucketed)
    return (f"-- {where}: {peer_name} {d:.3f} s, {ours_name} {s:.3f} s: {s / d:.2f} of {peer_short}, "
            f"{s / b:.2f} of dlscale's {plain_name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--master", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--network", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--hook", default="none", help=argparse.SUPPRESS)
    ap.add_argument("--sparse", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--zero", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sharding", choices=("none", "optimizer"), default="none",
                    help="also DDP with ZeroRedundancyOptimizer and dlscale's bucketed case with --sharding optimizer")
    ap.add_argument("--sparse-embedding", action="store_true",
                    help="also DDP with a sparse nn.Embedding and dlscale's bucketed case with --sparse-embedding")
    ap.add_argument("--compression", choices=("none", "fp16", "bf16"), default="none",
                    help="also DDP with that compression hook and dlscale's bucketed case with that --grad-compression")
    ap.add_argument("--hosts", default="2,4", help="host counts, one rank each")
    ap.add_argument("--rates", default="200mbit,1gbit,none", help="tc rates of every host's link; none: unshaped")
    ap.add_argument("--workloads", default="resnet50:8,lstm32:64", help="WORKLOAD:BATCH per rank, comma-separated")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of DDP and dlscale")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dlscale", default=os.path.join(SOURCE, "build", "current", "dlscale"))
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    try:
        import torch
        import torch.distributed as dist
        if not dist.is_gloo_available():
            sys.exit("ddp_across_hosts: this PyTorch has no gloo backend")
    except ImportError:
        sys.exit(f"ddp_across_hosts: {sys.executable} has no PyTorch (Debian: apt install python3-torch)")
    reason = testbed.why_unavailable()
    if reason:
        sys.exit(f"ddp_across_hosts: {reason}")
    args.dlscale = os.path.abspath(args.dlscale)
    sys.path.insert(0, HERE)
    import blas_core
    blas_core.apply(args.dlscale)  # the DDP ranks inherit it: the kernels dlscale's ranks run on
    print(f"CPU: {testbed.machine_cpu()}; PyTorch {torch.__version__}", flush=True)
    rows = []
    for count in (int(h) for h in args.hosts.split(",")):
        bed = testbed.Cluster(hosts=count)
        try:
            workdir = os.path.join(bed.dir, "work")
            os.makedirs(workdir)
            for rate in args.rates.split(","):
                bed.shape_every_host(rate)
                for spec in args.workloads.split(","):
                    workload, batch = spec.split(":")
                    network = os.path.join(workdir, f"{workload}.json")
                    with open(network, "w") as f:
                        f.write(subprocess.run([args.dlscale, "list", "--json", workload], check=True,
                                               capture_output=True, text=True).stdout)
                    ddp, blocking, bucketed, ddp_hook, compressed, ddp_sparse, sparse = [], [], [], [], [], [], []
                    zero, sharded = [], []
                    for k in range(args.rounds):
                        ddp.append(ddp_step(bed, bed.hosts, network, int(batch), args))
                        # The two dlscale cases run in one job, first one then the other in turn.
                        order = "0,25" if k % 2 == 0 else "25,0"
                        b, o = dlscale_steps(bed, bed.hosts, workload, int(batch), args, workdir, order)
                        blocking.append(b)
                        bucketed.append(o)
                        if args.compression != "none":
                            ddp_hook.append(ddp_step(bed, bed.hosts, network, int(batch), args, args.compression))
                            compressed.append(dlscale_steps(bed, bed.hosts, workload, int(batch), args, workdir, "25",
                                                            ["--grad-compression", args.compression]))
                        if args.sparse_embedding:
                            ddp_sparse.append(ddp_step(bed, bed.hosts, network, int(batch), args, sparse=True))
                            sparse.append(dlscale_steps(bed, bed.hosts, workload, int(batch), args, workdir, "25",
                                                        ["--sparse-embedding"]))
                        if args.sharding != "none":
                            zero.append(ddp_step(bed, bed.hosts, network, int(batch), args, zero=True))
                            sharded.append(dlscale_steps(bed, bed.hosts, workload, int(batch), args, workdir, "25",
                                                         ["--sharding", args.sharding]))
                    where = f"{count} hosts, {rate}, {spec}"
                    if sharded:
                        print(pattern_line(where, "DDP with ZeroRedundancyOptimizer", zero, "ZeRO's",
                                           f"dlscale sharded ({sharded[0][3]})", sharded, bucketed, "unsharded buckets"),
                              flush=True)
                    if sparse:
                        exposed = statistics.median(x[1] for x in sparse)
                        print(pattern_line(where, "DDP sparse embedding", ddp_sparse, "DDP's",
                                           "dlscale sparse embedding", sparse, bucketed, "dense buckets") +
                              f"; exposed all-reduce {exposed:.3f} s, "
                              f"{exposed / statistics.median(x[1] for x in blocking):.2f} of the blocking one's",
                              flush=True)
                    if compressed:
                        print(pattern_line(where, f"DDP {args.compression} hook", ddp_hook, "DDP's",
                                           f"dlscale buckets {args.compression}", compressed, bucketed,
                                           "float32 buckets"), flush=True)
                    row = (count, rate, spec, statistics.median(ddp), statistics.median(x[0] for x in blocking),
                           statistics.median(x[0] for x in bucketed),
                           [statistics.median(x[i] for x in blocking) for i in (1, 2)],
                           [statistics.median(x[i] for x in bucketed) for i in (1, 2)], bucketed[0][3])
                    rows.append(row)
                    # The rounds' own ratios: how far one job's bucketed case lands from its blocking one.
                    ratios = sorted(o[0] / b[0] for b, o in zip(blocking, bucketed))
                    print(f"-- {count} hosts, {rate}, {spec}: DDP {row[3]:.3f} s, dlscale blocking {row[4]:.3f} s, "
                          f"buckets {row[5]:.3f} s ({row[8]}); bucket/block per round "
                          f"{', '.join(f'{r:.2f}' for r in ratios)}", flush=True)
        finally:
            bed.close()
    print(f"{'hosts':>5} {'rate':>8} {'workload':<12} {'DDP s':>8} {'block s':>8} {'bucket s':>8} {'bucket/block':>12} "
          f"{'bucket/DDP':>10} {'exposed b/b':>11} {'least exposed b/b':>17}")
    for count, rate, spec, ddp, block, bucket, exp_block, exp_bucket, _ in rows:
        exposed = [f"{o / b:.2f}" if b > 0 else "-" for b, o in zip(exp_block, exp_bucket)]
        print(f"{count:>5} {rate:>8} {spec:<12} {ddp:>8.3f} {block:>8.3f} {bucket:>8.3f} {bucket / block:>12.2f} "
              f"{bucket / ddp:>10.2f} {exposed[0]:>11} {exposed[1]:>17}")


if __name__ == "__main__":
    main()
