"""dlscale-report's machine-readable output, --version, usage errors and missing modules.

Run: /usr/bin/python3 -m unittest discover -s tests/python

--format json must hold exactly the CSV's rows (same keys in the same order, the same
numbers to the last bit, null where the CSV has an empty field) for every table command;
the summary's JSON must equal the values recorded in the file. Everything runs the script
with this interpreter (sys.executable), since its `#!/usr/bin/env python3` may find a Python
without h5py.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

from test_report import RESULTS_DIR, SCRIPT, make_case, write_results

SOURCE = os.path.dirname(RESULTS_DIR)
TABLE_COMMANDS = ("summary", "scaling", "threads", "batch", "phases", "ranks", "allreduce", "compare")


def run(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], capture_output=True,
                          text=True, env=env, cwd=cwd)


def strict_json(text):
    """json.loads that refuses NaN and Infinity (not JSON, though Python writes them)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def cmake_project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*dlscale\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else None


def git_describe(path):
    try:
        return subprocess.run(["git", "-C", path, "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def times(rng, ranks, n, base):
    return base * (1 + 0.1 * rng.random((ranks, n)))


class Study:
    """Files for every table command: a weak study over three files (with a failed case),
    a strong pair, thread and batch sweeps, phases, an all-reduce benchmark, a B run."""

    def __init__(self, directory):
        rng = np.random.default_rng(21)
        self.weak = []
        for p in (1, 2, 4):
            cases = [make_case(times(rng, p, 9, 0.01 * (1 + 0.2 * np.log2(p))), threads=th)
                     for th in (1, 2)]
            if p == 4:
                cases[1] = make_case(status="oom", message="out of memory", ranks=4,
                                     iterations=9, threads=2)
            path = os.path.join(directory, f"weak{p}.h5")
            write_results(path, cases)
            self.weak.append(path)
        ph = times(rng, 2, 7, 0.003)[:, :, None] * np.array([0.4, 0.3, 0.2, 0.1])
        sizes = np.array([1024, 65536], dtype=np.int64)
        allreduce = dict(attrs={"backend": "mpi", "ranks": np.int64(2), "dtype": "float32",
                                "iterations": np.int64(4), "warmup": np.int64(1), "case": "",
                                "alpha_s": 2e-6, "beta_s_per_byte": 1e-9},
                         bytes=sizes, time_s=1e-5 + 1e-9 * sizes[None, :, None] * (1 + rng.random((2, 2, 4))),
                         algbw_gbps=np.array([0.1, 0.9]), busbw_gbps=np.array([0.1, 0.9]),
                         errors=np.zeros(2, dtype=np.int64))
        cases = [make_case(times(rng, p, 8, 0.04 / p), scaling="strong", global_batch=64,
                           batch_per_rank=64 // p) for p in (1, 2)]
        cases += [make_case(times(rng, 1, 5, 0.02 / th), driver=d, threads=th, workload="cnn")
                  for d in ("libtorch", "reference") for th in (1, 2, 4)]
        cases += [make_case(times(rng, 1, 5, 0.001 * b), batch_per_rank=b, workload="rnn", threads=1)
                  for b in (8, 16)]
        cases.append(make_case(ph.sum(axis=2), phases=True, phase_time_s=ph, workload="phased"))
        self.other = os.path.join(directory, "other.h5")
        write_results(self.other, cases, allreduce=[allreduce])
        self.b = os.path.join(directory, "b.h5")
        write_results(self.b, [make_case(times(rng, 1, 9, 0.012), threads=1)])
        self.all = self.weak + [self.other]

    def args(self, command):
        return [self.weak[0], self.b] if command == "compare" else self.all


class JsonFormatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlscale_formats_")
        cls.study = Study(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def outputs(self, command, *extra):
        out = {}
        for fmt in ("csv", "json"):
            proc = run(command, "--format", fmt, *extra, *self.study.args(command))
            self.assertEqual(proc.returncode, 0, f"{command} --format {fmt}: {proc.stderr}")
            self.assertEqual(proc.stderr, "", command)
            out[fmt] = proc.stdout
        return out["csv"], out["json"]

    def assertJsonMatchesCsv(self, command, csv_text, json_text):
        reader = csv.reader(io.StringIO(csv_text))
        header = next(reader)
        csv_rows = list(reader)
        rows = strict_json(json_text)
        self.assertIsInstance(rows, list, command)
        self.assertEqual(len(rows), len(csv_rows), command)
        self.assertGreater(len(rows), 0, command)
        for row, fields in zip(rows, csv_rows):
            self.assertEqual(list(row), header, command)          # the CSV's columns, in order
            for key, value, field in zip(header, row.values(), fields):
                where = f"{command} {key}"
                if value is None:
                    self.assertIn(field, ("", "nan", "inf", "-inf"), where)
                elif isinstance(value, bool):
                    self.assertEqual(str(value), field, where)
                elif isinstance(value, float):
                    # CSV writes repr(float): equal text means the same double.
                    self.assertEqual(repr(value), field, where)
                    self.assertEqual(value, float(field), where)
                elif isinstance(value, int):
                    self.assertEqual(str(value), field, where)
                else:
                    self.assertIsInstance(value, str, where)
                    self.assertEqual(value, field, where)
        return rows

    def test_every_table_command(self):
        for command in TABLE_COMMANDS:
            with self.subTest(command=command):
                self.assertJsonMatchesCsv(command, *self.outputs(command))

    def test_summary_equals_recorded_values(self):
        rows = self.assertJsonMatchesCsv("summary", *self.outputs("summary"))
        expected = []
        for path in self.study.all:
            with h5py.File(path, "r") as f:
                for name, g in f["cases"].items():
                    s = g["summary"].attrs if "summary" in g else None
                    expected.append((path, name, g.attrs["status"], s and {
                        "step_median_ms": float(s["step_median_s"]) * 1e3,
                        "ci95_low_ms": float(s["ci95_low_s"]) * 1e3,
                        "ci95_high_ms": float(s["ci95_high_s"]) * 1e3,
                        "samples_per_s": float(s["samples_per_s"]),
                        "achieved_gflops": float(s["achieved_flops"]) * 1e-9}))
        self.assertEqual(len(rows), len(expected))
        for row, (path, name, status, values) in zip(rows, expected):
            self.assertEqual((row["file"], row["case"], row["status"]), (path, name, status))
            self.assertIsInstance(row["ranks"], int)
            if values is None:                    # not ok: no numbers, null rather than ""
                self.assertEqual(row["status"], "oom")
                self.assertIsNone(row["step_median_ms"])
                self.assertIsNone(row["samples_per_s"])
                continue
            for key, v in values.items():
                self.assertEqual(row[key], v, key)  # exact: JSON keeps every digit
            self.assertIsNone(row["exposed_allreduce_ms"])   # not recorded in these files

    def test_scaling_both_modes_one_array(self):
        csv_text, json_text = self.outputs("scaling")
        rows = self.assertJsonMatchesCsv("scaling", csv_text, json_text)
        self.assertEqual({r["scaling"] for r in rows}, {"weak", "strong"})
        weak = [r for r in rows if r["scaling"] == "weak" and r["workload"] == "mlp"]
        self.assertEqual(len(weak), 6)
        failed = [r for r in weak if r["status"] != "ok"]
        self.assertEqual([(r["ranks"], r["speedup"], r["efficiency"]) for r in failed], [(4, None, None)])
        base = [r for r in weak if r["ranks"] == 1]
        self.assertEqual([(r["speedup"], r["efficiency"]) for r in base], [(1.0, 1.0)] * 2)

    def test_json_with_out_dir_keeps_csv_file(self):
        out = os.path.join(self.dir, "out")
        proc = run("phases", "--format", "json", "-o", out, self.study.other)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(strict_json(proc.stdout)), 1)
        self.assertTrue(os.path.isfile(os.path.join(out, "phases.csv")))

    def test_unknown_format_is_a_one_line_usage_error(self):
        for command in TABLE_COMMANDS:
            with self.subTest(command=command):
                proc = run(command, "--format", "yaml", *self.study.args(command))
                self.assertEqual(proc.returncode, 2)
                self.assertEqual(proc.stdout, "")
                lines = proc.stderr.splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertTrue(lines[0].startswith("dlscale-report: error: argument --format: "
                                                    "invalid choice: 'yaml'"), lines[0])

    def test_other_usage_errors_are_one_line(self):
        for args in ([], ["bogus"], ["summary"], ["scaling", "--mode", "sideways", self.study.b]):
            with self.subTest(args=args):
                proc = run(*args)
                self.assertEqual(proc.returncode, 2)
                self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
                self.assertTrue(proc.stderr.startswith("dlscale-report: error: "), proc.stderr)


class VersionTest(unittest.TestCase):
    def test_version_line(self):
        proc = run("--version", cwd=tempfile.gettempdir())
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        m = re.fullmatch(r"dlscale-report (\S+) \(commit (\S+)\)\n", proc.stdout)
        self.assertIsNotNone(m, proc.stdout)
        from dlscale_report import _version
        self.assertEqual(m.group(1), _version.__version__)
        # Python side and CMake project: one version.
        self.assertEqual(m.group(1), cmake_project_version())
        # Run from the checkout: the checkout's commit (or "unknown" outside git).
        self.assertEqual(m.group(2), git_describe(RESULTS_DIR) or "unknown")

    def test_copy_outside_checkout_uses_build_info(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(RESULTS_DIR, "dlscale_report"),
                            os.path.join(tmp, "dlscale_report"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            code = "from dlscale_report._version import commit; print(commit())"
            env = dict(os.environ, PYTHONPATH=tmp)

            def commit():
                return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp,
                                      capture_output=True, text=True, check=True).stdout.strip()
            self.assertEqual(commit(), "unknown")
            with open(os.path.join(tmp, "dlscale_report", "_build_info.py"), "w") as f:
                f.write("COMMIT = '0123456789ab-dirty'\n")
            self.assertEqual(commit(), "0123456789ab-dirty")


class MissingModuleTest(unittest.TestCase):
    """A Python without h5py (or matplotlib): one line that names it, exit 2, no traceback.

    The module is hidden by a package of the same name earlier on PYTHONPATH that fails to
    import the way an absent one does.
    """

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_missing_")
        self.file = os.path.join(self.dir, "run.h5")
        write_results(self.file, [make_case(np.full((1, 5), 0.01))])

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def hide(self, *modules):
        shim = os.path.join(self.dir, "shim_" + "_".join(modules))
        for name in modules:
            os.makedirs(os.path.join(shim, name))
            with open(os.path.join(shim, name, "__init__.py"), "w") as f:
                message = f"No module named {name!r}"
                f.write(f"raise ModuleNotFoundError({message!r}, name={name!r})\n")
        return dict(os.environ, PYTHONPATH=shim)

    def assertNames(self, proc, modules, packages):
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stdout, "")
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertTrue(lines[0].startswith(f"dlscale-report: error: missing Python module(s) "
                                            f"{', '.join(modules)} "), lines[0])
        self.assertIn(f"install {' '.join(packages)} ", lines[0])

    def test_without_h5py(self):
        env = self.hide("h5py")
        for command in (["summary"], ["check"], ["scaling", "--format", "json"]):
            with self.subTest(command=command):
                self.assertNames(run(*command, self.file, env=env), ["h5py"], ["python3-h5py"])
        # The module form too.
        proc = subprocess.run([sys.executable, "-m", "dlscale_report", "summary", self.file],
                              capture_output=True, text=True,
                              env=dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep + RESULTS_DIR))
        self.assertNames(proc, ["h5py"], ["python3-h5py"])
        # --version and --help need neither.
        proc = run("--version", env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(proc.stdout.startswith("dlscale-report "))
        self.assertEqual(run("--help", env=env).returncode, 0)

    def test_without_h5py_and_numpy(self):
        self.assertNames(run("summary", self.file, env=self.hide("h5py", "numpy")),
                         ["h5py", "numpy"], ["python3-h5py", "python3-numpy"])

    def test_without_matplotlib_only_plots_fail(self):
        env = self.hide("matplotlib")
        self.assertEqual(run("phases", self.file, env=env).returncode, 0)
        self.assertNames(run("phases", self.file, "-o", os.path.join(self.dir, "o"), env=env),
                         ["matplotlib"], ["python3-matplotlib"])
        self.assertNames(run("report", self.file, "-o", os.path.join(self.dir, "r"), env=env),
                         ["matplotlib"], ["python3-matplotlib"])


if __name__ == "__main__":
    unittest.main()


class TextWidthTest(unittest.TestCase):
    """tables.Table.text within a width: what every row shares said once, long text cells as
    footnotes, detail columns left out (the highest first) and named, notes wrapped; --wide
    (width None) as it comes."""

    def table(self):
        from dlscale_report.tables import Column, Table
        rows = [{"series": f"net{i} libtorch cpu fp32", "device": "cpu", "ms": 10.0 * i, "gflops": 1.5 * i,
                 "rss": 100.0 + i, "status": "ok" if i else "failed: " + "out of memory " * 4} for i in range(3)]
        columns = [Column("series", lambda r: r["series"], right=False, keep=True, words=True),
                   Column("device", lambda r: r["device"], right=False),
                   Column("step ms", lambda r: f"{r['ms']:.2f}"),
                   Column("GFLOP/s", lambda r: f"{r['gflops']:.2f}", detail=1),
                   Column("host RSS MB", lambda r: f"{r['rss']:.1f}", detail=2),
                   Column("status", lambda r: r["status"], right=False)]
        return Table(title="cases", columns=columns, rows=rows, csv_columns=("series",),
                     notes=["a note long enough to be wrapped at the width of this test's table " * 2])

    def test_fits_the_width(self):
        text = self.table().text(width=70)
        lines = text.splitlines()
        self.assertLessEqual(max(len(line) for line in lines), 70, text)
        self.assertEqual(lines[1], "every row: device cpu, series libtorch cpu fp32")
        header = lines[2].split()
        self.assertEqual(header[:3], ["series", "step", "ms"])
        self.assertNotIn("RSS", lines[2])               # detail 2 went first
        self.assertIn("net0  ", lines[4])
        self.assertRegex(lines[4], r"  failed: out of memory out of memory… \[1\]$")   # 40 characters
        self.assertIn("[1] failed: out of memory out of memory out of memory out of memory", text)
        self.assertIn("note: left out to fit 70 columns: host RSS MB", " ".join(text.split()))
        self.assertTrue(any(line.startswith("  ") and "wrapped" in line for line in lines), text)

    def test_wide_keeps_everything(self):
        text = self.table().text(width=None)
        header = text.splitlines()[1]
        for name in ("series", "device", "GFLOP/s", "host RSS MB", "status"):
            self.assertIn(name, header)
        self.assertIn("failed: " + "out of memory " * 3 + "out of memory", text)
        self.assertNotIn("every row", text)
