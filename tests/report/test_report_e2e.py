"""End-to-end test of results/dlscale-report on files the real dlscale binary writes.

A small scaling study is run under a real mpiexec (three weak-scaling jobs on 1, 2 and 3
ranks with a thread sweep and --phases, a batch sweep with two drivers, a strong-scaling
pair, a rerun to compare with); every table command is then run with --format csv and
each number is recomputed here from the raw samples with h5py and numpy, independently
of the dlscale_report package. Plots must be PNG files, the HTML page must reference only
files that exist, and unusable inputs must exit 2 with one clear line.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH; by hand, see tests/README.md.
"""

import csv
import io
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from html.parser import HTMLParser

import h5py
import numpy as np

import trace_checks
from dlscale_test import SOURCE, compiled_drivers, dlscale

REPORT = os.path.join(SOURCE, "results", "dlscale-report")

SMALL = "mnist_fnn:width=16"
SMALL_FCN = "fcn5:features=64,width=32"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PHASES = ("forward", "backward", "allreduce", "update")

try:
    import scipy.stats
    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False


# ---------------------------------------------------------------- reference computations

def ci_order(n, level=0.95):
    """k of the order-statistic CI of the median, straight from docs/metrics.md."""
    def coverage(k):
        return 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2 ** n
    ks = [k for k in range(1, (n + 1) // 2 + 1) if coverage(k) >= level]
    return (max(ks) if ks else 1), coverage(max(ks) if ks else 1)


def step_stats(t):
    """(median, ci low, ci high, coverage) of the step times of iter_time_s [ranks, iters]."""
    s = np.sort(np.asarray(t).max(axis=0))
    k, cov = ci_order(len(s))
    return float(np.median(s)), float(s[k - 1]), float(s[len(s) - k]), cov


class Raw:
    """Raw samples and attributes of every case of the files, read with plain h5py."""

    def __init__(self, paths):
        self.cases = {}
        self.projection = {}
        self.allreduce = {}
        for path in paths:
            with h5py.File(path, "r") as f:
                for name, g in f["cases"].items():
                    attrs = {k: (v.decode() if isinstance(v, bytes) else v)
                             for k, v in g.attrs.items()}
                    data = {"attrs": attrs, "iter": g["iter_time_s"][()],
                            "summary": dict(g["summary"].attrs) if "summary" in g else {}}
                    if "phase_time_s" in g:
                        data["phase"] = g["phase_time_s"][()]
                    if "exposed_allreduce_s" in g:
                        data["exposed"] = g["exposed_allreduce_s"][()]
                    if "projection" in g:
                        p = g["projection"]
                        self.projection[(path, name)] = dict(
                            ranks=p["ranks"][()].tolist(), step_s=p["step_s"][()].tolist())
                    self.cases[(path, name)] = data
                for name, g in f.get("allreduce", {}).items():
                    self.allreduce[(path, name)] = {k: g[k][()] for k in (
                        "bytes", "time_s", "algbw_gbps", "busbw_gbps")}

    def __getitem__(self, key):
        return self.cases[key]


def read_csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def table_lines(text):
    """The header, rule and rows of the first aligned table in a command's text output."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("--"))
    end = next((i for i in range(rule + 1, len(lines))
                if not lines[i] or lines[i].startswith(("note: ", "["))), len(lines))
    return lines[rule - 1:end]


def num(text):
    return None if text == "" else float(text)


def report(*args, timeout=300):
    # This interpreter (DLSCALE_PYTHON, with h5py), not whatever `env python3` finds.
    return subprocess.run([sys.executable, REPORT] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.tags = [], set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href")]


# ---------------------------------------------------------------- the study

class Jobs:
    """The files of the study; setUpModule runs dlscale once for every test class."""

    dir = None


def setUpModule():
    # The study compares the LibTorch driver with the reference driver.
    if "libtorch" not in compiled_drivers():
        raise unittest.SkipTest("this build has no libtorch driver")
    Jobs.dir = tempfile.mkdtemp(prefix="dlscale_report_e2e_")

    def path(name):
        return os.path.join(Jobs.dir, name)

    common = ["--warmup", "1", "--iterations", "6"]
    jobs = []
    Jobs.weak = []
    for p in (1, 2, 3):
        Jobs.weak.append(path(f"weak{p}.h5"))
        jobs.append((p, ["run", "-w", SMALL, "-w", SMALL_FCN, "--batch", "8", "--phases",
                         "--threads", "1,2", "--out", Jobs.weak[-1]] + common))
    Jobs.rerun = path("weak2_rerun.h5")
    jobs.append((2, ["run", "-w", SMALL, "-w", SMALL_FCN, "--batch", "8", "--phases",
                     "--threads", "1,2", "--out", Jobs.rerun] + common))
    Jobs.batch = path("batch.h5")
    jobs.append((2, ["run", "-w", SMALL, "-d", "libtorch,reference", "--batch", "4,8,16",
                     "--threads", "1", "--out", Jobs.batch] + common))
    Jobs.strong = []
    for p in (1, 2):
        Jobs.strong.append(path(f"strong{p}.h5"))
        jobs.append((p, ["run", "-w", SMALL_FCN, "--scaling", "strong", "--batch", "16",
                         "--threads", "1", "--out", Jobs.strong[-1]] + common))
    for ranks, args in jobs:
        proc = dlscale(args, ranks)
        if proc.returncode != 0:
            raise RuntimeError(f"dlscale {' '.join(args)} on {ranks} rank(s) failed:\n"
                               f"{proc.stderr}")
    Jobs.all = Jobs.weak + [Jobs.rerun, Jobs.batch] + Jobs.strong
    Jobs.raw = Raw(Jobs.all)


def tearDownModule():
    if Jobs.dir:
        shutil.rmtree(Jobs.dir, ignore_errors=True)


class Study(unittest.TestCase):
    """Base of the test classes: the study's files and helpers."""

    @classmethod
    def setUpClass(cls):
        for name in ("weak", "rerun", "batch", "strong", "all", "raw"):
            setattr(cls, name, getattr(Jobs, name))

    @classmethod
    def path(cls, name):
        return os.path.join(Jobs.dir, name)

    def csv_of(self, *args):
        proc = report(*args, "--format", "csv")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return read_csv(proc.stdout)

    def assertClose(self, got, want, rel=1e-12, msg=None):
        self.assertIsNotNone(got, msg)
        self.assertTrue(math.isclose(got, want, rel_tol=rel, abs_tol=1e-15),
                        f"{got!r} != {want!r} {msg or ''}")

    def assertPngs(self, paths):
        self.assertTrue(paths)
        for p in paths:
            self.assertTrue(os.path.getsize(p) > 100, p)
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), PNG_SIGNATURE, p)

    def repeated_medians(self):
        """The medians of each configuration that the study's files measured more than once (the
        rerun of the 2-rank job, and strong scaling's P=2 against weak scaling's: one batch per
        rank), straight from iter_time_s."""
        groups = {}
        for path in self.all:
            with h5py.File(path, "r") as f:
                for c in f["cases"].values():
                    a = c.attrs
                    if a["status"] != "ok":
                        continue
                    key = tuple(str(a[k]) for k in ("workload", "driver", "precision", "ranks", "batch_per_rank",
                                                    "threads", "bucket_mb"))
                    groups.setdefault(key, []).append(step_stats(c["iter_time_s"][()])[0])
        return [g for g in groups.values() if len(g) > 1]

    def written(self, proc):
        """Files that a command with -o names on stderr."""
        prefix = "dlscale-report: wrote "
        return [line[len(prefix):] for line in proc.stderr.splitlines() if line.startswith(prefix)]


