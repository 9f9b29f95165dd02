"""Tests of results/dlscale-report and its dlscale_report package.

Run: /usr/bin/python3 -m unittest discover -s tests/python

Small dlscale/1 files are written here with h5py; their summary attributes
come from reference_stats() below, an independent numpy implementation of
the statistics definitions, so the package's recomputation is checked
against a second implementation rather than against itself.
"""

import csv
import io
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results")
RESULTS_DIR = os.path.normpath(RESULTS_DIR)
SCRIPT = os.path.join(RESULTS_DIR, "dlscale-report")
sys.path.insert(0, RESULTS_DIR)

import dlscale_report as dr  # noqa: E402  (needs the path above)


# ---------------------------------------------------------------- reference

def reference_ci(x_sorted):
    """CI of the median straight from the definition, with float binomial sums."""
    n = len(x_sorted)

    def coverage(k):
        cdf = sum(math.comb(n, j) for j in range(k)) / 2.0 ** n
        return 1 - 2 * cdf

    ks = [k for k in range(1, (n + 1) // 2 + 1) if coverage(k) >= 0.95]
    k = max(ks) if ks else 1
    return x_sorted[k - 1], x_sorted[n - k], coverage(k)


def reference_stats(iter_time_s, global_batch, flops):
    t = np.asarray(iter_time_s, dtype=np.float64)
    s = t.max(axis=0)
    n = s.size
    med = float(np.median(s))
    mean = float(np.mean(s))
    std = float(np.std(s, ddof=1)) if n > 1 else 0.0
    lo, hi, cov = reference_ci(np.sort(s))
    per_rank = np.median(t, axis=1)
    return {
        "step_median_s": med,
        "step_p05_s": float(np.percentile(s, 5)),
        "step_p95_s": float(np.percentile(s, 95)),
        "step_mean_s": mean,
        "step_std_s": std,
        "step_cv": std / mean,
        "ci95_low_s": float(lo),
        "ci95_high_s": float(hi),
        "ci_coverage": cov,
        "samples_per_s": global_batch / med,
        "achieved_flops": flops / med,
        "straggler_ratio": float(per_rank.max() / np.median(per_rank)),
    }


def table_lines(text):
    """The header, rule and rows of the first aligned table in a command's text output (after
    its title and "every row:" lines, before its footnotes and notes)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("--"))
    end = next((i for i in range(rule + 1, len(lines))
                if not lines[i] or lines[i].startswith(("note: ", "["))), len(lines))
    return lines[rule - 1:end]


# ---------------------------------------------------------------- file writer


def make_case(iter_time_s=None, status="ok", message="", phases=False, ranks=None,
              iterations=None, workload="mlp", batch_per_rank=32, flops=1.2e9,
              driver="native", threads=4, scaling="weak", global_batch=None,
              case_key=None, phase_time_s=None, projection=None, extra_attrs=None,
              summary_extra=None):
    """Description of one case for write_results(); iter_time_s is [ranks, iterations].

    global_batch defaults to ranks × batch_per_rank; case_key to a command line
    with --threads (so requested_threads() sees the number); phase_time_s to a
    40/40/10/10 split of iter_time_s when phases is set; projection is a dict
    with attrs, ranks, step_s, efficiency; extra_attrs are more case attributes
    (participants, bucket_mb, overlap); summary_extra more summary attributes.
    """
    if iter_time_s is not None:
        iter_time_s = np.asarray(iter_time_s, dtype=np.float64)
        ranks, iterations = iter_time_s.shape
    return dict(iter_time_s=iter_time_s, status=status, message=message, phases=phases,
                ranks=ranks, iterations=iterations, workload=workload,
                batch_per_rank=batch_per_rank, flops=flops, driver=driver, threads=threads,
                scaling=scaling, global_batch=global_batch, case_key=case_key,
                phase_time_s=phase_time_s, projection=projection,
                extra_attrs=extra_attrs or {}, summary_extra=summary_extra or {})


def write_results(path, cases, schema="dlscale/1", bytes_strings=False, allreduce=(), hosts=None):
    """Write a small file following the dlscale/1 schema.

    allreduce: dicts with attrs, bytes, time_s[ranks, n, iters], algbw_gbps,
    busbw_gbps, errors, written as /allreduce/NNNN. hosts: the host of each world
    rank in /system/ranks (default: every rank on node0); its length is the world size.
    """
    # Fixed-length byte strings exercise the reader's bytes tolerance.
    s = (lambda v: np.bytes_(v.encode())) if bytes_strings else (lambda v: v)
    world = len(hosts) if hosts else max(c["ranks"] for c in cases)
    hosts = list(hosts) if hosts else ["node0"] * world
    with h5py.File(path, "w") as f:
        if schema is not None:
            f.attrs["schema"] = s(schema)
        f.attrs["dlscale_version"] = s("0.1.0")
        f.attrs["git_commit"] = s("0123abcd")
        f.attrs["created_utc"] = s("2024-01-01T00:00:00Z")
        f.attrs["command_line"] = s("dlscale run --config test.toml")
        f.attrs["world_size"] = np.int64(world)
        f.attrs["config"] = s("[run]\niterations = 10\n")
        vstr = h5py.string_dtype()
        rank_t = np.dtype([("rank", "i4"), ("host", vstr), ("local_rank", "i4"),
                           ("cpu_affinity", vstr), ("numa_node", "i4"), ("device", vstr),
                           ("threads", "i4")])
        f.create_dataset("system/ranks", data=np.array(
            [(r, hosts[r], hosts[:r].count(hosts[r]), f"{r * 4}-{r * 4 + 3}", 0, "cpu", 4)
             for r in range(world)],
            dtype=rank_t))
        f.create_group("system/software").attrs["compiler"] = s("g++ 12")
        f.create_group("system/environment").attrs["OMP_NUM_THREADS"] = s("4")
        for i, c in enumerate(cases):
            g = f.create_group(f"cases/{i:04d}")
            ranks, its = c["ranks"], c["iterations"]
            global_batch = c.get("global_batch") or ranks * c["batch_per_rank"]
            key = c.get("case_key") or (f"dlscale run -w {c['workload']} -d {c.get('driver', 'native')}"
                                        f" --threads {c.get('threads', 4)} --ranks {ranks}")
            a = g.attrs
            for name, value in (("workload", c["workload"]), ("driver", c.get("driver", "native")),
                                ("device_type", "cpu"), ("precision", "fp32"),
                                ("scaling", c.get("scaling", "weak")), ("status", c["status"]),
                                ("message", c["message"]), ("started_utc", "2024-01-01T00:00:01Z"),
                                ("case_key", key)):
                a[name] = s(value)
            for name, value in (("ranks", ranks), ("batch_per_rank", c["batch_per_rank"]),
                                ("global_batch", global_batch), ("threads", c.get("threads", 4)),
                                ("warmup", 2), ("iterations", its), ("seed", 42),
                                ("params", 1000), ("grad_bytes", 4000),
                                ("phases", 1 if c["phases"] else 0)):
                a[name] = np.int64(value)
            a["train_flops_per_step"] = np.float64(c["flops"])
            a["wall_s"] = np.float64(1.5)
            for name, value in c.get("extra_attrs", {}).items():
                a[name] = s(value) if isinstance(value, str) else value
            t = c["iter_time_s"]
            g.create_dataset("iter_time_s", data=t if t is not None else np.zeros((ranks, 0)))
            g.create_dataset("memory", data=np.array(
                [(1 << 20, 0)] * ranks,
                dtype=[("host_peak_rss_bytes", "i8"), ("device_peak_bytes", "i8")]))
            if t is not None:
                g.create_dataset("loss", data=np.linspace(2.0, 1.0, its))
                if c["phases"]:
                    # Phases split each iteration 40/40/10/10 unless given.
                    p = c.get("phase_time_s")
                    g.create_dataset("phase_time_s", data=p if p is not None else
                                     t[:, :, None] * np.array([0.4, 0.4, 0.1, 0.1]))
            if c.get("projection") is not None:
                pg = g.create_group("projection")
                for name, value in c["projection"]["attrs"].items():
                    pg.attrs[name] = s(value) if isinstance(value, str) else value
                for name, dtype in (("ranks", np.int64), ("step_s", np.float64),
                                    ("efficiency", np.float64), ("between_hosts", np.int8)):
                    if name in c["projection"]:        # between_hosts: newer files only
                        pg.create_dataset(name, data=np.asarray(c["projection"][name], dtype=dtype))
            if c["status"] == "ok":
                ref = reference_stats(t, global_batch, c["flops"])
                sg = g.create_group("summary")
                for name, value in list(ref.items()) + list(c.get("summary_extra", {}).items()):
                    # As dlscale writes them: counts and flags (contended) int64, the rest float64.
                    sg.attrs[name] = (value if isinstance(value, str) else np.int64(value)
                                      if isinstance(value, (int, np.integer)) else np.float64(value))
        for i, ar in enumerate(allreduce):
            g = f.create_group(f"allreduce/{i:04d}")
            for name, value in ar["attrs"].items():
                g.attrs[name] = s(value) if isinstance(value, str) else value
            for name in ("bytes", "time_s", "algbw_gbps", "busbw_gbps", "errors"):
                g.create_dataset(name, data=ar[name])


def add_accuracy_case(path, name, repeats, target=0.9, status="ok", message="", driver="native", threads=1):
    """Append an accuracy case (dlscale/3, docs/schema.md) to a file write_results wrote.

    repeats: per repeat a list of (train_time_s, val_accuracy) per epoch; test_time_s, test
    accuracy and the summary follow from them (the summary's CIs are given numbers, the report
    shows them as recorded).
    """
    with h5py.File(path, "r+") as f:
        f.attrs["schema"] = "dlscale/3"
        g = f.create_group(f"cases/{name}")
        a = g.attrs
        for key, value in (("workload", "mnist_cnn"), ("driver", driver), ("device_type", "cpu"),
                           ("precision", "fp32"), ("scaling", "weak"), ("status", status),
                           ("message", message), ("mode", "accuracy"), ("optimizer", "adam"),
                           ("data", "mnist:data/mnist"), ("test_data", "mnist:data/mnist:test"),
                           ("case_key", f"dlscale run --mode accuracy -w mnist_cnn -d {driver} --threads {threads}")):
            a[key] = value
        for key, value in (("ranks", 1), ("batch_per_rank", 32), ("global_batch", 32), ("threads", threads),
                           ("seed", 0), ("epochs", 3), ("repeats", len(repeats)), ("train_samples", 6400),
                           ("validation_samples", 1600), ("test_samples", 2004)):
            a[key] = np.int64(value)
        a["learning_rate"] = 0.001
        a["validation_fraction"] = 0.2
        a["target_accuracy"] = np.float64(target)
        if status != "ok":
            return
        epoch_t = np.dtype([("epoch", "i8"), ("train_loss", "f8"), ("train_time_s", "f8"),
                            ("cumulative_train_time_s", "f8"), ("val_accuracy", "f8"), ("val_loss", "f8"),
                            ("eval_time_s", "f8")])
        for r, epochs in enumerate(repeats):
            rg = g.create_group(f"repeats/{r:02d}")
            cumulative = np.cumsum([t for t, _ in epochs])
            rg.create_dataset("epochs", data=np.array(
                [(e + 1, 1.0 / (e + 1), t, c, acc, 0.5, 0.01)
                 for e, ((t, acc), c) in enumerate(zip(epochs, cumulative))], dtype=epoch_t))
            reached = [e for e, (_, acc) in enumerate(epochs) if acc >= target]
            ra = rg.attrs
            ra["seed"] = np.int64(r)
            ra["epochs_run"] = np.int64(len(epochs))
            ra["train_time_s"] = float(cumulative[-1])
            ra["test_time_s"] = 0.5 + 0.1 * r
            ra["test_accuracy"] = epochs[-1][1] - 0.01
            ra["test_loss"] = 0.3
            ra["time_to_target_s"] = float(cumulative[reached[0]]) if reached else math.nan
            ra["target_reached"] = np.int64(1 if reached else 0)
            ra["target_epoch"] = np.int64(reached[0] + 1 if reached else 0)
        sg = g.create_group("accuracy_summary")
        for key, value in (("test_accuracy_mean", 0.95), ("test_accuracy_ci95_low", 0.94),
                           ("test_accuracy_ci95_high", 0.96), ("train_time_mean_s", 6.0),
                           ("train_time_ci95_low_s", 5.0), ("train_time_ci95_high_s", 7.0),
                           ("test_time_mean_s", 0.55), ("test_time_ci95_low_s", 0.4),
                           ("test_time_ci95_high_s", 0.7), ("time_to_target_mean_s", 4.0),
                           ("time_to_target_ci95_low_s", math.nan), ("time_to_target_ci95_high_s", math.nan)):
            sg.attrs[key] = np.float64(value)
        sg.attrs["targets_reached"] = np.int64(sum(any(acc >= target for _, acc in e) for e in repeats))


def add_simulation(path, case, platform, ranks, step_s, error=None, model="flow", name=None):
    """Append /cases/<case>/simulations/KKKK as dlscale-project writes it (docs/schema.md): the next
    KKKK unless name is given; the parts split each step 60/20/15/5 (compute, straggler wait,
    exposed all-reduce, update and other); efficiency weak or strong from the steps, as the case's
    scaling; measured_step_s the case's step_median_s and error from it unless given."""
    with h5py.File(path, "r+") as f:
        c = f[f"cases/{case}"]
        parent = c.require_group("simulations")
        g = parent.create_group(name or f"{len(parent):04d}")
        ranks, step = np.asarray(ranks, dtype=np.int64), np.asarray(step_s, dtype=np.float64)
        measured_ranks = int(c.attrs["ranks"])
        measured = float(c["summary"].attrs["step_median_s"])
        strong = c.attrs["scaling"] == "strong"
        a = g.attrs
        for key, value in (("source", "dlscale-project"), ("simgrid_version", "3.32.0"), ("platform", platform),
                           ("platform_toml", f'name = "{platform}"\n'), ("placement", "block"), ("model", model),
                           ("scaling", "strong" if strong else "weak")):
            a[key] = value
        for key, value in (("steps", 3), ("seed", 1), ("overlap", 0), ("measured_ranks", measured_ranks)):
            a[key] = np.int64(value)
        a["measured_step_s"] = measured
        a["error"] = np.float64(step[list(ranks).index(measured_ranks)] / measured - 1 if error is None else error)
        g["ranks"] = ranks
        g["step_s"] = step
        g["efficiency"] = step[0] / (ranks * step) if strong else step[0] / step
        for part, share in (("compute_s", 0.6), ("straggler_wait_s", 0.2), ("exposed_allreduce_s", 0.15),
                            ("update_s", 0.05)):
            g[part] = step * share
        g["bucket_bytes"] = np.array([4000.0])
        g["bucket_ready_fraction"] = np.array([1.0])


def sample_cases():
    rng = np.random.default_rng(7)
    two_ranks = 0.010 + 0.002 * rng.random((2, 10))
    two_ranks[1] *= 1.1                     # rank 1 straggles
    return [
        make_case(two_ranks, phases=True),
        make_case(0.020 + 0.001 * rng.random((1, 5)), workload="cnn"),   # no phase_time_s
        make_case(status="oom", message="out of memory at batch 4096", ranks=2,
                  iterations=10, workload="transformer"),
    ]


def run_cli(*args, module=False):
    # sys.executable for the script too: its `env python3` may lack h5py (e.g. pyenv's).
    cmd = [sys.executable] + (["-m", "dlscale_report"] if module else [SCRIPT]) + list(args)
    env = dict(os.environ, PYTHONPATH=RESULTS_DIR) if module else None
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


# ---------------------------------------------------------------- tests

class StatsTest(unittest.TestCase):
    def test_median(self):
        self.assertEqual(dr.median([1, 2, 3, 4]), 2.5)
        self.assertEqual(dr.median([4, 1, 3]), 3)
        self.assertEqual(dr.median([7.0]), 7.0)

    def test_percentile_matches_numpy_linear(self):
        rng = random.Random(1)
        for n in (1, 2, 3, 5, 10, 20, 21, 101, 1000):
            x = sorted(rng.uniform(0.001, 0.1) for _ in range(n))
            for q in (0, 5, 50, 95, 100):
                self.assertAlmostEqual(dr.percentile(x, q), float(np.percentile(x, q)),
                                       delta=1e-15, msg=f"n={n} q={q}")

    def test_ci_order_known_values(self):
        # n=10: P(B<=1) = 11/1024 -> coverage 0.978515625; k=3 would give 0.890625.
        self.assertEqual(dr.median_ci_order(10), (2, 0.978515625))
        # n=5: even k=1 has only 1 - 2/32 = 0.9375, so fall back to [min, max].
        self.assertEqual(dr.median_ci_order(5), (1, 0.9375))
        self.assertEqual(dr.median_ci_order(6), (1, 0.96875))
        self.assertEqual(dr.median_ci_order(1), (1, 0.0))
        # Classic table value: n=100 gives [x_(40), x_(61)].
        self.assertEqual(dr.median_ci_order(100)[0], 40)

    def test_ci_order_matches_definition(self):
        for n in range(1, 200):
            x = list(range(1, n + 1))
            lo, hi, cov = reference_ci(x)
            k, coverage = dr.median_ci_order(n)
            self.assertEqual((x[k - 1], x[n - k]), (lo, hi), msg=f"n={n}")
            self.assertAlmostEqual(coverage, cov, delta=1e-12, msg=f"n={n}")

    def test_ci_in_stats(self):
        x = [float(v) for v in range(1, 11)]
        random.Random(3).shuffle(x)
        s = dr.compute_stats([x], 64, 1e9)
        self.assertEqual((s["ci95_low_s"], s["ci95_high_s"]), (2.0, 9.0))
        self.assertEqual(s["ci_coverage"], 0.978515625)
        self.assertEqual(s["step_median_s"], 5.5)

        s = dr.compute_stats([[3.0, 1.0, 5.0, 2.0, 4.0]], 64, 1e9)
        self.assertEqual((s["ci95_low_s"], s["ci95_high_s"], s["ci_coverage"]), (1.0, 5.0, 0.9375))

        s = dr.compute_stats([[0.25]], 64, 1e9)
        self.assertEqual((s["ci95_low_s"], s["ci95_high_s"], s["ci_coverage"]), (0.25, 0.25, 0.0))
        self.assertEqual((s["step_std_s"], s["step_cv"]), (0.0, 0.0))
        self.assertEqual(s["samples_per_s"], 256.0)
        self.assertEqual(s["achieved_flops"], 4e9)

    def test_step_is_max_over_ranks_and_straggler(self):
        t = [[1.0, 1.0, 1.0],
             [1.0, 1.0, 1.0],
             [1.5, 1.5, 0.5]]
        s = dr.compute_stats(t, 3, 0.0)
        self.assertEqual(s["step_median_s"], 1.5)            # steps = [1.5, 1.5, 1.0]
        self.assertEqual(s["straggler_ratio"], 1.5)          # per-rank medians 1, 1, 1.5
        self.assertEqual(dr.straggler_ratio([[2.0, 2.0], [2.0, 2.0]]), 1.0)

    def test_matches_numpy_reference(self):
        rng = np.random.default_rng(11)
        for ranks, n in ((1, 1), (1, 2), (2, 5), (4, 10), (3, 37), (8, 500)):
            t = 0.01 + 0.005 * rng.random((ranks, n))
            ours = dr.compute_stats(t, 128, 3.3e12)
            self.assertEqual(set(ours), set(dr.SUMMARY_KEYS))
            self.assertEqual(dr.compare_summary(ours, reference_stats(t, 128, 3.3e12)), [],
                             msg=f"ranks={ranks} n={n}")

    def test_rejects_empty_and_non_finite(self):
        with self.assertRaises(ValueError):
            dr.compute_stats(np.zeros((2, 0)), 1, 1.0)
        with self.assertRaises(ValueError):
            dr.compute_stats([[1.0, math.nan]], 1, 1.0)


class FileTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "run.h5")
        write_results(self.path, sample_cases())

    def tearDown(self):
        self.tmp.cleanup()

    def test_load(self):
        r = dr.load_results(self.path)
        self.assertEqual(r.attrs["schema"], "dlscale/1")
        self.assertEqual(r.attrs["world_size"], 2)
        self.assertEqual([c.name for c in r.cases], ["0000", "0001", "0002"])
        c0, c1, c2 = r.cases
        self.assertEqual(c0.phase_time_s.shape, (2, 10, 4))
        self.assertIsNone(c1.phase_time_s)
        self.assertEqual((c2.status, c2.summary), ("oom", None))
        self.assertIsNone(dr.case_stats(c2))

    def test_recompute_matches_recorded(self):
        for case in dr.load_results(self.path).cases:
            if case.ok:
                self.assertEqual(dr.compare_summary(case.summary, dr.case_stats(case)), [])
        self.assertEqual(dr.check_file(self.path), [])

    def test_case_without_phase_time(self):
        by_index = dr.recompute_case(self.path, 1)
        by_name = dr.recompute_case(self.path, "0001")
        self.assertEqual(by_index, by_name)
        self.assertEqual(by_index["samples_per_s"], 32 / by_index["step_median_s"])
        with self.assertRaises(dr.ReportError):
            dr.load_case(self.path, 7)

    def test_bytes_attributes(self):
        path = os.path.join(self.tmp.name, "bytes.h5")
        write_results(path, sample_cases(), bytes_strings=True)
        case = dr.load_case(path, 2)
        self.assertEqual(case.attrs["message"], "out of memory at batch 4096")
        self.assertEqual(dr.check_file(path), [])

    def test_check_detects_wrong_summary(self):
        with h5py.File(self.path, "r+") as f:
            f["cases/0000/summary"].attrs["step_median_s"] = 1.0
        problems = dr.check_file(self.path)
        self.assertEqual(len(problems), 1)
        self.assertIn("case 0000: step_median_s", problems[0])

    def test_schema_errors(self):
        foreign = os.path.join(self.tmp.name, "foreign.h5")
        with h5py.File(foreign, "w") as f:
            f["x"] = [1, 2, 3]
        with self.assertRaisesRegex(dr.ReportError, "schema attribute missing"):
            dr.load_results(foreign)
        other = os.path.join(self.tmp.name, "other.h5")
        write_results(other, sample_cases(), schema="dlscale/0")
        with self.assertRaisesRegex(dr.ReportError, r"schema 'dlscale/0' is not supported \(expected dlscale/1, dlscale/2, dlscale/3 or dlscale/4\)"):
            dr.load_results(other)


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "run.h5")
        write_results(self.path, sample_cases())

    def tearDown(self):
        self.tmp.cleanup()

    def assertOneLineError(self, proc, fragment):
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stdout, "")
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("dlscale-report: error: "), lines[0])
        self.assertIn(fragment, lines[0])

    def test_summary_text(self):
        proc = run_cli("summary", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        table, diagnosis = proc.stdout.split("\n\n")
        lines = table_lines(table)
        self.assertEqual(len(lines), 2 + 3)                    # header, rule, 3 cases
        # Then the diagnosis: every series here has one rank count, which is a note, not an error.
        self.assertTrue(diagnosis.startswith("scaling diagnosis"), diagnosis)
        self.assertIn("needs two rank counts with ok cases (has P=", diagnosis)
        self.assertNotIn("file", lines[0])                     # a single file: no file column
        for name, workload in (("0000", "mlp"), ("0001", "cnn"), ("0002", "transformer")):
            self.assertTrue(any(l.startswith(name) and workload in l for l in lines[2:]))
        self.assertIn("oom: out of memory at batch 4096", lines[4])
        med = dr.load_case(self.path, 0).summary
        self.assertIn(f"{med['step_median_s'] * 1e3:.2f} [{med['ci95_low_s'] * 1e3:.2f}, "
                      f"{med['ci95_high_s'] * 1e3:.2f}]", lines[2])
        # All rows are aligned: the status column starts at the same offset.
        self.assertEqual(len({l.index("ok") for l in lines[2:4]} | {lines[4].index("oom")}), 1)

    def test_summary_several_files_and_module(self):
        second = os.path.join(self.tmp.name, "second.h5")
        write_results(second, sample_cases()[:1])
        proc = run_cli("summary", self.path, second, module=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = table_lines(proc.stdout.split("\n\n")[0])
        self.assertTrue(lines[0].startswith("file"))
        self.assertEqual(len(lines), 2 + 4)
        # The folder both files are in is said once; the column names each file in it.
        self.assertIn(f"file in {self.tmp.name}/", " ".join(proc.stdout.split()))
        self.assertTrue(lines[-1].startswith("second.h5"))

    def test_summary_csv(self):
        proc = run_cli("summary", "--format", "csv", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = list(csv.DictReader(io.StringIO(proc.stdout)))
        self.assertEqual([r["case"] for r in rows], ["0000", "0001", "0002"])
        summary = dr.load_case(self.path, 1).summary
        self.assertAlmostEqual(float(rows[1]["step_median_ms"]), summary["step_median_s"] * 1e3)
        self.assertEqual(rows[1]["global_batch"], "32")
        self.assertEqual((rows[2]["status"], rows[2]["step_median_ms"]), ("oom", ""))
        self.assertEqual(rows[2]["message"], "out of memory at batch 4096")

    def test_check(self):
        proc = run_cli("check", self.path)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(self.path, "r+") as f:
            f["cases/0001/summary"].attrs["straggler_ratio"] = 2.0
        proc = run_cli("check", self.path)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("case 0001: straggler_ratio", proc.stdout)

    def test_foreign_hdf5(self):
        foreign = os.path.join(self.tmp.name, "foreign.h5")
        with h5py.File(foreign, "w") as f:
            f["x"] = [1, 2, 3]
        self.assertOneLineError(run_cli("summary", foreign),
                                f"{foreign}: not a dlscale results file (schema attribute missing)")

    def test_wrong_schema(self):
        other = os.path.join(self.tmp.name, "other.h5")
        write_results(other, sample_cases(), schema="dlscale/0")
        self.assertOneLineError(run_cli("summary", self.path, other),
                                f"{other}: schema 'dlscale/0' is not supported (expected dlscale/1, dlscale/2, dlscale/3 or dlscale/4)")

    def test_not_hdf5(self):
        text = os.path.join(self.tmp.name, "notes.txt")
        with open(text, "w") as f:
            f.write("step times\n1 2 3\n")
        self.assertOneLineError(run_cli("summary", text), f"{text}: not an HDF5 file")

    def test_missing_file(self):
        missing = os.path.join(self.tmp.name, "nope.h5")
        self.assertOneLineError(run_cli("summary", missing), f"{missing}: no such file")


class AccuracyTest(unittest.TestCase):
    """dlscale/3 accuracy cases: kept out of every timing analysis, shown in the report's section."""

    # Two repeats: the first reaches 0.9 at epoch 2 (after 2 + 2 s), the second stops at the
    # epoch limit without reaching it.
    REPEATS = [[(2.0, 0.80), (2.0, 0.92)], [(3.0, 0.70), (3.0, 0.85), (3.0, 0.88)]]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "acc.h5")
        write_results(self.path, sample_cases(), schema="dlscale/2")
        add_accuracy_case(self.path, "0003", self.REPEATS)
        add_accuracy_case(self.path, "0004", [], status="error", message="driver exploded", driver="other")

    def tearDown(self):
        self.tmp.cleanup()

    def test_accuracy_cases_are_kept_apart_from_timing_cases(self):
        r = dr.load_results(self.path)
        self.assertEqual(r.attrs["schema"], "dlscale/3")
        self.assertEqual([c.name for c in r.cases], ["0000", "0001", "0002"])  # no mode: timing
        self.assertEqual([c.name for c in r.accuracy], ["0003", "0004"])
        ok, failed = r.accuracy
        self.assertEqual([rep.attrs["epochs_run"] for rep in ok.repeats], [2, 3])
        self.assertEqual(ok.repeats[1].epochs["cumulative_train_time_s"].tolist(), [3.0, 6.0, 9.0])
        self.assertEqual((failed.status, failed.repeats, failed.summary), ("error", [], None))
        with self.assertRaisesRegex(dr.ReportError, "case 0003 is an accuracy case"):
            dr.load_case(self.path, 3)
        # The timing commands read the file and show only its timing cases.
        proc = run_cli("summary", self.path, "--format", "csv")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(list(csv.DictReader(io.StringIO(proc.stdout)))), 3)
        self.assertEqual(run_cli("check", self.path).returncode, 0)

    def test_text_summary_adds_the_accuracy_tables(self):
        proc = run_cli("summary", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for title in ("training and testing time", "time to accuracy", "test accuracy"):
            self.assertIn(f"\n{title}\n", proc.stdout)
        self.assertIn("1/2", proc.stdout)                  # one of two repeats reached the target
        self.assertIn("driver exploded", proc.stdout)      # the failed case's message

    def test_rows_and_curves(self):
        from dlscale_report.accuracy import accuracy_rows, curve
        from dlscale_report.study import load_study
        study = load_study([self.path])
        ok, failed = accuracy_rows(study.accuracy)
        self.assertEqual((ok["targets_reached"], ok["repeats"], ok["target_epoch_mean"]), (1, 2, 2.0))
        self.assertEqual((ok["epochs_run_min"], ok["epochs_run_max"]), (2, 3))
        self.assertAlmostEqual(ok["test_accuracy_min"], 0.87)
        self.assertEqual(ok["time_to_target_mean_s"], 4.0)
        self.assertIsNone(ok["time_to_target_ci95_low_s"])            # NaN in the file
        self.assertIn("adam lr=0.001", ok["label"])
        self.assertEqual(failed["status"], "error")
        repeats, mean = curve(study.accuracy[0])
        self.assertEqual(repeats[0], [(2.0, 0.80), (4.0, 0.92)])
        # Epochs 1 and 2 average both repeats; epoch 3 only the one that ran it.
        self.assertEqual([t for t, _ in mean], [2.5, 5.0, 9.0])
        self.assertEqual([round(a, 6) for _, a in mean], [0.75, 0.885, 0.88])

    def test_report_section(self):
        out = os.path.join(self.tmp.name, "report")
        proc = run_cli("report", self.path, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn('<h2 id="accuracy">accuracy</h2>', page)
        self.assertIn("driver exploded", page)
        self.assertTrue(os.path.exists(os.path.join(out, "accuracy_000.png")))
        self.assertFalse(os.path.exists(os.path.join(out, "accuracy_001.png")))  # the failed case has none

        def read(name):
            with open(os.path.join(out, name)) as f:
                return list(csv.DictReader(f))
        times = read("accuracy_time.csv")
        self.assertEqual([r["status"] for r in times], ["ok", "error"])
        self.assertEqual((times[0]["train_time_mean_s"], times[0]["test_time_ci95_high_s"]), ("6.0", "0.7"))
        (tta,) = read("time_to_accuracy.csv")
        self.assertEqual((tta["targets_reached"], tta["repeats"], tta["time_to_target_mean_s"]), ("1", "2", "4.0"))
        (acc,) = read("test_accuracy.csv")
        self.assertEqual((acc["test_accuracy_mean"], acc["test_accuracy_ci95_low"]), ("0.95", "0.94"))
        # The timing sections never see the accuracy cases.
        self.assertEqual(len(read("summary.csv")), 3)

    def test_report_of_timing_files_has_no_accuracy_section(self):
        timing = os.path.join(self.tmp.name, "timing.h5")
        write_results(timing, sample_cases())
        out = os.path.join(self.tmp.name, "timing_report")
        self.assertEqual(run_cli("report", timing, "-o", out).returncode, 0)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertNotIn('id="accuracy"', page)
        self.assertIn("accuracy: no accuracy case", page)

    def test_incomplete_accuracy_case_is_skipped_and_named(self):
        with h5py.File(self.path, "r+") as f:
            del f["cases/0003/accuracy_summary"]
        proc = run_cli("summary", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr.splitlines(), [f"dlscale-report: warning: {self.path}: damaged, skipped: "
                                                    "case 0003 (an accuracy case lacking repeats or "
                                                    "accuracy_summary); 4 case(s) read"])
        self.assertIn("transformer", proc.stdout)      # the timing cases are still shown
        self.assertEqual(run_cli("check", self.path).returncode, 2)


class PrecisionTest(unittest.TestCase):
    """The drivers-by-precision table pairs cases that differ only in their precision."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "precision.h5")

    def tearDown(self):
        self.tmp.cleanup()

    def rows(self, cases):
        write_results(self.path, cases, schema="dlscale/2")
        from dlscale_report.precisions import precision_pairs, precision_rows
        return precision_rows(precision_pairs(dr.load_results(self.path).cases))

    def case(self, precision, step_s, peak=None, driver="onednn"):
        return make_case(np.full((1, 5), step_s), driver=driver, extra_attrs={"precision": precision},
                         summary_extra={} if peak is None else {"peak_flops": peak})

    def test_speed_up_and_the_peak_ratio_that_bounds_it(self):
        (row,) = self.rows([self.case("fp32", 1.0, peak=3.0e11), self.case("bf16", 1.6, peak=1.5e11)])
        self.assertEqual((row["driver"], row["precision"]), ("onednn", "bf16"))
        self.assertAlmostEqual(row["speedup"], 1.0 / 1.6)
        self.assertAlmostEqual(row["peak_ratio"], 0.5)
        self.assertEqual(row["loss_gap"], 0.0)  # same seed, same data, same losses here

    def test_no_peak_ratio_without_both_peaks(self):
        rows = self.rows([self.case("fp32", 1.0, peak=3.0e11), self.case("bf16", 0.5),
                          self.case("fp32", 1.0, driver="libtorch"), self.case("bf16", 0.5, driver="libtorch",
                                                                              peak=float("nan"))])
        self.assertEqual([(r["driver"], r["speedup"], r["peak_ratio"]) for r in rows],
                         [("onednn", 2.0, None), ("libtorch", 2.0, None)])

    def test_cases_that_differ_in_more_than_the_precision_are_not_paired(self):
        other = make_case(np.full((1, 5), 0.5), driver="onednn", threads=2, extra_attrs={"precision": "bf16"})
        self.assertEqual(self.rows([self.case("fp32", 1.0), other]), [])


if __name__ == "__main__":
    unittest.main()


class SimulationTest(unittest.TestCase):
    """/cases/NNNN/simulations/KKKK (dlscale-project): read, summarised, plotted, checked."""

    LINE_B = ("case 0001: simulated on plat-b (SimGrid 3.32.0, flow model, 3 steps; simulation 0001): "
              "P=1 to 8192, efficiency 0.40 at P=1024 (the first below 0.5), 0.25 at P=8192; at the measured "
              "P=2 the simulated step (10.200 ms) is 2.4% below the measured one (10.450 ms); at the series' "
              "other measured P: P=1 +2.0%")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "sim.h5")
        # A weak series measured at P=1 (9.8 ms) and P=2 (10.45 ms), both with phases.
        write_results(self.path, [make_case(np.full((1, 6), 0.0098), phases=True),
                                  make_case(np.full((2, 6), 0.01045), phases=True)])
        ranks = [1, 2, 4, 1024, 8192]
        # plat-a twice (0000 superseded by 0002), plat-b once: efficiency 10/step.
        add_simulation(self.path, "0001", "plat-a", ranks, [0.010, 0.011, 0.012, 0.030, 0.050])
        add_simulation(self.path, "0001", "plat-b", ranks, [0.010, 0.0102, 0.011, 0.025, 0.040])
        add_simulation(self.path, "0001", "plat-a", ranks, [0.010, 0.0105, 0.0106, 0.016, 0.018])

    def tearDown(self):
        self.tmp.cleanup()

    def test_load_and_newest_per_platform(self):
        case = dr.load_case(self.path, 1)
        self.assertEqual([s.name for s in case.simulations], ["0000", "0001", "0002"])
        self.assertEqual([(s.name, s.platform) for s in dr.shown_simulations(case)],
                         [("0001", "plat-b"), ("0002", "plat-a")])
        sim = case.simulations[1]
        self.assertEqual(sim.ranks.tolist(), [1, 2, 4, 1024, 8192])
        self.assertEqual(sim.attrs["simgrid_version"], "3.32.0")
        np.testing.assert_allclose(sim.efficiency, 0.010 / sim.step_s)
        self.assertEqual(dr.load_case(self.path, 0).simulations, [])

    def test_summary_line(self):
        # Within 120 columns the sentences wrap; --wide gives each its line.
        proc = run_cli("summary", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertLessEqual(max(len(line) for line in proc.stdout.splitlines()), 120)
        proc = run_cli("summary", "--wide", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        head, block = proc.stdout.split("\nsimulated projections (")
        lines = block.splitlines()[1:]
        self.assertEqual(len(lines), 2, block)                 # plat-b's 0001, plat-a's newest 0002
        self.assertTrue(lines[0].endswith(self.LINE_B), lines[0])
        self.assertTrue(lines[0].lstrip().startswith("mlp native cpu fp32"), lines[0])
        self.assertIn("(weak), case 0001", lines[0])
        # Never below 0.5: the largest P only; 10.5 / 10.45 - 1 = +0.48%.
        self.assertIn("simulated on plat-a (SimGrid 3.32.0, flow model, 3 steps; simulation 0002): P=1 to 8192, "
                      "efficiency 0.56 at P=8192; at the measured P=2 the simulated step (10.500 ms) is 0.5% above "
                      "the measured one (10.450 ms)", lines[1])
        self.assertNotIn("simulation 0000", block)

    def test_check(self):
        proc = run_cli("check", self.path)
        self.assertEqual((proc.returncode, proc.stdout), (0, "1 file(s) consistent\n"), proc.stderr)
        with h5py.File(self.path, "r+") as f:
            f["cases/0001/simulations/0001"].attrs["error"] = 0.5
            f["cases/0001/simulations/0002/update_s"][4] = 1.0
        proc = run_cli("check", self.path)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("case 0001: simulation 0001: error = 0.5, its step at P=2 over measured_step_s gives", proc.stdout)
        self.assertIn("case 0001: simulation 0002: its parts add up to", proc.stdout)

    def test_damaged_simulation_is_skipped_alone(self):
        add_simulation(self.path, "0001", "plat-c", [1, 2], [0.01, 0.011])
        with h5py.File(self.path, "r+") as f:
            del f["cases/0001/simulations/0003/step_s"]
        loaded = dr.load_results(self.path)
        self.assertEqual(len(loaded.cases), 2)
        self.assertEqual([s.name for s in loaded.cases[1].simulations], ["0000", "0001", "0002"])
        self.assertEqual([str(d) for d in loaded.damaged], ["simulation 0001/0003 (lacks dataset(s) step_s)"])
        proc = run_cli("summary", "--wide", self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("simulation 0001/0003 (lacks dataset(s) step_s)", proc.stderr)
        self.assertIn(self.LINE_B, proc.stdout)

    def test_report_plot_and_sentence(self):
        out = os.path.join(self.tmp.name, "report")
        proc = run_cli("report", self.path, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn('<h2 id="simulations">simulated projections</h2>', page)
        for name in ("simulation_0001_0001.png", "simulation_0001_0002.png"):
            self.assertIn(f'<img src="{name}"', page)
            with open(os.path.join(out, name), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertNotIn("simulation_0001_0000.png", page)
        # The sentence in the list and under its figure, html-escaped as the page writes it.
        import html
        sentence = html.escape(self.LINE_B)
        self.assertRegex(page, r"<li>[^<]*" + re.escape(sentence) + "</li>")
        self.assertRegex(page, r"<figcaption>[^<]*" + re.escape(sentence) + "</figcaption>")
        with open(os.path.join(out, "simulations.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r["simulation"] == "0001"]
        self.assertEqual([int(r["ranks"]) for r in rows], [1, 2, 4, 1024, 8192])
        by_p = {int(r["ranks"]): r for r in rows}
        self.assertAlmostEqual(float(by_p[2]["measured_step_ms"]), 10.45, places=9)
        self.assertAlmostEqual(float(by_p[2]["error"]), 10.2 / 10.45 - 1, places=12)
        self.assertAlmostEqual(float(by_p[1]["error"]), 10 / 9.8 - 1, places=12)
        self.assertEqual((by_p[4]["measured_step_ms"], by_p[4]["error"]), ("", ""))
        self.assertAlmostEqual(float(by_p[1024]["exposed_allreduce_ms"]), 25 * 0.15, places=9)

    def test_report_without_simulations_names_the_section(self):
        plain = os.path.join(self.tmp.name, "plain.h5")
        write_results(plain, [make_case(np.full((1, 6), 0.0098), phases=True)])
        out = os.path.join(self.tmp.name, "plain_report")
        proc = run_cli("report", plain, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertNotIn('id="simulations"', page)
        self.assertIn("not shown, no data: simulated projections: no case holds a simulation", page)
