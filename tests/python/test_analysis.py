"""Tests of the scaling-study commands of results/dlscale-report.

Run: /usr/bin/python3 -m unittest discover -s tests/python

Files are written with test_report.write_results. Expected values are
computed here from the raw samples with numpy and the definitions of
docs/metrics.md, independently of the package's code paths.
"""

import csv
import importlib.util
import io
import math
import os
import random
import subprocess
import sys
import unittest
from html.parser import HTMLParser

import h5py
import numpy as np

from dlscale_test import Workdir
from test_report import SCRIPT, make_case, reference_ci, write_results

import dlscale_report as dr  # noqa: E402  (test_report put results/ on sys.path)
from dlscale_report import mannwhitney, tables  # noqa: E402
from dlscale_report.ranks import parse_participants  # noqa: E402
from dlscale_report.study import requested_threads  # noqa: E402

# Plots and the HTML page need matplotlib; the tables do not.
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None

try:
    import scipy.stats
    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*args):
    # The interpreter running the tests (it has h5py), not the script's `env python3`.
    return subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], capture_output=True, text=True)


def read_csv(text):
    return list(csv.DictReader(io.StringIO(text)))



def step_stats(t):
    """Median, CI and coverage of the step times of iter_time_s, with numpy."""
    s = np.asarray(t).max(axis=0)
    lo, hi, cov = reference_ci(np.sort(s))
    return float(np.median(s)), float(lo), float(hi), cov


def times(rng, ranks, n, base, spread=0.1):
    return base * (1 + spread * rng.random((ranks, n)))


# ---------------------------------------------------------------- scaling