class Tables(Study):
    def test_summary_matches_raw_samples(self):
        rows = self.csv_of("summary", *self.all)
        self.assertEqual(len(rows), len(self.raw.cases))
        for r in rows:
            c = self.raw[(r["file"], r["case"])]
            med, lo, hi, _ = step_stats(c["iter"])
            self.assertEqual(r["status"], "ok")
            self.assertClose(num(r["step_median_ms"]), med * 1e3)
            self.assertClose(num(r["ci95_low_ms"]), lo * 1e3)
            self.assertClose(num(r["ci95_high_ms"]), hi * 1e3)
            self.assertClose(num(r["samples_per_s"]), c["attrs"]["global_batch"] / med)
            self.assertClose(num(r["achieved_gflops"]),
                             c["attrs"]["train_flops_per_step"] / med * 1e-9)
            # Exposed all-reduce: on P > 1 ranks only, the median of the slowest rank's.
            if c["attrs"]["ranks"] > 1:
                self.assertEqual(c["exposed"].shape, c["iter"].shape)
                self.assertClose(num(r["exposed_allreduce_ms"]),
                                 float(np.median(c["exposed"].max(axis=0))) * 1e3)
                self.assertTrue((c["exposed"] > 0).all() and (c["exposed"] < c["iter"]).all())
            else:
                self.assertNotIn("exposed", c)
                self.assertEqual(r["exposed_allreduce_ms"], "")
        proc = report("check", *self.all)
        self.assertEqual(proc.returncode, 0, proc.stdout)

    def test_weak_scaling_merges_three_jobs(self):
        rows = self.csv_of("scaling", "--mode", "weak", *self.weak)
        series = {}
        for r in rows:
            series.setdefault(r["series"], []).append(r)
        # 2 workloads × 2 thread counts, each at P = 1, 2, 3 from three files.
        self.assertEqual(len(series), 4)
        for name, rs in series.items():
            self.assertEqual([int(r["ranks"]) for r in rs], [1, 2, 3], name)
            self.assertEqual(sorted(r["file"] for r in rs), sorted(self.weak))
            base = self.raw[(rs[0]["file"], rs[0]["case"])]
            t0, lo0, hi0, cov0 = step_stats(base["iter"])
            for r in rs:
                c = self.raw[(r["file"], r["case"])]
                a = c["attrs"]
                self.assertEqual((a["workload"], a["threads"], a["scaling"]),
                                 (base["attrs"]["workload"], base["attrs"]["threads"], "weak"))
                p = int(r["ranks"])
                t, lo, hi, cov = step_stats(c["iter"])
                self.assertClose(num(r["step_median_ms"]), t * 1e3)
                self.assertClose(num(r["ci95_low_ms"]), lo * 1e3)
                self.assertClose(num(r["ci95_high_ms"]), hi * 1e3)
                self.assertClose(num(r["samples_per_s"]), a["global_batch"] / t)
                self.assertEqual(num(r["ideal_speedup"]), p / 1)
                if p == 1:
                    self.assertEqual((num(r["speedup"]), num(r["efficiency"])), (1.0, 1.0))
                    continue
                # docs/metrics.md: weak E(P) = T(P0)/T(P); scaled speedup (P/P0)·E(P).
                self.assertClose(num(r["efficiency"]), t0 / t)
                self.assertClose(num(r["efficiency_low"]), lo0 / hi)
                self.assertClose(num(r["efficiency_high"]), hi0 / lo)
                self.assertClose(num(r["speedup"]), p * t0 / t)
                self.assertClose(num(r["speedup_low"]), p * lo0 / hi)
                self.assertClose(num(r["speedup_high"]), p * hi0 / lo)
                self.assertClose(num(r["coverage_min"]), cov0 * cov)
            # Projected values: the projection of the smallest P that has one, unless it misses a
            # measured step by more than 25% (docs/metrics.md#projection): then none.
            owners = [(int(r["ranks"]), (r["file"], r["case"])) for r in rs
                      if (r["file"], r["case"]) in self.raw.projection]
            if owners:
                proj = self.raw.projection[min(owners)[1]]
                misses = [abs(proj["step_s"][proj["ranks"].index(int(r["ranks"]))] * 1e3
                              / num(r["step_median_ms"]) - 1) > 0.25
                          for r in rs if r["step_median_ms"] and int(r["ranks"]) in proj["ranks"]]
                if any(misses):
                    owners = []
            for r in rs:
                if not owners:
                    self.assertEqual(r["projected_step_ms"], "")
                    continue
                p = int(r["ranks"])
                if p in proj["ranks"]:
                    self.assertClose(num(r["projected_step_ms"]),
                                     proj["step_s"][proj["ranks"].index(p)] * 1e3)

    def test_strong_scaling(self):
        rows = self.csv_of("scaling", "--mode", "strong", *self.strong)
        self.assertEqual([int(r["ranks"]) for r in rows], [1, 2])
        t0 = step_stats(self.raw[(rows[0]["file"], rows[0]["case"])]["iter"])
        t2 = step_stats(self.raw[(rows[1]["file"], rows[1]["case"])]["iter"])
        self.assertEqual([int(r["global_batch"]) for r in rows], [16, 16])
        self.assertEqual([int(r["batch_per_rank"]) for r in rows], [16, 8])
        # docs/metrics.md: S = T(P0)/T(P), E = T(P0)·P0/(P·T(P)).
        self.assertClose(num(rows[1]["speedup"]), t0[0] / t2[0])
        self.assertClose(num(rows[1]["efficiency"]), t0[0] * 1 / (2 * t2[0]))
        self.assertClose(num(rows[1]["speedup_low"]), t0[1] / t2[2])
        self.assertClose(num(rows[1]["efficiency_high"]), t0[2] / (2 * t2[1]))

    def test_thread_and_batch_sweeps(self):
        rows = self.csv_of("threads", *self.weak)
        self.assertEqual(len(rows), 2 * 3 * 2)        # 2 workloads × 3 rank counts × 2 threads
        self.assertEqual({r["threads"] for r in rows}, {"1", "2"})
        for r in rows:
            c = self.raw[(r["file"], r["case"])]
            self.assertEqual(int(r["threads"]), c["attrs"]["threads"])
            self.assertClose(num(r["step_median_ms"]), step_stats(c["iter"])[0] * 1e3)
        rows = self.csv_of("batch", self.batch)
        self.assertEqual(len(rows), 2 * 3)            # 2 drivers × 3 batches
        self.assertEqual({(r["driver"], r["batch_per_rank"]) for r in rows},
                         {(d, b) for d in ("libtorch", "reference") for b in ("4", "8", "16")})
        for r in rows:
            c = self.raw[(r["file"], r["case"])]
            self.assertClose(num(r["step_median_ms"]), step_stats(c["iter"])[0] * 1e3)
            self.assertClose(num(r["ci95_high_ms"]), step_stats(c["iter"])[2] * 1e3)
        text = report("batch", self.batch).stdout
        self.assertIn("libtorch ms", text)
        self.assertIn("reference ms", text)

    def test_phases(self):
        rows = self.csv_of("phases", *self.weak)
        self.assertEqual(len(rows), 12)
        for r in rows:
            c = self.raw[(r["file"], r["case"])]
            values = []
            for j, name in enumerate(PHASES):
                v = float(np.median(c["phase"][:, :, j].max(axis=0)))
                values.append(v * 1e3)
                self.assertClose(num(r[f"{name}_ms"]), v * 1e3)
                # The C++ side records the same statistic when it is new enough.
                if f"{name}_median_s" in c["summary"]:
                    self.assertClose(c["summary"][f"{name}_median_s"], v, rel=1e-9)
            self.assertClose(num(r["sum_ms"]), sum(values))
            self.assertClose(num(r["step_median_ms"]), step_stats(c["iter"])[0] * 1e3)

    def test_ranks(self):
        rows = self.csv_of("ranks", self.weak[2])
        self.assertEqual(len(rows), 4 * 3)
        for r in rows:
            t = self.raw[(r["file"], r["case"])]["iter"]
            samples = t[int(r["rank"])]
            self.assertClose(num(r["median_ms"]), float(np.median(samples)) * 1e3)
            self.assertClose(num(r["mean_ms"]), float(np.mean(samples)) * 1e3)
            self.assertClose(num(r["max_ms"]), float(samples.max()) * 1e3)
            medians = np.median(t, axis=1)
            self.assertEqual(r["straggler"], "1" if int(r["rank"]) == int(np.argmax(medians)) else "0")
            self.assertClose(num(r["straggler_ratio"]), medians.max() / np.median(medians))

    def test_compare(self):
        rows = self.csv_of("compare", self.weak[1], self.rerun)
        self.assertEqual(len(rows), 4)
        for r in rows:
            a = self.raw[(r["file_a"], r["case_a"])]
            b = self.raw[(r["file_b"], r["case_b"])]
            self.assertEqual(a["attrs"]["workload"], b["attrs"]["workload"])
            self.assertEqual(a["attrs"]["threads"], b["attrs"]["threads"])
            xa, xb = a["iter"].max(axis=0), b["iter"].max(axis=0)
            self.assertClose(num(r["ratio_b_a"]), float(np.median(xb) / np.median(xa)))
            self.assertEqual(num(r["u_b"]), sum((y > x) + 0.5 * (y == x) for y in xb for x in xa))
            p = num(r["p_value"])
            self.assertTrue(0 <= p <= 1)
            if HAVE_SCIPY:
                self.assertClose(p, float(scipy.stats.mannwhitneyu(xb, xa).pvalue))

    def test_allreduce(self):
        rows = self.csv_of("allreduce", *self.weak)
        if not self.raw.allreduce:
            self.assertEqual(rows, [])
            self.skipTest("this dlscale writes no /allreduce groups")
        self.assertTrue(rows)
        for r in rows:
            ar = self.raw.allreduce[(r["file"], r["group"])]
            j = ar["bytes"].tolist().index(int(r["bytes"]))
            self.assertClose(num(r["time_median_us"]),
                             float(np.median(ar["time_s"][:, j, :].max(axis=0))) * 1e6)
            self.assertEqual(num(r["algbw_gbps"]), float(ar["algbw_gbps"][j]))
            # docs/metrics.md: algbw = bytes / (median of the slowest rank's time), GB = 1e9 B.
            self.assertClose(num(r["algbw_gbps"]), int(r["bytes"]) / num(r["time_median_us"]) * 1e-3,
                             rel=1e-9)


