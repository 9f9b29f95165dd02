"""End-to-end tests: the dlscale binary under a real mpiexec, its HDF5 files read back with
plain h5py, and results/dlscale-report on them.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH; by hand, see tests/README.md.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import h5py
import numpy as np

from catalog_runs import WORKLOADS_MD_PARAMS
import dlscale_test
from dlscale_test import (DLSCALE, SOURCE, Workdir, compiled_drivers, dlscale, error_lines, needs_drivers, visible_gpus,
                          write_idx)

sys.path.insert(0, os.path.join(SOURCE, "results"))
import dlscale_report as report  # noqa: E402

SMALL = "mnist_fnn:width=16"

load_tests = dlscale_test.load_tests  # BadInput's tests run side by side

HAS_GPU = visible_gpus() > 0
SMALL_FCN = "fcn5:features=64,width=32"


@needs_drivers("libtorch")
class AcceptanceRun(Workdir):
    def test_fcn5_two_ranks_summary_matches_raw_samples(self):
        out = self.path("x.h5")
        proc = dlscale(["run", "-w", "fcn5", "-d", "libtorch", "--batch", "8", "--warmup", "1",
                        "--iterations", "5", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(f.attrs["schema"], "dlscale/4")
            self.assertEqual(f.attrs["world_size"], 2)
            case = f["cases/0000"]
            t = case["iter_time_s"][()]
            self.assertEqual(t.shape, (2, 5))
            self.assertTrue(np.all(t > 0))
            self.assertEqual(case.attrs["params"], 117997696)
            self.assertEqual(case.attrs["status"], "ok")
            self.assertEqual(case.attrs["global_batch"], 16)
            s = dict(case["summary"].attrs)
            step = t.max(axis=0)
            self.assertAlmostEqual(s["step_median_s"], float(np.median(step)), delta=1e-12)
            self.assertAlmostEqual(s["step_p05_s"], float(np.percentile(step, 5)), delta=1e-12)
            self.assertAlmostEqual(s["step_p95_s"], float(np.percentile(step, 95)), delta=1e-12)
            self.assertAlmostEqual(s["step_mean_s"], float(step.mean()), delta=1e-12)
            self.assertAlmostEqual(s["step_std_s"], float(step.std(ddof=1)), delta=1e-12)
            self.assertAlmostEqual(s["samples_per_s"], 16 / float(np.median(step)), delta=1e-9)
            ranks = f["system/ranks"][()]
            self.assertEqual(list(ranks["rank"]), [0, 1])
            self.assertIn("blas", f["system/software"].attrs)
            self.assertEqual(case["memory"].shape, (2,))
            self.assertTrue(np.all(case["memory"]["host_peak_rss_bytes"] > 4 * 117997696))
            self.assertEqual(case["loss"].shape, (5,))
        # The independent Python recomputation agrees on every summary attribute.
        self.assertEqual(report.check_file(out), [])
        recomputed = report.recompute_case(out, 0)
        with h5py.File(out, "r") as f:
            for key, value in recomputed.items():
                self.assertAlmostEqual(f["cases/0000/summary"].attrs[key], value, delta=1e-9 * abs(value) + 1e-12, msg=key)


class BadInput(Workdir):
    """Every bad input: one line naming it, exit code 2, no benchmark work, no file touched."""

    side_by_side = 4  # each test waits mostly for the launcher to end a job that exited 2


    def test_unknown_workload(self):
        self.assert_usage_error(["run", "-w", "resnet9000", "--out", self.path("a.h5")], "unknown workload 'resnet9000'")
        self.assertFalse(os.path.exists(self.path("a.h5")))

    def test_unknown_driver(self):
        self.assert_usage_error(["run", "-w", SMALL, "-d", "caffe", "--out", self.path("a.h5")], "unknown driver 'caffe'")

    def test_unknown_suite(self):
        self.assert_usage_error(["run", "--suite", "nightly-xl"], "unknown suite 'nightly-xl'")

    def test_non_positive_batch(self):
        self.assert_usage_error(["run", "-w", SMALL, "--batch", "0", "--out", self.path("a.h5")], "batch must be positive")
        self.assert_usage_error(["run", "-w", SMALL, "--batch", "8,-2", "--out", self.path("a.h5")], "batch must be positive")

    def test_strong_scaling_batch_not_divisible(self):
        self.assert_usage_error(["run", "-w", SMALL, "--scaling", "strong", "--batch", "10", "--out", self.path("a.h5")],
                                "global batch 10 does not divide by 3 ranks", ranks=3)

    def test_malformed_toml_names_the_line(self):
        cfg = self.path("bad.toml")
        with open(cfg, "w") as f:
            f.write('workload = "mnist_fnn"\n\nbatch = [8,\n')
        proc = self.assert_usage_error(["run", "--config", cfg, "--out", self.path("a.h5")], "bad.toml:")
        self.assertRegex(error_lines(proc)[0], r"bad\.toml:\d+:")

    def test_unknown_toml_key_names_the_line(self):
        cfg = self.path("typo.toml")
        with open(cfg, "w") as f:
            f.write('workload = "mnist_fnn"\nbatchsize = 8\n')
        self.assert_usage_error(["run", "--config", cfg, "--out", self.path("a.h5")], "typo.toml:2: unknown key 'batchsize'")

    def test_unwritable_out_path(self):
        self.assert_usage_error(["run", "-w", SMALL, "--out", "/nonexistent-dir/x.h5"], "/nonexistent-dir does not exist")
        os.mkdir(self.path("sub"))
        self.assert_usage_error(["run", "-w", SMALL, "--out", self.path("sub")], "is a directory")

    def test_existing_file_is_never_truncated(self):
        out = self.path("keep.h5")
        with open(out, "wb") as f:
            f.write(b"previous results")
        self.assert_usage_error(["run", "-w", SMALL, "--out", out], "already exists")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"previous results")

    def test_unknown_flag_and_bad_number(self):
        self.assert_usage_error(["run", "-w", SMALL, "--batchsize", "3"], "batchsize")
        self.assert_usage_error(["run", "-w", SMALL, "--batch", "lots"], "lots")


class Matrices(Workdir):
    def test_config_file_expands_and_flags_override(self):
        cfg = self.path("sweep.toml")
        with open(cfg, "w") as f:
            f.write(f'workload = ["{SMALL}", "{SMALL_FCN}"]\nbatch = [4, 8]\nwarmup = 0\niterations = 2\n')
        out = self.path("sweep.h5")
        proc = dlscale(["run", "--config", cfg, "--threads", "1", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            cases = [f["cases"][n] for n in sorted(f["cases"])]
            got = [(c.attrs["workload"], int(c.attrs["batch_per_rank"]), int(c.attrs["threads"])) for c in cases]
            self.assertEqual(got, [(SMALL, 4, 1), (SMALL, 8, 1), (SMALL_FCN, 4, 1), (SMALL_FCN, 8, 1)])
            self.assertEqual(f.attrs["config"].count("[[case]]"), 4)
        self.assertEqual(report.check_file(out), [])

    def test_comma_lists_on_the_command_line(self):
        out = self.path("lists.h5")
        proc = dlscale(["run", "-w", f"{SMALL},{SMALL_FCN}", "--batch", "2,6", "--scaling", "strong",
                        "--warmup", "0", "--iterations", "2", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            rows = [(f["cases"][n].attrs["batch_per_rank"], f["cases"][n].attrs["global_batch"]) for n in sorted(f["cases"])]
        self.assertEqual(rows, [(1, 2), (3, 6), (1, 2), (3, 6)])

    def test_resume_runs_only_missing_cases(self):
        out = self.path("resume.h5")
        base = ["-w", SMALL, "--warmup", "0", "--iterations", "2", "--out", out]
        self.assertEqual(dlscale(["run", "--batch", "4"] + base).returncode, 0)
        proc = dlscale(["run", "--batch", "4,8", "--resume"] + base)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("skipped", proc.stdout)
        with h5py.File(out, "r") as f:
            self.assertEqual(sorted(f["cases"]), ["0000", "0001"])
            self.assertEqual(f["cases/0001"].attrs["batch_per_rank"], 8)
            self.assertEqual(sorted(f["runs"]), ["0000", "0001"])
        proc = dlscale(["run", "--batch", "4", "--overwrite"] + base)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(sorted(f["cases"]), ["0000"])

    def test_a_resume_records_its_own_run_and_its_cases_name_it(self):
        # Allowed: a resume with another matrix (and, on a cluster, other hosts or another
        # build). Its cases sit under its own run record, never under the first run's.
        out = self.path("runs.h5")
        first = ["run", "-w", SMALL, "--batch", "4", "--warmup", "0", "--iterations", "2", "--out", out]
        self.assertEqual(dlscale(first).returncode, 0)
        second = ["run", "-w", f"{SMALL},{SMALL_FCN}", "--batch", "4", "--threads", "1", "--warmup", "0",
                  "--iterations", "2", "--out", out, "--resume"]
        proc = dlscale(second)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            root = dict(f.attrs)
            self.assertEqual(sorted(f["runs"]), ["0000", "0001"])
            runs = [f["runs"][n] for n in sorted(f["runs"])]
            self.assertEqual([int(r.attrs["resumed"]) for r in runs], [0, 1])
            self.assertTrue(runs[0].attrs["command_line"].endswith(" ".join(first)))
            self.assertTrue(runs[1].attrs["command_line"].endswith(" ".join(second)))
            self.assertEqual(runs[0].attrs["command_line"], root["command_line"], "the root describes the first run")
            self.assertEqual(runs[0].attrs["config"], root["config"])
            self.assertIn(SMALL_FCN, runs[1].attrs["config"])
            self.assertNotIn(SMALL_FCN, runs[0].attrs["config"])
            for r in runs:  # each run's own rank table, software and environment, laid out as /system
                self.assertEqual(len(r["ranks"]), 2)
                self.assertIn("dlscale", r["software"].attrs)
                self.assertIn("environment", r)
            # The first run's case, then the resume's two (batch 4 with one thread is a new case).
            self.assertEqual([(f["cases"][n].attrs["workload"], int(f["cases"][n].attrs["run"]))
                              for n in sorted(f["cases"])], [(SMALL, 0), (SMALL, 1), (SMALL_FCN, 1)])
        self.assertEqual(report.check_file(out), [])
        # The report reads each case under its own run: with the resume's rank table naming
        # other hosts (as a requeued Slurm job's would), its cases show those hosts, the first
        # run's case its own; `summary` lists both runs.
        moved = self.path("moved.h5")
        shutil.copy(out, moved)
        with h5py.File(moved, "r+") as f:
            ranks = f["runs/0001/ranks"][()]
            ranks["host"] = [b"node-a", b"node-b"]
            dtype = f["runs/0001/ranks"].dtype
            del f["runs/0001/ranks"]
            f["runs/0001"].create_dataset("ranks", data=ranks, dtype=dtype)
        tool = [sys.executable, os.path.join(SOURCE, "results", "dlscale-report")]
        ranks_csv = subprocess.run(tool + ["ranks", moved, "--format", "csv"], capture_output=True, text=True,
                                   timeout=300)
        self.assertEqual(ranks_csv.returncode, 0, ranks_csv.stderr)
        hosts = {(r["case"], r["rank"]): r["host"] for r in csv.DictReader(io.StringIO(ranks_csv.stdout))}
        self.assertEqual(hosts[("0001", "1")], "node-b")
        self.assertEqual(hosts[("0002", "0")], "node-a")
        self.assertNotIn(hosts[("0000", "0")], ("node-a", "node-b"))
        summary = subprocess.run(tool + ["summary", "--wide", moved], capture_output=True, text=True, timeout=300)
        self.assertEqual(summary.returncode, 0, summary.stderr)
        self.assertRegex(summary.stdout, r"run 0000, created .*: 2 ranks on .*; cases 0000;")
        self.assertRegex(summary.stdout, r"run 0001, resumed .*: 2 ranks on node-a, node-b; .*cases 0001, 0002;")
        # Refused: a resume by a job of another size (the file's scaling series and rank tables
        # are for one job size), one line naming both sizes, the file untouched.
        with open(out, "rb") as f:
            before = f.read()
        proc = dlscale(second, ranks=1)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(error_lines(proc), [f"dlscale: error: --resume: {out} was written by 2 ranks, this job has 1"])
        with open(out, "rb") as f:
            self.assertEqual(f.read(), before)

    @unittest.skipIf(HAS_GPU, "a GPU is visible: these tests are about machines without one")
    @needs_drivers("libtorch")  # the default driver, and its message
    def test_missing_device_in_a_mixed_request_is_recorded_not_faked(self):
        out = self.path("cuda.h5")
        proc = dlscale(["run", "-w", SMALL, "--device", "cpu,cuda", "--iterations", "1", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(f["cases/0000"].attrs["status"], "ok")
            case = f["cases/0001"]
            self.assertEqual(case.attrs["device_type"], "cuda")
            self.assertEqual(case.attrs["status"], "unsupported")
            self.assertIn("without CUDA", case.attrs["message"])
            self.assertNotIn("summary", case)
            self.assertEqual(case["iter_time_s"].shape, (2, 0))

    @unittest.skipIf(HAS_GPU, "a GPU is visible: these tests are about machines without one")
    @needs_drivers("libtorch")
    def test_only_a_missing_device_is_bad_input(self):
        self.assert_usage_error(["run", "-w", SMALL, "--device", "cuda", "--out", self.path("a.h5")],
                                "-d libtorch --device cuda: this LibTorch was built without CUDA")
        self.assertFalse(os.path.exists(self.path("a.h5")))

    @unittest.skipIf(HAS_GPU, "a GPU is visible: these tests are about machines without one")
    @needs_drivers("cuda")
    def test_cuda_driver_without_a_gpu_is_one_clear_error(self):
        # -d cuda alone: the driver's own device is the GPU.
        proc = self.assert_usage_error(["run", "-w", SMALL, "-d", "cuda", "--out", self.path("a.h5")],
                                       "-d cuda --device cuda: no usable CUDA GPU on this machine")
        self.assertEqual(len(error_lines(proc)), 1, proc.stderr)
        self.assertFalse(os.path.exists(self.path("a.h5")))

    def test_phases_sum_to_the_step(self):
        out = self.path("phases.h5")
        proc = dlscale(["run", "-w", SMALL_FCN, "--batch", "16", "--iterations", "4", "--phases", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            p = f["cases/0000/phase_time_s"][()]
            t = f["cases/0000/iter_time_s"][()]
        self.assertEqual(p.shape, (2, 4, 4))
        self.assertTrue(np.all(p >= 0))
        np.testing.assert_allclose(p.sum(axis=2), t, rtol=1e-9)




class RealData(Workdir):
    def test_mnist_idx_written_by_the_test(self):
        rng = np.random.default_rng(7)
        n = 48
        write_idx(self.path("mnist"), rng.integers(0, 256, n * 784, dtype=np.uint8).tolist(),
                  [i % 10 for i in range(n)])
        out = self.path("idx.h5")
        proc = dlscale(["run", "-w", SMALL, "--data", "mnist:" + self.path("mnist"), "--batch", "8",
                        "--iterations", "4", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            case = f["cases/0000"]
            self.assertEqual(case.attrs["status"], "ok")
            self.assertEqual(case.attrs["data"], "mnist:" + self.path("mnist"))
            self.assertIn("--data mnist:", case.attrs["case_key"])
            self.assertTrue(np.all(np.isfinite(case["loss"][()])))

    def test_dataset_that_does_not_fit_is_bad_input(self):
        write_idx(self.path("mnist"), [0] * 784 * 2, [1, 2])
        proc = dlscale(["run", "-w", "cifar10_cnn", "--data", "mnist:" + self.path("mnist"), "--out", self.path("x.h5")])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("does not fit workload 'cifar10_cnn'", "".join(error_lines(proc)))
        self.assertFalse(os.path.exists(self.path("x.h5")))

    @unittest.skipUnless(os.path.exists(os.path.join(SOURCE, "data", "mnist", "train-images-idx3-ubyte")),
                         "scripts/fetch-mnist.sh has not run")
    def test_real_digits_train(self):
        out = self.path("digits.h5")
        proc = dlscale(["run", "-w", "mnist_cnn", "--data", "mnist:" + os.path.join(SOURCE, "data", "mnist"),
                        "--batch", "32", "--warmup", "0", "--iterations", "40", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            loss = f["cases/0000/loss"][()]
        # 40 SGD steps over different real batches: the loss falls from chance level (ln 10).
        self.assertLess(loss[-8:].mean(), loss[:8].mean())


@needs_drivers("libtorch")  # the built-in suites name their drivers
class SmokeSuiteCoversTheCatalog(Workdir):
    def test_smoke_suite_runs_every_network(self):
        # The smoke suite into results/smoke.h5. The flags given still apply, so this is every
        # catalog network at batch 2 for one iteration.
        proc = dlscale(["run", "--suite", "smoke", "--batch", "2", "--warmup", "0", "--iterations", "1"], ranks=1,
                       cwd=self.dir, timeout=1200)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = self.path("results/smoke.h5")
        with h5py.File(out, "r") as f:
            cases = {f["cases"][n].attrs["workload"]: f["cases"][n] for n in f["cases"]}
            self.assertEqual(sorted(cases), sorted(WORKLOADS_MD_PARAMS))
            for name, params in WORKLOADS_MD_PARAMS.items():
                case = cases[name]
                self.assertEqual(case.attrs["status"], "ok", f"{name}: {case.attrs['message']}")
                self.assertEqual(case.attrs["params"], params, name)
                self.assertEqual(case.attrs["batch_per_rank"], 2, name)
                self.assertEqual(case["iter_time_s"].shape, (1, 1), name)
                self.assertTrue(np.isfinite(case["loss"][0]), name)
        summary = subprocess.run([sys.executable, os.path.join(SOURCE, "results", "dlscale-report"), "summary", out],
                                 capture_output=True, text=True)
        self.assertEqual(summary.returncode, 0, summary.stderr)
        for name in WORKLOADS_MD_PARAMS:
            self.assertIn(name, summary.stdout)


class DefaultStudy(Workdir):
    @needs_drivers("libtorch", "onednn", "kokkos")  # the study suite's every CPU driver
    def test_no_selection_is_the_study_suite(self):
        # No workload, config or suite: the study suite, listed by a dry run (nothing runs).
        proc = dlscale(["run", "--dry-run", "--assume-gflops", "10"], cwd=self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("-> results/study.h5", proc.stdout)
        cases = [line.split("   # ")[0] for line in proc.stdout.splitlines() if re.match(r"^\d{4} dlscale run ", line)]
        scaling = [c for c in cases if "--phases" in c]
        # Strong and weak scaling over 1 and 2 ranks, with phases, and every CPU driver.
        for mode in ("strong", "weak"):
            for ranks in ("1", "2"):
                self.assertTrue(any(f"--scaling {mode}" in c and f"--ranks {ranks}" in c for c in scaling)
                                or mode == "weak" and any(f"--ranks {ranks}" in c and "--scaling" not in c
                                                          for c in scaling), (mode, ranks))
        for driver in ("libtorch", "onednn", "kokkos", "reference"):
            self.assertTrue(any(f"-d {driver}" in c or driver == "libtorch" and " -d " not in c for c in scaling),
                            driver)
        for workload in ("cifar10_cnn", "fcn5", "lstm32"):
            self.assertTrue(any(workload in c for c in scaling), workload)
        self.assertTrue(any("--threads 2" in c for c in cases))  # the thread sweep

    @needs_drivers("libtorch", "onednn", "kokkos")
    def test_one_process_names_the_command_that_runs_the_study(self):
        # `dlscale run` alone as one process: the study needs 2 ranks. One line with the exact
        # command, exit 2, nothing created; not an error about a --ranks the user never typed.
        proc = subprocess.run([DLSCALE, "run"], cwd=self.dir, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        lines = error_lines(proc)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(f"`mpirun -np 2 --bind-to none {DLSCALE} run`", lines[0])
        self.assertNotIn("--ranks", lines[0])
        self.assertEqual(os.listdir(self.dir), [])

    def test_more_threads_than_a_rank_has_cores_is_warned_before_running(self):
        threads = (os.cpu_count() or 1) + 1  # beyond any rank's CPU set on this machine
        proc = dlscale(["run", "-w", "mnist_fnn:width=16", "--batch", "4", "--warmup", "0", "--iterations", "1",
                        "--threads", f"1,{threads}", "--ranks", "1", "--peak", "skip", "--out", "t.h5"], cwd=self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        warnings = [line for line in proc.stderr.splitlines() if "threads per rank" in line]
        self.assertEqual(len(warnings), 1, proc.stderr)
        self.assertIn(f"case 0001 asks for {threads} threads per rank, but the CPU set of rank 0 is smaller",
                      warnings[0])

    def test_progress_modes(self):
        small = ["run", "-w", "mnist_fnn:width=16", "--batch", "4", "--warmup", "1", "--iterations", "3",
                 "--ranks", "1,2", "--overwrite", "--out", self.path("p.h5")]
        bar = dlscale(small + ["--progress", "bar"])
        self.assertEqual(bar.returncode, 0, bar.stderr)
        # Rewritten in place: the case count, the time elapsed and an estimate of the time left.
        # (text mode reads the carriage return as a newline; the erase-line sequence stays)
        lines = [line.strip() for line in bar.stderr.split("\033[K") if line.startswith("[case ")]
        self.assertTrue(lines, bar.stderr)
        self.assertTrue(any(re.match(r"\[case 2/2\] \d+:\d\d elapsed, about \d+:\d\d left \| mnist_fnn", line)
                            for line in lines), lines)
        for mode in ("none", "plain"):
            proc = dlscale(small + ["--progress", mode])
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("\033[K", proc.stderr, mode)  # plain: whole lines only, at most one per 10 s
            self.assertEqual(len([line for line in proc.stdout.splitlines() if line.endswith("| ok")]), 2)
        bad = small[:-1] + [self.path("bad.h5"), "--progress", "fancy"]
        proc = dlscale(bad)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(error_lines(proc), ["dlscale: error: --progress fancy: expected none, plain or bar"])
        self.assertFalse(os.path.exists(self.path("bad.h5")))  # nothing run


class MachineReadable(Workdir):
    """--format json, --dry-run and --version: output for scripts, dashboards and CI."""

    MATRIX = ["-w", "mnist_fnn:width=16,fcn5:features=64,width=32", "-d", "reference,onednn",
              "--batch", "4,8", "--warmup", "1", "--iterations", "2"]

    @needs_drivers("onednn")
    def test_json_lines_equal_the_files_summary(self):
        out = self.path("j.h5")
        proc = dlscale(["run"] + self.MATRIX + ["--format", "json", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        objects = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout holds JSON only
        self.assertIn("# dlscale run", proc.stderr)  # the pasteable commands moved to stderr
        with h5py.File(out, "r") as f:
            names = sorted(f["cases"])
            self.assertEqual([o["case"] for o in objects], names)
            for o in objects:
                g = f["cases"][o["case"]]
                for key, value in list(g.attrs.items()) + list(g["summary"].attrs.items()):
                    value = value.decode() if isinstance(value, bytes) else value
                    if isinstance(value, str):
                        self.assertEqual(o[key], value, key)
                    elif np.isnan(value):  # unavailable (energy on a machine without counters)
                        self.assertIsNone(o[key], key)
                    else:
                        self.assertEqual(float(o[key]), float(value), key)  # exact: shortest round trip
                self.assertEqual(o["status"], "ok")
                self.assertGreater(o["exposed_allreduce_median_s"], 0)
                # The least rank's exposed all-reduce, never above the slowest rank's.
                self.assertTrue(0 < o["exposed_allreduce_least_median_s"] <= o["exposed_allreduce_median_s"], o)

    @needs_drivers("onednn")
    def test_dry_run_lists_exactly_the_cases_a_run_records_and_writes_nothing(self):
        out = self.path("d.h5")
        proc = dlscale(["run"] + self.MATRIX + ["--dry-run", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertFalse(os.path.exists(out))
        listed = [line.split("   # ")[0].split(" ", 1)[1] for line in proc.stdout.splitlines()
                  if re.match(r"^\d{4} dlscale run ", line)]
        self.assertEqual(len(listed), 8)
        self.assertRegex(proc.stdout, r"estimated [0-9.e+-]+ s of training steps")
        self.assertRegex(proc.stdout, r"rate: onednn cpu fp32 flush t=1: [0-9.]+ GFLOP/s measured")
        run = dlscale(["run"] + self.MATRIX + ["--out", out])
        self.assertEqual(run.returncode, 0, run.stderr)
        with h5py.File(out, "r") as f:
            keys = [f["cases"][n].attrs["case_key"] for n in sorted(f["cases"])]
        self.assertEqual(listed, [k.decode() if isinstance(k, bytes) else k for k in keys])
        given = dlscale(["run"] + self.MATRIX + ["--dry-run", "--assume-gflops", "10", "--out", out + "2"])
        self.assertEqual(given.returncode, 0, given.stderr)
        self.assertIn("at 10 GFLOP/s per rank, as given", given.stdout)
        self.assertNotIn("measured", given.stdout)

    def test_bad_format_and_bad_dry_run_matrix(self):
        self.assert_usage_error(["run", "-w", SMALL, "--format", "yaml"], "--format yaml")
        self.assert_usage_error(["run", "-w", SMALL, "--dry-run", "--batch", "0"], "batch must be positive")
        self.assert_usage_error(["run", "-w", SMALL, "--dry-run", "--assume-gflops", "-3"], "--assume-gflops")
        self.assert_usage_error(["run", "-w", SMALL, "--assume-gflops", "3"], "--assume-gflops goes with --dry-run")

    def test_version(self):
        proc = dlscale(["--version"], ranks=1)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout.strip(), r"^dlscale \d+\.\d+\.\d+ \(commit ([0-9a-f]+(-dirty)?|unknown)\)$")


class InfoAndList(unittest.TestCase):
    def test_info_prints_provenance(self):
        proc = dlscale(["info"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for needle in ("Open MPI", "hdf5", "blas", "Ranks", *compiled_drivers()):
            self.assertIn(needle, proc.stdout)

    def test_list_prints_the_catalog(self):
        proc = dlscale(["list"], ranks=1)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("117997696", proc.stdout)
        self.assertIn("study", proc.stdout)
        self.assertIn("smoke", proc.stdout)


if __name__ == "__main__":
    unittest.main()