class ScalingTest(Workdir):
    def weak_study(self):
        """Three jobs (P = 1, 2, 4), each with two thread counts; P=4 t=2 ran out of memory."""
        rng = np.random.default_rng(3)
        self.t = {}
        paths = []
        for p in (1, 2, 4):
            cases = []
            for th in (1, 2):
                if p == 4 and th == 2:
                    cases.append(make_case(status="oom", message="oom", ranks=4, iterations=9,
                                           threads=2, batch_per_rank=16))
                    continue
                t = times(rng, p, 9, 0.01 * (1 + 0.2 * math.log2(p)) / th)
                self.t[(p, th)] = t
                cases.append(make_case(t, threads=th, batch_per_rank=16))
            path = self.path(f"p{p}.h5")
            write_results(path, cases)
            paths.append(path)
        return paths

    def test_weak_definitions(self):
        series, notes = dr.build_series(dr.load_study(self.weak_study()).cases, "weak")
        self.assertEqual(notes, [])
        self.assertEqual(len(series), 2)                      # t=1 and t=2, across 3 files
        for s, th in zip(series, (1, 2)):
            self.assertEqual(s.baseline_ranks, 1)
            t0, lo0, hi0, cov0 = step_stats(self.t[(1, th)])
            for row in s.rows:
                p = row["ranks"]
                if (p, th) not in self.t:
                    self.assertEqual((row["status"], row["speedup"]), ("oom", None))
                    continue
                t, lo, hi, cov = step_stats(self.t[(p, th)])
                self.assertEqual(row["step_median_ms"], t * 1e3)
                if p == 1:
                    self.assertEqual((row["speedup"], row["efficiency"], row["speedup_low"]),
                                     (1.0, 1.0, 1.0))
                    continue
                # weak: E = T(P0)/T(P); scaled speedup = (P/P0)·E
                self.assertAlmostEqual(row["efficiency"], t0 / t, delta=1e-14)
                self.assertAlmostEqual(row["speedup"], p * t0 / t, delta=1e-13)
                self.assertAlmostEqual(row["efficiency_low"], lo0 / hi, delta=1e-14)
                self.assertAlmostEqual(row["efficiency_high"], hi0 / lo, delta=1e-14)
                self.assertAlmostEqual(row["speedup_low"], p * lo0 / hi, delta=1e-13)
                self.assertAlmostEqual(row["coverage_min"], cov0 * cov, delta=1e-15)
                self.assertLessEqual(row["efficiency_low"], row["efficiency"])
                self.assertLessEqual(row["efficiency"], row["efficiency_high"])
                self.assertEqual(row["ideal_speedup"], p)

    def test_strong_definitions_and_baseline_skips_failed(self):
        rng = np.random.default_rng(5)
        t2, t4, t8 = (times(rng, p, 12, 0.04 / p * 1.1) for p in (2, 4, 8))
        cases = [make_case(status="oom", message="too big", ranks=1, iterations=12,
                           scaling="strong", global_batch=64, batch_per_rank=64),
                 make_case(t2, scaling="strong", global_batch=64, batch_per_rank=32),
                 make_case(t4, scaling="strong", global_batch=64, batch_per_rank=16),
                 make_case(t8, scaling="strong", global_batch=64, batch_per_rank=8)]
        path = self.path("strong.h5")
        write_results(path, cases)
        series, _ = dr.build_series(dr.load_study([path]).cases, "strong")
        self.assertEqual(len(series), 1)
        s = series[0]
        self.assertEqual(s.baseline_ranks, 2)                 # P=1 failed
        self.assertEqual([r["ranks"] for r in s.rows], [1, 2, 4, 8])
        t0, lo0, hi0, _ = step_stats(t2)
        for row, t_ in zip(s.rows[2:], (t4, t8)):
            p = row["ranks"]
            t, lo, hi, _ = step_stats(t_)
            self.assertAlmostEqual(row["speedup"], t0 / t, delta=1e-13)
            self.assertAlmostEqual(row["efficiency"], t0 * 2 / (p * t), delta=1e-14)
            self.assertAlmostEqual(row["speedup_high"], hi0 / lo, delta=1e-13)
            self.assertAlmostEqual(row["efficiency_low"], lo0 * 2 / (p * hi), delta=1e-14)
            self.assertEqual(row["ideal_speedup"], p / 2)
            self.assertEqual(row["samples_per_s"], 64 / t)

    def test_one_rank_reducing_nothing_is_the_baseline_of_its_bucketed_series(self):
        # Default buckets: the one-rank case records 25 MB but reduced nothing (no overlap), the
        # two-rank one overlapped them; one series, not two.
        rng = np.random.default_rng(11)
        t1, t2 = times(rng, 1, 8, 0.02), times(rng, 2, 8, 0.021)
        one = make_case(t1, extra_attrs={"bucket_mb": 25.0, "overlap": 0, "allreduce_mechanism": "none"})
        two = make_case(t2, extra_attrs={"bucket_mb": 25.0, "overlap": 1,
                                         "allreduce_mechanism": "mpi_allreduce_buckets_thread"})
        blocking = make_case(t2, extra_attrs={"bucket_mb": 0.0, "overlap": 0, "allreduce_mechanism": "mpi_allreduce"})
        path = self.path("buckets.h5")
        write_results(path, [one, two, blocking])
        series, _ = dr.build_series(dr.load_study([path]).cases, "weak")
        by_bucket = {s.cases[-1].attrs["bucket_mb"]: s for s in series}
        self.assertEqual(sorted(by_bucket), [0.0, 25.0])
        self.assertEqual([r["ranks"] for r in by_bucket[25.0].rows], [1, 2])
        self.assertEqual(by_bucket[25.0].baseline_ranks, 1)
        self.assertIn("bucket=25MB", by_bucket[25.0].label)
        self.assertNotIn("overlap", by_bucket[25.0].label)

    def test_duplicates_and_auto_threads(self):
        rng = np.random.default_rng(9)
        auto = "dlscale run -w mlp -d native --batch 32 --scaling weak --ranks {p}"
        a = make_case(times(rng, 1, 6, 0.01), threads=8, case_key=auto.format(p=1))
        b = make_case(times(rng, 2, 6, 0.01), threads=4, case_key=auto.format(p=2))
        write_results(self.path("a.h5"), [a])
        write_results(self.path("b.h5"), [b])
        # Same file twice: the second copy is a duplicate, noted and left out.
        study = dr.load_study([self.path("a.h5"), self.path("b.h5"), self.path("a.h5")])
        self.assertEqual(requested_threads(study.cases[0]), "auto")
        series, notes = dr.build_series(study.cases, "weak")
        self.assertEqual(len(series), 1)                      # auto: 8 and 4 threads merge
        self.assertEqual([r["ranks"] for r in series[0].rows], [1, 2])
        self.assertEqual(len(notes), 1)
        self.assertIn("repeats", notes[0])

    def test_projection_columns(self):
        rng = np.random.default_rng(2)
        proj = dict(attrs={"model": "ring", "alpha_s": 1e-6, "beta_s_per_byte": 1e-9,
                           "fit_ranks": np.int64(2), "compute_s": 0.01, "grad_bytes": 4000.0,
                           "scaling": "weak"},
                    ranks=[1, 2, 4, 8, 16], step_s=[0.010, 0.011, 0.012, 0.013, 0.014],
                    efficiency=[1.0, 0.91, 0.83, 0.77, 0.71])
        cases = [make_case(times(rng, 1, 6, 0.01)),
                 make_case(times(rng, 2, 6, 0.01), projection=proj),
                 make_case(times(rng, 4, 6, 0.01), projection=dict(proj, step_s=[1.0] * 5))]
        path = self.path("proj.h5")
        write_results(path, cases)
        series, _ = dr.build_series(dr.load_study([path]).cases, "weak")
        s = series[0]
        self.assertEqual(s.projection_case.name, "0001")      # the smallest P that has one
        self.assertEqual([r["projected_step_ms"] for r in s.rows], [10.0, 11.0, 12.0])
        # Against the measured step at P0 (weak: T(P0)/T_proj(P)), not the model's own one-rank step.
        t0 = s.rows[0]["step_median_ms"]
        for r, want in zip(s.rows, (10.0, 11.0, 12.0)):
            self.assertAlmostEqual(r["projected_efficiency"], t0 / want, places=12)
        self.assertEqual(s.rows[0]["projection_fit_ranks"], 2)

    def test_a_projection_that_misses_its_own_points_is_withheld(self):
        # An injected straggler at P=2 slows every step: fitted there, the projection predicts
        # P=1 at 5.7x its measured step (as reported: "P=1 +469%"), so nothing of it is shown.
        rng = np.random.default_rng(3)
        proj = dict(attrs={"model": "ring", "alpha_s": 1e-6, "beta_s_per_byte": 1e-9,
                           "fit_ranks": np.int64(2), "compute_s": 0.057, "grad_bytes": 4000.0,
                           "scaling": "weak"},
                    ranks=[1, 2, 4, 8], step_s=[0.0569, 0.0570, 0.0571, 0.0572],
                    efficiency=[1.0, 1.0, 1.0, 1.0])
        missed = self.path("missed.h5")
        write_results(missed, [make_case(times(rng, 1, 6, 0.01, spread=0), phases=True),
                               make_case(times(rng, 2, 6, 0.0575, spread=0), phases=True, projection=proj)])
        series, _ = dr.build_series(dr.load_study([missed]).cases, "weak")
        s = series[0]
        self.assertIsNone(s.projection)
        self.assertEqual([r["projected_step_ms"] for r in s.rows], [None, None])
        self.assertRegex(s.projection_withheld, r"^projection withheld: its step-time error where measured exceeds "
                                                r"25% \(P=1 \+469%, P=2 -1%; fitted at P=2;")
        self.assertTrue(any(s.projection_withheld in n for n in s.notes))
        proc = run("summary", missed)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("projected efficiency", proc.stdout)
        self.assertIn("projection withheld", proc.stdout)
        proc = run("scaling", "--mode", "weak", missed)
        self.assertNotIn("projected ms", proc.stdout)
        # A projection within 25% of every measured point is still shown, in words too.
        fitted = self.path("fitted.h5")
        write_results(fitted, [make_case(times(rng, 1, 6, 0.0569, spread=0), phases=True),
                               make_case(times(rng, 2, 6, 0.0575, spread=0), phases=True, projection=proj)])
        series, _ = dr.build_series(dr.load_study([fitted]).cases, "weak")
        self.assertIsNotNone(series[0].projection)
        self.assertEqual(series[0].projection_withheld, "")
        proc = run("summary", fitted)
        # Against the measured P=1 step (56.90 ms): 0.9965 at P=4, above the 0.99 measured at P=2,
        # so marked, and why; 0.9948 at P=8.
        self.assertRegex(proc.stdout, r"proj\. err +proj\. E P=4/8")
        self.assertRegex(proc.stdout, r" -1% +1\.00\*/0\.99")
        self.assertIn("*: above the last measured efficiency", proc.stdout)

    def test_cli_csv_and_text(self):
        paths = self.weak_study()
        proc = run("scaling", "--mode", "weak", "--format", "csv", *paths)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = read_csv(proc.stdout)
        self.assertEqual(len(rows), 6)
        for r in rows:
            p, th = int(r["ranks"]), int(r["threads"])
            if r["status"] != "ok":
                self.assertEqual(r["speedup"], "")
                continue
            t, lo, hi, _ = step_stats(self.t[(p, th)])
            # repr() in the CSV: the exact float comes back.
            self.assertEqual(float(r["step_median_ms"]), t * 1e3)
            self.assertEqual(float(r["ci95_low_ms"]), lo * 1e3)
            t0 = step_stats(self.t[(1, th)])[0]
            self.assertAlmostEqual(float(r["efficiency"]), t0 / t if p > 1 else 1.0, delta=1e-14)
        text = run("scaling", *paths).stdout
        self.assertIn("weak scaling", text)
        self.assertIn("note: weak scaling (batch per rank fixed): efficiency E(P) = T(P0)/T(P)", text)
        self.assertIn("coverage(P0)·coverage(P)", text)
        # No strong cases: an empty table that says so, not an error.
        proc = run("scaling", "--mode", "strong", *paths)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("(no rows)", proc.stdout)