class Figures(Study):
    def test_each_command_writes_pngs(self):
        for args, expected in (
                (["scaling", "--mode", "weak"] + self.weak,
                 ["scaling_weak_speedup.png", "scaling_weak_efficiency.png",
                  "scaling_weak_efficiency_log2.png", "scaling_weak_step_time.png"]),
                (["scaling", "--mode", "strong"] + self.strong, ["scaling_strong_speedup.png"]),
                (["threads"] + self.weak, ["threads_sweep.png"]),
                (["batch", self.batch], ["batch_sweep.png"]),
                (["phases"] + self.weak, ["phases.png"]),
                (["ranks", self.weak[1]], ["ranks_0000.png"])):
            out = self.path(f"fig_{args[0]}_{len(args)}")
            proc = report(*args, "-o", out)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            written = self.written(proc)
            names = [os.path.basename(p) for p in written]
            for name in expected:
                self.assertIn(name, names, args[0])
            self.assertPngs([p for p in written if p.endswith(".png")])
            self.assertTrue(any(p.endswith(".csv") for p in written))

    def test_html_report(self):
        out = self.path("report")
        proc = report("report", *self.all, "-o", out, "--compare-to", self.weak[1])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        index = os.path.join(out, "index.html")
        self.assertEqual(proc.stdout.strip(), index)
        with open(index, encoding="utf-8") as f:
            page = f.read()
        parser = _Refs()
        parser.feed(page)
        self.assertNotIn("script", parser.tags)
        self.assertNotIn("http://", page)
        self.assertNotIn("https://", page)
        files = [r for r in parser.refs if not r.startswith("#")]
        for ref in files:
            self.assertFalse(os.path.isabs(ref) or ":" in ref or ".." in ref, ref)
            self.assertTrue(os.path.isfile(os.path.join(out, ref)), ref)
        pngs = [os.path.join(out, r) for r in files if r.endswith(".png")]
        self.assertPngs(pngs)
        names = {os.path.basename(p) for p in pngs}
        for name in ("scaling_weak_speedup.png", "scaling_weak_efficiency_log2.png",
                     "scaling_strong_efficiency.png", "threads_sweep.png", "batch_sweep.png",
                     "phases.png"):
            self.assertIn(name, names)
        self.assertTrue(any(n.startswith("ranks_") for n in names))
        # A timeline for every --phases case (the weak jobs' and the rerun's), after the diagnosis.
        with_timeline = sum(1 for path in self.weak + [self.rerun] for _ in h5py.File(path, "r")["cases"])
        self.assertEqual(len([n for n in names if n.startswith("timeline_")]), with_timeline)
        self.assertLess(page.index('id="diagnosis"'), page.index('id="timelines"'))
        for anchor in ("summary", "scaling-weak", "scaling-strong", "threads-sweep",
                       "batch-sweep", "phases", "ranks", "compare", "timelines"):
            self.assertIn(f'id="{anchor}"', page)
        self.assertIn(f"all {len(self.raw.cases)} case(s) consistent", page)
        # The CSV next to the page holds the same numbers as the command's CSV.
        with open(os.path.join(out, "scaling_weak.csv")) as f:
            page_rows = read_csv(f.read())
        self.assertEqual(len(page_rows), len(self.csv_of("scaling", "--mode", "weak", *self.all)))

        # The first screen: the overview figure, then the diagnosis table, before any detail
        # section, and few words before it.
        self.assertIn("overview.png", names)
        self.assertLess(page.index("overview.png"), page.index('id="why"'))
        self.assertLess(page.index('id="why"'), page.index('id="consistency"'))
        self.assertIn('id="diagnosis"', page)
        first = page.index("<table")
        self.assertIn("<caption>scaling diagnosis", page[first:first + 200])
        before = re.sub(r"<[^>]+>", " ", page[page.index("<body>"):first])
        self.assertLessEqual(len(before.split()), 250, before)
        # The rerun of the 2-rank job measured each of its configurations twice: the largest
        # spread between the medians of one configuration is the study's run-to-run spread.
        spread = max(max(g) / min(g) - 1 for g in self.repeated_medians())
        self.assertIn(f"run-to-run spread {100 * spread:.1f}%", page)
        # No empty table: every table has body rows (a section without data is one line).
        tables = page.split("<table")[1:]
        self.assertTrue(tables)
        for table in tables:
            body = table.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
            self.assertIn("<tr", body, table[:300])
        self.assertNotIn("(no rows)", page)
        # No broken image: each <img> is a PNG file with a width and a height (IHDR).
        for ref in (r for r in files if r.endswith(".png")):
            with open(os.path.join(out, ref), "rb") as f:
                head = f.read(24)
            self.assertEqual(head[12:16], b"IHDR", ref)
            self.assertGreater(int.from_bytes(head[16:20], "big"), 0, ref)
            self.assertGreater(int.from_bytes(head[20:24], "big"), 0, ref)

        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            self.skipTest("chromium not installed: no rendering check")
        profile = tempfile.mkdtemp(prefix="chromium_", dir=Jobs.dir)

        def screenshot(name, page_path, height):
            shot = self.path(name)
            proc = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--user-data-dir={profile}", f"--screenshot={shot}",
                 f"--window-size=1280,{height}", f"file://{page_path}"],
                capture_output=True, text=True, timeout=180)
            self.assertTrue(os.path.isfile(shot), proc.stderr[-2000:])
            return shot

        self.assertPngs([screenshot("report.png", index, 2000)])
        # The timelines section rendered: the section alone, with the page's head and the same
        # figure files, must paint its figures (a fragment URL screenshots blank in headless mode).
        start = page.index('<h2 id="timelines">')
        end = page.index("<h2 ", start + 1)
        section = os.path.join(out, "timelines_only.html")
        with open(section, "w", encoding="utf-8") as f:
            f.write(page[:page.index("<body>") + len("<body>")] + page[start:end] + "</body></html>\n")
        shot = screenshot("report_timelines.png", section, 1400)
        import matplotlib.image
        pixels = matplotlib.image.imread(shot)[:, :, :3]
        painted = float(np.mean(np.any(pixels < 0.8, axis=2)))
        self.assertGreater(painted, 0.03, "the timelines section rendered (nearly) blank")


