"""Hold-out check of dlscale-project on the cluster test bed (testbed.py): a case
calibrated on ONE host (2 ranks) predicts the same case on TWO hosts (one rank each) over a link
shaped to 200 Mbit/s, in step time and exposed all-reduce, within a loose bound: one case with
its gradients in one all-reduce after backward, one with 1 MB buckets, each simulated as the
all-reduce it recorded (MPI_Allreduce, once or per bucket: a ring), with no --allreduce.

  DLSCALE_BIN=build/cpu/dlscale DLSCALE_PROJECT_BIN=build/cpu/dlscale-project DLSCALE_SOURCE_DIR=$PWD \
      /usr/bin/python3 tests/cluster/test_projection_holdout.py -v

It runs bench/projection_holdout.py's steps once (docs/projection.md#hold-out-validation): the
calibration and the hold-out job, the bed as a platform TOML (NIC = the shaped rate less TCP/IP's
headers, not the bench's default measured rate: nothing of the hold-out job goes into the
prediction, and at 200 Mbit/s the headers' share is what TCP gets; the bed's measured latency),
dlscale-project on the one-host file at P = 2.

The bound, 35%: at 200 Mbit/s the gradients (2.68 MB) take about 115 ms on the link one way
(a ring of two), against 15-45 ms of compute. The
bench's errors there were within 10% (libtorch), this test's runs of the one-bucket case
(reference driver, whose all-reduce in the step ran 5-20% slower than its microbenchmark) gave
-10% to -19%. The bound leaves about twice that for what a shared two-core machine does to one
run (the compute of the calibration and of the hold-out, seconds apart, differs by half under
other work; TCP through veth, bridge and tbf needs the same cores), and still fails a wrong
model of the link: bits taken for bytes (8x), the binomial tree where the buckets ran a ring
(twice the all-reduce on two ranks), a rate without its headers or a latency off by a factor would move it further.
A miss is measured once more, calibration and hold-out afresh: the machine's load can change between
the two jobs, and the second measurement counts; a wrong model misses both.

Exit 77 where the bed cannot be made (not root, no ip, no namespaces) or dlscale-project is not
built (no SimGrid: DLSCALE_PROJECT_BIN unset or not executable).
"""

import importlib.util
import os
import sys

import clustertest
from clustertest import DLSCALE, SOURCE

PROJECT = os.environ.get("DLSCALE_PROJECT_BIN", "")
BOUND = 0.35
RATE = "200mbit"

spec = importlib.util.spec_from_file_location("projection_holdout",
                                              os.path.join(SOURCE, "bench", "projection_holdout.py"))
holdout_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(holdout_bench)


class ProjectionHoldout(clustertest.OnTwoHosts):
    def test_two_hosts_predicted_from_one(self):
        # The reference driver (always built), batch 4: about 15 ms of compute per step. The
        # prediction takes the calibration's compute, measured seconds before the hold-out's: where
        # other work on the machine changes in between, the two computes differ (a loaded CI run
        # saw 81 ms of calibration step against about 135 ms of hold-out compute, -43% of step).
        # So a miss is measured once more, calibration and hold-out afresh, and the second counts.
        for attempt in range(2):
            rows = holdout_bench.holdout(self.bed, DLSCALE, PROJECT, RATE, self.dir, workload="mnist_fnn:width=512",
                                         driver="reference", batch=4, buckets=("0", "1"), iterations=10, warmup=2,
                                         steps=10, goodput=holdout_bench.TCP_GOODPUT, tag=f"-{attempt}")
            if attempt == 0 and not all(self.within(r) for r in rows):
                print("a prediction missed the bound: measuring again", file=sys.stderr)
                continue
            break
        self.assertEqual([(r["bucket_mb"], r["allreduce"]) for r in rows], [(0, "ring"), (1, "ring")])
        for r in rows:
            with self.subTest(bucket_mb=r["bucket_mb"]):
                self.check(r)

    @staticmethod
    def within(r):
        return abs(r["step_error"]) < BOUND and abs(r["exposed_error"]) < BOUND

    def check(self, r):
        m, sim = r["measured"], r["simulated"]
        line = (f"{RATE}, {r['allreduce']} (bucket {r['bucket_mb']:g} MB): step measured "
                f"{m['step_median'] * 1e3:.1f} ms, simulated {sim['step'] * 1e3:.1f} ms ({r['step_error']:+.1%}); "
                f"exposed all-reduce measured {m['exposed'] * 1e3:.1f} ms, simulated "
                f"{sim['exposed'] * 1e3:.1f} ms ({r['exposed_error']:+.1%}); calibration step "
                f"{r['calibration']['step_median'] * 1e3:.1f} ms, latency {r['latency_s'] * 1e6:.0f} us")
        print(line, file=sys.stderr)
        # The link must dominate the hold-out, or the check would not test the network model.
        self.assertGreater(m["exposed"], 0.5 * m["step_median"], line)
        self.assertLess(abs(r["step_error"]), BOUND, line)
        self.assertLess(abs(r["exposed_error"]), BOUND, line)


if __name__ == "__main__":
    if not (PROJECT and os.access(PROJECT, os.X_OK)):
        print(f"SKIP: dlscale-project not built (no SimGrid): DLSCALE_PROJECT_BIN={PROJECT!r}", file=sys.stderr)
        sys.exit(clustertest.SKIP)
    sys.exit(clustertest.main())