# ---------------------------------------------------------------- sweeps

class SweepTest(Workdir):
    def test_threads_and_batch(self):
        rng = np.random.default_rng(4)
        cases = []
        for driver in ("libtorch", "reference"):
            for th in (1, 2, 4):
                cases.append(make_case(times(rng, 1, 5, 0.02 / th), driver=driver, threads=th))
        for b in (8, 16, 32):
            cases.append(make_case(times(rng, 2, 5, 0.001 * b), batch_per_rank=b,
                                   workload="cnn", threads=1))
        cases.append(make_case(times(rng, 1, 5, 0.5), workload="lonely"))    # not a sweep
        path = self.path("sweep.h5")
        write_results(path, cases)
        cs = dr.load_study([path]).cases
        panels, _ = dr.build_panels(cs, "threads")
        self.assertEqual(len(panels), 1)
        self.assertEqual(panels[0].drivers, ["libtorch", "reference"])
        self.assertEqual(panels[0].xs, [1, 2, 4])
        panels, _ = dr.build_panels(cs, "batch")
        self.assertEqual([p.xs for p in panels], [[8, 16, 32]])

        proc = run("threads", "--format", "csv", path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = read_csv(proc.stdout)
        self.assertEqual(len(rows), 6)
        for r, c in zip(rows, cases[:6]):
            self.assertEqual(float(r["step_median_ms"]), step_stats(c["iter_time_s"])[0] * 1e3)
        text = run("threads", path).stdout
        self.assertIn("libtorch ms", text)
        self.assertIn("reference ms", text)
        self.assertNotIn("lonely", text)


# ---------------------------------------------------------------- phases, ranks

class PhasesRanksTest(Workdir):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(8)
        self.t = times(rng, 3, 11, 0.01)
        self.t[2] *= 1.3                                      # rank 2 straggles
        self.p = rng.random((3, 11, 4)) * 0.003
        med = {f"{n}_median_s": float(np.median(self.p[:, :, j].max(axis=0)))
               for j, n in enumerate(dr.PHASES)}
        self.path_ = self.path("ph.h5")
        write_results(self.path_, [make_case(self.t, phases=True, phase_time_s=self.p,
                                             extra_attrs={"participants": "4-6"},
                                             summary_extra=med),
                                   make_case(times(rng, 1, 4, 0.01))])

    def test_phase_medians(self):
        case = dr.load_case(self.path_, 0)
        med = dr.case_phase_medians(case)
        for j, name in enumerate(dr.PHASES):
            self.assertEqual(med[f"{name}_median_s"], float(np.median(self.p[:, :, j].max(axis=0))))
        self.assertEqual(dr.check_file(self.path_), [])
        with h5py.File(self.path_, "r+") as f:
            f["cases/0000/summary"].attrs["allreduce_median_s"] = 9.0
        problems = dr.check_file(self.path_)
        self.assertEqual(len(problems), 1)
        self.assertIn("allreduce_median_s", problems[0])

    def test_phases_cli(self):
        rows = read_csv(run("phases", "--format", "csv", self.path_).stdout)
        self.assertEqual(len(rows), 1)                        # only case 0000 has phases
        r = rows[0]
        values = [float(np.median(self.p[:, :, j].max(axis=0))) * 1e3 for j in range(4)]
        for name, v in zip(dr.PHASES, values):
            self.assertEqual(float(r[f"{name}_ms"]), v)
        self.assertEqual(float(r["sum_ms"]), values[0] + values[1] + values[2] + values[3])
        self.assertEqual(float(r["step_median_ms"]), step_stats(self.t)[0] * 1e3)

    def test_ranks_cli(self):
        rows = read_csv(run("ranks", "--format", "csv", self.path_).stdout)
        self.assertEqual(len(rows), 4)
        first = rows[:3]
        self.assertEqual([r["straggler"] for r in first], ["0", "0", "1"])
        self.assertEqual([r["world_rank"] for r in first], ["4", "5", "6"])
        for r, samples in zip(first, self.t):
            self.assertEqual(float(r["median_ms"]), float(np.median(samples)) * 1e3)
            self.assertAlmostEqual(float(r["mean_ms"]), float(np.mean(samples)) * 1e3, delta=1e-12)
            self.assertEqual(float(r["max_ms"]), float(samples.max()) * 1e3)
        m = np.median(self.t, axis=1)
        self.assertAlmostEqual(float(first[2]["straggler_ratio"]), m.max() / np.median(m),
                               delta=1e-14)

    def test_participants(self):
        self.assertEqual(parse_participants("0-3", 4), [0, 1, 2, 3])
        self.assertEqual(parse_participants("0,2,5-6", 4), [0, 2, 5, 6])
        self.assertEqual(parse_participants("", 2), [0, 1])
        self.assertEqual(parse_participants("0-9", 2), [0, 1])      # inconsistent: ignored


# ---------------------------------------------------------------- compare

class MannWhitneyTest(unittest.TestCase):
    def test_fallback_matches_scipy(self):
        if not HAVE_SCIPY:
            self.skipTest("scipy not installed")
        rng = random.Random(5)
        for _ in range(300):
            n1, n2 = rng.randint(1, 12), rng.randint(1, 30)
            digits = 1 if rng.random() < 0.3 else 9            # some samples with ties
            x = [round(rng.gauss(1.0, 0.3), digits) for _ in range(n1)]
            y = [round(rng.gauss(1.1, 0.3), digits) for _ in range(n2)]
            ours = mannwhitney.mann_whitney(x, y, use_scipy=False)
            method = mannwhitney.choose_method(n1, n2, bool(mannwhitney.tie_sizes(x + y)))
            ref = scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method=method)
            self.assertEqual(ours.u, float(ref.statistic))
            self.assertAlmostEqual(ours.p, float(ref.pvalue), delta=1e-12 + 1e-12 * ref.pvalue)

    def test_exact_distribution(self):
        # Sizes 3 and 4: C(7,3) = 35 arrangements, symmetric around 6.
        self.assertEqual(mannwhitney.exact_sf(0, 3, 4), 1.0)
        self.assertEqual(mannwhitney.exact_sf(12, 3, 4), 1 / 35)
        pmf = [mannwhitney.exact_sf(u, 3, 4) - mannwhitney.exact_sf(u + 1, 3, 4)
               for u in range(13)]
        self.assertAlmostEqual(sum(pmf), 1.0, delta=1e-15)
        for u in range(13):
            self.assertAlmostEqual(pmf[u], pmf[12 - u], delta=1e-15)
            self.assertAlmostEqual(pmf[u] * 35, round(pmf[u] * 35), delta=1e-12)
        # Complete separation of 5 vs 5: p = 2/C(10,5).
        r = mannwhitney.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], use_scipy=False)
        self.assertEqual((r.u, r.method), (0.0, "exact"))
        self.assertAlmostEqual(r.p, 2 / 252, delta=1e-15)

    def test_ties_and_degenerate(self):
        self.assertEqual(mannwhitney.average_ranks([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
        r = mannwhitney.mann_whitney([1.0] * 10, [1.0] * 12, use_scipy=False)
        self.assertEqual((r.u, r.p, r.method), (60.0, 1.0, "asymptotic"))


class CompareTest(Workdir):
    def test_compare(self):
        rng = np.random.default_rng(12)
        ta, tb = times(rng, 2, 10, 0.010), times(rng, 2, 10, 0.012)
        write_results(self.path("a.h5"), [make_case(ta), make_case(times(rng, 1, 5, 1.0),
                                                                   workload="only_a")])
        write_results(self.path("b.h5"), [make_case(tb), make_case(times(rng, 1, 5, 1.0),
                                                                   workload="only_b")])
        proc = run("compare", "--format", "csv", self.path("a.h5"), self.path("b.h5"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = read_csv(proc.stdout)
        self.assertEqual(len(rows), 1)
        r = rows[0]
        ma, mb = step_stats(ta)[0], step_stats(tb)[0]
        self.assertEqual(float(r["ratio_b_a"]), mb / ma)
        self.assertEqual((r["n_a"], r["n_b"]), ("10", "10"))
        xa, xb = ta.max(axis=0), tb.max(axis=0)
        u = sum((b > a) + 0.5 * (b == a) for b in xb for a in xa)
        self.assertEqual(float(r["u_b"]), u)
        if HAVE_SCIPY:
            ref = scipy.stats.mannwhitneyu(xb, xa, alternative="two-sided")
            self.assertAlmostEqual(float(r["p_value"]), float(ref.pvalue), delta=1e-15)
        text = run("compare", self.path("a.h5"), self.path("b.h5")).stdout
        self.assertIn("only in A:", text)
        self.assertIn("only_b", text)


# ---------------------------------------------------------------- all-reduce, tables

class AllReduceTest(Workdir):
    def test_rows(self):
        rng = np.random.default_rng(1)
        sizes = np.array([1024, 4096, 65536], dtype=np.int64)
        t = 1e-5 + 1e-9 * sizes[None, :, None] * (1 + 0.1 * rng.random((2, 3, 6)))
        ar = dict(attrs={"backend": "mpi", "ranks": np.int64(2), "dtype": "float32",
                         "iterations": np.int64(6), "warmup": np.int64(1), "case": "",
                         "alpha_s": 2e-6, "beta_s_per_byte": 1e-9},
                  bytes=sizes, time_s=t, algbw_gbps=np.array([0.1, 0.3, 0.9]),
                  busbw_gbps=np.array([0.1, 0.3, 0.9]), errors=np.zeros(3, dtype=np.int64))
        path = self.path("ar.h5")
        write_results(path, [make_case(times(rng, 2, 5, 0.01))], allreduce=[ar])
        rows = read_csv(run("allreduce", "--format", "csv", path).stdout)
        self.assertEqual([int(r["bytes"]) for r in rows], [1024, 4096, 65536])
        for r, j in zip(rows, range(3)):
            self.assertEqual(float(r["time_median_us"]), float(np.median(t[:, j, :].max(axis=0))) * 1e6)
            model = 2 * 1 * 2e-6 + 2 * 1 / 2 * sizes[j] * 1e-9
            self.assertAlmostEqual(float(r["model_us"]), model * 1e6, delta=1e-9)

    def test_malformed_allreduce(self):
        path = self.path("bad_ar.h5")
        write_results(path, [make_case([[0.01, 0.02]])], allreduce=[dict(
            attrs={"backend": "mpi", "ranks": np.int64(1)}, bytes=np.array([8, 16]),
            time_s=np.zeros((1, 3, 2)), algbw_gbps=np.zeros(2), busbw_gbps=np.zeros(2),
            errors=np.zeros(2, dtype=np.int64))])
        # A damaged benchmark is left out and named; the file's case is still read.
        proc = run("allreduce", "--format", "csv", path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr.splitlines(), [
            f"dlscale-report: warning: {path}: damaged, skipped: allreduce 0000 (dataset shapes do not match "
            "bytes[2] (time_s must be [ranks, sizes, iterations])); 1 case(s) read"])
        self.assertEqual(read_csv(proc.stdout), [])
        proc = run("check", path)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("damaged, not checked: allreduce 0000 (dataset shapes do not match", proc.stderr)


class TableTest(unittest.TestCase):
    def test_renderings(self):
        t = tables.Table(title="demo", columns=[tables.Column("name", tables.key_cell("n"), False),
                                                tables.Column("v", lambda r: tables.ms(r["v"]))],
                         rows=[{"n": "a<b", "v": 0.1 + 0.2}, {"n": "c", "v": None}],
                         csv_columns=("n", "v"), notes=["a note"])
        self.assertEqual(float(read_csv(t.csv())[0]["v"]), 0.1 + 0.2)   # exact round trip
        self.assertEqual(read_csv(t.csv())[1]["v"], "")
        self.assertIn("note: a note", t.text())
        self.assertIn("a&lt;b", t.html())
        self.assertNotIn("a note", t.csv())


# ---------------------------------------------------------------- plots and the HTML page

class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.tags = [], set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "href"):
                self.refs.append(value)


@unittest.skipUnless(HAVE_MPL, "matplotlib not installed")
class ReportTest(Workdir):
    def test_report_and_plots(self):
        rng = np.random.default_rng(6)
        ar = dict(attrs={"backend": "mpi", "ranks": np.int64(2), "dtype": "float32",
                         "iterations": np.int64(3), "warmup": np.int64(1), "case": "0000",
                         "alpha_s": 2e-6, "beta_s_per_byte": 1e-9},
                  bytes=np.array([1024, 2048]), time_s=1e-5 * (1 + rng.random((2, 2, 3))),
                  algbw_gbps=np.array([0.1, 0.2]), busbw_gbps=np.array([0.1, 0.2]),
                  errors=np.zeros(2, dtype=np.int64))
        paths = []
        for p in (1, 2):
            cases = [make_case(times(rng, p, 6, 0.01 / th), phases=True, threads=th)
                     for th in (1, 2)]
            path = self.path(f"r{p}.h5")
            write_results(path, cases, allreduce=[ar] if p == 2 else ())
            paths.append(path)
        out = self.path("report")
        proc = run("report", *paths, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        index = os.path.join(out, "index.html")
        self.assertEqual(proc.stdout.strip(), index)
        parser = _Refs()
        with open(index, encoding="utf-8") as f:
            parser.feed(f.read())
        self.assertNotIn("script", parser.tags)
        pngs = [r for r in parser.refs if r.endswith(".png")]
        for name in ("scaling_weak_speedup.png", "scaling_weak_efficiency.png",
                     "scaling_weak_efficiency_log2.png", "threads_sweep.png", "phases.png",
                     "allreduce_bandwidth.png"):
            self.assertIn(name, pngs)
        for ref in parser.refs:
            if ref.startswith("#"):
                continue
            self.assertNotIn(":", ref, ref)                   # no URLs, only local files
            full = os.path.join(out, ref)
            self.assertTrue(os.path.isfile(full), ref)
            if ref.endswith(".png"):
                with open(full, "rb") as f:
                    self.assertEqual(f.read(8), PNG_SIGNATURE, ref)

        # -o of a single command writes its figures and CSV.
        proc = run("scaling", *paths, "-o", self.path("sc"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("wrote", proc.stderr)
        self.assertTrue(os.path.getsize(self.path("sc/scaling_weak_step_time.png")) > 0)
        self.assertTrue(os.path.isfile(self.path("sc/scaling.csv")))

    def test_report_errors(self):
        other = self.path("v5.h5")
        write_results(other, [make_case([[0.01, 0.02]])], schema="dlscale/5")
        proc = run("report", other, "-o", self.path("x"))
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.splitlines()), 1)
        self.assertIn("schema 'dlscale/5' is not supported", proc.stderr)

        broken = self.path("broken.h5")
        write_results(broken, [make_case([[0.01, 0.02]])])
        with h5py.File(broken, "r+") as f:
            del f["cases/0000"].attrs["workload"]
        # A damaged case is left out with one warning line (here: the file's only case); `check`
        # refuses the file.
        for command in ("scaling", "threads", "phases", "ranks", "summary", "report"):
            proc = run(command, broken, *(["-o", self.path("broken_report")] if command == "report" else []))
            self.assertEqual(proc.returncode, 0, command)
            self.assertEqual(proc.stderr.strip(), f"dlscale-report: warning: {broken}: damaged, skipped: "
                                                  "case 0000 (lacks attribute 'workload'); 0 case(s) read")
        proc = run("check", broken)
        self.assertEqual((proc.returncode, proc.stdout), (2, ""))
        self.assertEqual(proc.stderr.strip(), f"dlscale-report: error: {broken}: damaged, not checked: "
                                              "case 0000 (lacks attribute 'workload')")
        with open(self.path("broken_report/index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("1 damaged group(s) left out", page)
        self.assertIn(f"{broken}: case 0000: damaged, not read (lacks attribute &#x27;workload&#x27;)", page)


if __name__ == "__main__":
    unittest.main()