class Timelines(Study):
    """dlscale-report trace on the 2-rank --phases job: Chrome trace JSON, per rank too, and OTF2."""

    def test_trace_files(self):
        import json
        source = self.weak[1]
        out = self.path("trace")
        proc = report("trace", source, "-o", out, "--per-rank")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        written = proc.stdout.split()
        with h5py.File(source, "r") as f:
            cases = {name: (f["cases"][name]["phase_time_s"][()], f["cases"][name]["bucket_start_s"].shape[2],
                            f["cases"][name]["timeline/clock_bound_s"][()]) for name in f["cases"]}
        self.assertTrue(cases)
        for name, (phases, buckets, bounds) in cases.items():
            stem = os.path.join(out, f"case-{name}")
            self.assertIn(f"{stem}.json", written)
            with open(f"{stem}.json") as f:
                doc = json.load(f)
            trace_checks.validate_trace_format(self, doc)
            self.assertEqual(doc["distributedInfo"]["world_size"], 2)
            # One reduction per bucket on each rank in each iteration.
            reductions = trace_checks.check_timeline(self, doc, phases)
            self.assertEqual(set(reductions.values()), {buckets}, reductions)
            self.assertEqual(len(reductions), 2 * phases.shape[1])
            # Ranks on one host: the bound is the ping-pong's half round trip, and is recorded.
            self.assertAlmostEqual(doc["otherData"]["clock_bound_us"], bounds.max() * 1e6, places=2)
            for r in range(2):
                self.assertIn(f"{stem}-rank-{r}.json", written)
                with open(f"{stem}-rank-{r}.json") as f:
                    mine = json.load(f)
                trace_checks.validate_trace_format(self, mine)
                self.assertEqual(mine["distributedInfo"]["rank"], r)
                self.assertEqual({e["pid"] for e in mine["traceEvents"]}, {r})
            if trace_checks.otf2_print() is None:
                continue
            archive = os.path.join(f"{stem}.otf2", "traces.otf2")
            self.assertIn(archive, written)
            trace_checks.check_otf2(self, doc, archive)

    def test_times_that_are_not_finite_are_left_out(self):
        # An infinite phase time (a damaged or overflowed record) has no place on a timeline: its
        # events are left out with a note, and the file stays JSON (no Infinity, no NaN).
        import json
        source = self.path("infinite.h5")
        shutil.copyfile(self.weak[1], source)
        with h5py.File(source, "r+") as f:
            name = sorted(f["cases"])[0]
            phases = f["cases"][name]["phase_time_s"]
            phases[1, 0, 1] = np.inf
        out = self.path("trace_infinite")
        proc = report("trace", source, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"case {name}: ", proc.stdout + proc.stderr)
        self.assertIn("whose times are not finite", proc.stdout + proc.stderr)

        def refuse(constant):
            raise ValueError(f"{constant} is not JSON")
        with open(os.path.join(out, f"case-{name}.json")) as f:
            doc = json.load(f, parse_constant=refuse)
        self.assertGreater(doc["otherData"]["left_out_events"], 0)
        self.assertTrue(all(e.get("ts") is None or np.isfinite(e["ts"]) for e in doc["traceEvents"]))

    def test_a_file_without_phases_has_no_timeline(self):
        proc = report("trace", self.batch, "-o", self.path("no_trace"))
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("no case has a timeline", proc.stderr)
        self.assertIn("--phases", proc.stderr)


def diagnosis_parts(iter_time_s, phase_time_s):
    """The median iteration's step parts, straight from docs/metrics.md (Scaling diagnosis)."""
    t, ph = np.asarray(iter_time_s), np.asarray(phase_time_s)
    step = t.max(axis=0)
    fb = ph[:, :, 0] + ph[:, :, 1]
    reduced = (fb + ph[:, :, 2]).max(axis=0)
    parts = {"step": step, "compute": fb.mean(axis=0), "straggler": fb.max(axis=0) - fb.mean(axis=0),
             "allreduce": reduced - fb.max(axis=0), "other": step - reduced}
    order = np.argsort(step, kind="stable")
    middle = [order[(len(step) - 1) // 2], order[len(step) // 2]]
    return {k: float(np.mean(v[middle])) for k, v in parts.items()}


class Diagnosis(Study):
    PARTS = ("compute", "straggler", "allreduce", "other")

    def test_parts_sum_to_the_gap_and_come_from_the_phases(self):
        rows = self.csv_of("diagnosis", *self.weak)
        where = {(r["series"], int(r["ranks"])): (r["file"], r["case"])
                 for r in self.csv_of("scaling", "--mode", "weak", *self.weak)}
        # 2 workloads × 2 thread counts, each diagnosed at P = 2 and 3 against P = 1.
        self.assertEqual(sorted({(r["series"], int(r["ranks"])) for r in rows}),
                         sorted(k for k in where if k[1] > 1))
        for r in rows:
            p = int(r["ranks"])
            base = self.raw[where[(r["series"], 1)]]
            case = self.raw[where[(r["series"], p)]]
            b, c = (diagnosis_parts(x["iter"], x["phase"]) for x in (base, case))
            step, gap = num(r["step_ms"]) / 1e3, num(r["gap_ms"]) / 1e3
            # The step and the gap are those of the scaling table (median step, weak: ideal T(1)).
            self.assertClose(step, step_stats(case["iter"])[0], rel=1e-9)
            self.assertClose(gap, step - step_stats(base["iter"])[0], rel=1e-9)
            for k in self.PARTS:
                self.assertClose(num(r[f"{k}_ms"]) / 1e3, c[k], rel=1e-9, msg=k)
                self.assertClose(num(r[f"{k}_lost_ms"]) / 1e3, c[k] - b[k], rel=1e-9, msg=k)
            lost = sum(num(r[f"{k}_lost_ms"]) / 1e3 for k in self.PARTS)
            self.assertLess(abs(lost - gap), 0.01 * step, r["series"])
            shares = sum(num(r[f"{k}_lost_share"]) for k in self.PARTS)
            self.assertAlmostEqual(shares, 1 - num(r["efficiency"]), places=9)
            # A 2- or 3-rank step reduces gradients: some exposed all-reduce is lost.
            self.assertGreater(c["allreduce"], 0)
        # One row per series and rank count in the terminal summary too, within 120 columns, the
        # parts in one fixed order and as the CSV's shares.
        proc = report("summary", *self.weak)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertLessEqual(max(len(line) for line in proc.stdout.splitlines()), 120)
        block = next(b for b in proc.stdout.split("\n\n") if b.startswith("scaling diagnosis"))
        table = table_lines(block)
        self.assertRegex(table[0], r"^series +P +E +compute +straggler +all-reduce +other")
        self.assertEqual(len(table) - 2, len(rows))
        shown = {re.search(r"  (\d+)  +(\d\.\d\d)  ", line).groups() for line in table[2:]}  # P and E
        self.assertEqual(shown, {(r["ranks"], f"{num(r['efficiency']):.2f}") for r in rows})

    def test_one_rank_count_gets_a_note(self):
        out = self.path("one_rank_count")
        proc = report("report", self.weak[1], "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("needs two rank counts with ok cases (has P=2)", page)
        self.assertIn("not shown, no data: scaling diagnosis", page)
        proc = report("summary", self.weak[1])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(" ".join(proc.stdout.split()).count("needs two rank counts"), 4, proc.stdout)


class BadInput(Study):
    def assertOneLineError(self, proc, fragment):
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("dlscale-report: error: "), lines[0])
        self.assertIn(fragment, lines[0])

    def commands(self, path):
        return (["summary", path], ["scaling", self.weak[0], path], ["phases", path],
                ["report", path, "-o", self.path("bad_report")])

    def test_other_schema_version(self):
        v2 = self.path("schema2.h5")
        shutil.copy(self.weak[1], v2)
        with h5py.File(v2, "r+") as f:
            f.attrs["schema"] = "dlscale/5"
        for args in self.commands(v2):
            self.assertOneLineError(report(*args), f"{v2}: schema 'dlscale/5' is not supported "
                                    "(expected dlscale/1, dlscale/2, dlscale/3 or dlscale/4)")

    def test_foreign_hdf5(self):
        foreign = self.path("foreign.h5")
        with h5py.File(foreign, "w") as f:
            f["data"] = np.arange(10)
            f.attrs["title"] = "not ours"
        for args in self.commands(foreign):
            self.assertOneLineError(report(*args), "not a dlscale results file")

    def test_truncated_hdf5(self):
        truncated = self.path("truncated.h5")
        with open(self.weak[1], "rb") as f:
            data = f.read()
        with open(truncated, "wb") as f:
            f.write(data[:len(data) // 2])
        for args in self.commands(truncated):
            self.assertOneLineError(report(*args), truncated)

    def test_malformed_case(self):
        broken = self.path("broken.h5")
        shutil.copy(self.weak[1], broken)
        with h5py.File(broken, "r+") as f:
            del f["cases/0001/iter_time_s"]
            f["cases/0001/iter_time_s"] = np.zeros(6)
        # The damaged case is left out with one warning line; the rest of the file is reported.
        for args in self.commands(broken):
            proc = report(*args)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            lines = proc.stderr.splitlines()
            self.assertEqual(len(lines), 1, proc.stderr)
            self.assertTrue(lines[0].startswith(f"dlscale-report: warning: {broken}: damaged, skipped: case 0001 "
                                                "(iter_time_s has shape (6,), expected [ranks, iterations]"), lines[0])
        self.assertOneLineError(report("check", broken), f"{broken}: damaged, not checked: case 0001 (iter_time_s")

    def test_not_hdf5(self):
        text = self.path("notes.txt")
        with open(text, "w") as f:
            f.write("step times\n")
        for args in self.commands(text):
            self.assertOneLineError(report(*args), f"{text}: not an HDF5 file")


if __name__ == "__main__":
    unittest.main()
