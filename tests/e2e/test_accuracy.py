"""End-to-end tests of accuracy mode (docs/running.md, "Accuracy runs"): `dlscale run --mode
accuracy` under a real `mpiexec -n 2` on real MNIST digits (the first 8,000 training and 2,000
test digits of data/mnist, from scripts/fetch-mnist.sh; skipped when they are missing), its dlscale/3 file read back with plain
h5py, and every bad input of the mode refused with exit 2, one line and no file.

The networks are tiny and the runs short (one or two epochs, a large validation fraction so that
an epoch trains on few samples): these tests check what is recorded and how, not how fast or how
well a network learns. They use the float64 reference driver, which every build has;
DLSCALE_ACCURACY_DRIVER names another (libtorch, onednn, …) to run them on it.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH; by hand, see tests/README.md.
"""

import csv
import json
import math
import os
import subprocess
import sys
import unittest

import h5py
import numpy as np

import dlscale_test
import mllog_rules
from dlscale_test import DLSCALE, SOURCE, Workdir, dlscale

load_tests = dlscale_test.load_tests  # AccuracyBadInput's tests run side by side

DRIVER = os.environ.get("DLSCALE_ACCURACY_DRIVER", "reference")
HAVE_MNIST = dlscale_test.mnist_head(8000, 2000) is not None
MNIST = dlscale_test.mnist_head(8000, 2000) or dlscale_test.MNIST
TINY = "mnist_fnn:width=16"
EPOCH_COLUMNS = ("epoch", "train_loss", "train_time_s", "cumulative_train_time_s", "val_accuracy", "val_loss",
                 "eval_time_s", "step", "samples")
REPEAT_ATTRS = ("seed", "epochs_run", "train_time_s", "test_time_s", "test_accuracy", "test_loss",
                "time_to_target_s", "target_reached", "target_epoch", "evaluations", "steps_run", "samples_run",
                "steps_to_target", "samples_to_target", "epochs_to_target")
SUMMARY_ATTRS = tuple(f"{stem}_{part}{unit}" for stem, unit in (("test_accuracy", ""), ("train_time", "_s"),
                                                                ("test_time", "_s"), ("time_to_target", "_s"))
                      for part in ("mean", "ci95_low", "ci95_high")) + ("targets_reached",)


class AccuracyTest(Workdir):
    def accuracy_run(self, out, *extra):
        args = ["run", "--mode", "accuracy", "-w", TINY, "-d", DRIVER, "--data", f"mnist:{MNIST}", "--threads", "1",
                "--peak", "skip", "--progress", "plain", "--out", out] + list(extra)
        proc = dlscale(args)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc


@unittest.skipUnless(HAVE_MNIST, "the MNIST digits are not in data/mnist (scripts/fetch-mnist.sh)")
class AccuracyRun(AccuracyTest):
    def test_repeats_epochs_and_summary_are_recorded(self):
        out = self.path("acc.h5")
        # Half the training set held out: each epoch trains on about 4,000 digits.
        proc = self.accuracy_run(out, "--optimizer", "adam", "--epochs", "2", "--batch", "16", "--validation", "0.5",
                                 "--repeats", "2", "--target-accuracy", "0.5")
        with h5py.File(out, "r") as f:
            self.assertEqual(f.attrs["schema"], "dlscale/4")
            case = f["cases/0000"]
            a = dict(case.attrs)
            self.assertEqual(a["status"], "ok", a["message"])
            self.assertEqual(a["mode"], "accuracy")
            self.assertEqual(a["optimizer"], "adam")
            self.assertEqual(a["learning_rate"], 0.001)  # Adam's default
            self.assertEqual((a["epochs"], a["repeats"], a["validation_fraction"]), (2, 2, 0.5))
            self.assertEqual(a["target_accuracy"], 0.5)
            # The real digits: 8,000 training images here, half held out, and the separate test set.
            total = a["train_samples"] + a["validation_samples"]
            self.assertEqual(a["validation_samples"], round(0.5 * total))
            self.assertGreater(a["test_samples"], 0)
            self.assertEqual(a["test_data"], f"mnist:{MNIST}:test")
            self.assertIn("--mode accuracy", a["case_key"])
            # Step samples belong to timing cases only.
            for timing_only in ("iter_time_s", "loss", "summary", "utilisation"):
                self.assertNotIn(timing_only, case)
            self.assertEqual(sorted(case["repeats"]), ["00", "01"])
            for r, name in enumerate(("00", "01")):
                rep = case["repeats"][name]
                ra = dict(rep.attrs)
                self.assertEqual(set(REPEAT_ATTRS) - set(ra), set())
                self.assertEqual(ra["seed"], 42 + r)
                epochs = rep["epochs"][()]
                self.assertEqual(epochs.dtype.names, EPOCH_COLUMNS)
                self.assertEqual(len(epochs), ra["epochs_run"])
                self.assertGreaterEqual(ra["epochs_run"], 1)
                self.assertLessEqual(ra["epochs_run"], 2)
                self.assertEqual(list(epochs["epoch"]), list(range(1, ra["epochs_run"] + 1)))
                np.testing.assert_allclose(epochs["cumulative_train_time_s"], np.cumsum(epochs["train_time_s"]))
                self.assertAlmostEqual(ra["train_time_s"], epochs["cumulative_train_time_s"][-1])
                self.assertTrue(np.all(epochs["train_time_s"] > 0) and np.all(epochs["eval_time_s"] > 0))
                self.assertTrue(np.all(np.isfinite(epochs["train_loss"])) and np.all(epochs["val_loss"] > 0))
                # Learning happened: far above the 0.1 of guessing among ten digits.
                self.assertGreater(ra["test_accuracy"], 0.5)
                self.assertTrue(np.all((epochs["val_accuracy"] > 0.3) & (epochs["val_accuracy"] <= 1)))
                # 0.5 is reachable: the run stops at the first epoch that reaches it.
                self.assertEqual(ra["target_reached"], 1)
                e = ra["target_epoch"]
                self.assertEqual(e, ra["epochs_run"])
                self.assertGreaterEqual(epochs["val_accuracy"][e - 1], 0.5)
                self.assertTrue(np.all(epochs["val_accuracy"][:e - 1] < 0.5))
                self.assertAlmostEqual(ra["time_to_target_s"], epochs["cumulative_train_time_s"][e - 1])
                self.assertGreater(ra["test_time_s"], 0)
            s = dict(case["accuracy_summary"].attrs)
            self.assertEqual(set(SUMMARY_ATTRS) - set(s), set())
            self.assertEqual(s["targets_reached"], 2)
            accuracies = [case["repeats"][n].attrs["test_accuracy"] for n in ("00", "01")]
            self.assertAlmostEqual(s["test_accuracy_mean"], np.mean(accuracies))
            # Two repeats: mean -+ t(0.975, 1) s / sqrt(2), t = 12.706.
            half = 12.706204736 * np.std(accuracies, ddof=1) / math.sqrt(2)
            self.assertAlmostEqual(s["test_accuracy_ci95_high"] - s["test_accuracy_mean"], half, places=6)
            self.assertAlmostEqual(s["test_accuracy_mean"] - s["test_accuracy_ci95_low"], half, places=6)
            self.assertEqual(len(case["memory"][()]), 2)
        # One progress line per epoch on stderr and the summary line on stdout.
        self.assertIn("repeat 1/2 epoch 1/2: train loss", proc.stderr)
        self.assertIn("validation accuracy", proc.stderr)
        summary = [line for line in proc.stdout.splitlines() if line.startswith("0000 ")]
        self.assertEqual(len(summary), 1, proc.stdout)
        for part in ("test accuracy", "training", "testing", "time to 0.5", "(2/2 reached)", "2 repeat(s)"):
            self.assertIn(part, summary[0])

    def test_an_unreachable_target_is_not_reached_and_the_epoch_limit_stops_the_run(self):
        out = self.path("unreachable.h5")
        proc = self.accuracy_run(out, "--epochs", "1", "--batch", "32", "--validation", "0.8", "--target-accuracy",
                                 "1.0")
        with h5py.File(out, "r") as f:
            case = f["cases/0000"]
            self.assertEqual(case.attrs["status"], "ok", case.attrs["message"])
            self.assertEqual(case.attrs["optimizer"], "sgd")
            self.assertEqual(case.attrs["learning_rate"], 0.01)
            rep = dict(case["repeats/00"].attrs)
            self.assertEqual(rep["epochs_run"], 1)
            self.assertEqual(rep["target_reached"], 0)
            self.assertEqual(rep["target_epoch"], 0)
            self.assertTrue(math.isnan(rep["time_to_target_s"]))
            self.assertLess(case["repeats/00/epochs"]["val_accuracy"][0], 1.0)
            s = dict(case["accuracy_summary"].attrs)
            self.assertEqual(s["targets_reached"], 0)
            self.assertTrue(math.isnan(s["time_to_target_mean_s"]))
            # One repeat: no interval, the bounds are the mean.
            self.assertEqual(s["test_accuracy_ci95_low"], s["test_accuracy_mean"])
        self.assertIn("time to 1: not reached in 1 epochs", proc.stdout)

    def test_a_failed_case_is_recorded_without_repeats_and_the_sweep_goes_on(self):
        out = self.path("timeout.h5")
        # Two cases (two batch sizes); both outlive a 1 ms --case-timeout at their first step.
        proc = self.accuracy_run(out, "--epochs", "1", "--batch", "16,32", "--validation", "0.8", "--case-timeout",
                                 "0.001")
        with h5py.File(out, "r") as f:
            self.assertEqual(sorted(f["cases"]), ["0000", "0001"])
            for name in ("0000", "0001"):
                case = f["cases"][name]
                self.assertEqual(case.attrs["status"], "timeout")
                self.assertIn("--case-timeout", case.attrs["message"])
                self.assertIn("repeat 1", case.attrs["message"])  # where it stopped
                self.assertNotIn("repeats", case)
                self.assertNotIn("accuracy_summary", case)
        self.assertIn("timeout:", proc.stdout)

    def test_resume_skips_a_finished_accuracy_case(self):
        out = self.path("resume.h5")
        args = ["--epochs", "1", "--batch", "32", "--validation", "0.8"]
        self.accuracy_run(out, *args)
        proc = self.accuracy_run(out, *args, "--resume")
        self.assertIn("# skipped (already in", proc.stdout)
        with h5py.File(out, "r") as f:
            self.assertEqual(sorted(f["cases"]), ["0000"])

    def test_the_optimizer_and_rate_reach_timing_cases_too(self):
        out = self.path("timing.h5")
        proc = dlscale(["run", "-w", TINY, "-d", DRIVER, "--optimizer", "adam", "--lr", "0.002", "--batch", "8",
                        "--warmup", "0", "--iterations", "2", "--threads", "1", "--peak", "skip", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            case = f["cases/0000"]
            self.assertEqual(case.attrs["status"], "ok", case.attrs["message"])
            self.assertEqual(case.attrs["mode"], "timing")
            self.assertEqual(case.attrs["optimizer"], "adam")
            self.assertEqual(case.attrs["learning_rate"], 0.002)
            self.assertEqual(case["iter_time_s"].shape, (2, 2))
            self.assertIn("--optimizer adam --lr 0.002", case.attrs["case_key"])
            self.assertNotIn("repeats", case)


    def test_ranks_accumulation_rate_scaling_finer_evaluation_and_mllog(self):
        out, logs = self.path("scale.h5"), self.path("mllog")  # made by dlscale
        # One and two ranks, each with 2 micro-batches of 16: global batches 32 and 64, the rate
        # scaled linearly from 0.05 at 32 and warmed up over a quarter epoch; an evaluation every
        # 960 samples; two repeats each.
        proc = self.accuracy_run(out, "--ranks", "1,2", "--accumulate", "2", "--batch", "16", "--lr", "0.05",
                                 "--lr-scaling", "linear", "--lr-base-batch", "32", "--lr-warmup-epochs", "0.25",
                                 "--eval-every", "960", "--epochs", "1", "--validation", "0.5", "--repeats", "2",
                                 "--target-accuracy", "0.6", "--mllog", logs)
        with h5py.File(out, "r") as f:
            self.assertEqual(sorted(f["cases"]), ["0000", "0001"])
            for name, ranks in (("0000", 1), ("0001", 2)):
                case = f["cases"][name]
                a = dict(case.attrs)
                self.assertEqual(a["status"], "ok", a["message"])
                global_batch = 16 * ranks * 2
                self.assertEqual((a["ranks"], a["accumulate"], a["batch_per_rank"], a["global_batch"]),
                                 (ranks, 2, 16, global_batch))
                self.assertEqual((a["lr_scaling"], a["lr_base_batch"], a["lr_warmup_epochs"], a["eval_every"]),
                                 ("linear", 32, 0.25, 960))
                self.assertAlmostEqual(a["scaled_learning_rate"], 0.05 * global_batch / 32)
                for rname in ("00", "01"):
                    ra = dict(case["repeats"][rname].attrs)
                    rows = case["repeats"][rname]["epochs"][()]
                    self.assertEqual(len(rows), ra["evaluations"])
                    # Every 960 samples, counted in whole steps: the row's samples are its steps'.
                    np.testing.assert_array_equal(rows["samples"], rows["step"] * global_batch)
                    self.assertTrue(np.all(np.diff(rows["samples"]) >= 960 - global_batch))
                    self.assertTrue(np.all(rows["epoch"] == 1))
                    full_epoch = a["train_samples"] // global_batch
                    self.assertEqual(ra["steps_run"], rows["step"][-1] if ra["target_reached"] else full_epoch)
                    self.assertEqual(ra["samples_run"], ra["steps_run"] * global_batch)
                    if ra["target_reached"]:
                        hit = int(np.argmax(rows["val_accuracy"] >= 0.6))
                        self.assertEqual(ra["steps_to_target"], rows["step"][hit])
                        self.assertEqual(ra["samples_to_target"], rows["samples"][hit])
                        self.assertAlmostEqual(ra["time_to_target_s"], rows["cumulative_train_time_s"][hit])
                        epoch_samples = a["train_samples"] // global_batch * global_batch
                        self.assertAlmostEqual(ra["epochs_to_target"], ra["samples_to_target"] / epoch_samples)
                # The gradient noise scale: every step's two norms, from micro-batches of 16 and the
                # averaged gradient of the global batch.
                noise = case["noise_scale"]
                na = dict(noise.attrs)
                self.assertEqual((na["batch_small"], na["batch_big"]), (16, global_batch))
                steps = sum(case["repeats"][r].attrs["steps_run"] for r in ("00", "01"))
                self.assertEqual(na["steps"], steps)
                small, big = noise["small_sq"][()], noise["big_sq"][()]
                self.assertEqual(len(small), steps)
                # Averaging shrinks the noise: the mean gradient is shorter than its parts on average.
                self.assertGreater(small.mean(), big.mean())
                self.assertGreater(na["simple"], 0)
                self.assertLessEqual(na["ci95_low"], na["simple"])
                self.assertGreaterEqual(na["ci95_high"], na["simple"])
                self.assertIn("McCandlish", na["definition"])
        # One MLPerf log per case and repeat, each keeping the compliance checker's common rules.
        names = sorted(os.listdir(logs))
        self.assertEqual(names, [f"scale_case_{c}_repeat_{r}.log" for c in ("0000", "0001") for r in (1, 2)])
        for name in names:
            with open(os.path.join(logs, name)) as f:
                lines = f.read().splitlines()
            self.assertEqual(mllog_rules.check(lines), [], name)
            events = {e["key"]: e for e in mllog_rules.parse(lines)}
            ranks = 1 if "0000" in name else 2
            self.assertEqual(events["global_batch_size"]["value"], 32 * ranks)
            self.assertEqual(events["gradient_accumulation_steps"]["value"], 2)
            self.assertEqual(events["opt_name"]["value"], "sgd")
            self.assertAlmostEqual(events["opt_base_learning_rate"]["value"], 0.05 * ranks)
            self.assertEqual(events["seed"]["value"], 42 + int(name[-5]) - 1)
            self.assertIn(events["run_stop"]["metadata"]["status"], ("success", "aborted"))
        self.assertIn("noise scale", proc.stdout)
        self.check_time_to_target_split(out)

    def check_time_to_target_split(self, path):
        """dlscale-report's time to target at scale, from the file: the speedup over the smaller
        global batch is exactly the product of the hardware's and the statistical factor."""
        outdir = self.path("report")
        proc = subprocess.run([sys.executable, os.path.join(SOURCE, "results", "dlscale-report"), "report", path,
                               "-o", outdir], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(os.path.join(outdir, "time_to_target_scaling.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([(r["ranks"], r["global_batch"]) for r in rows], [("1", "32"), ("2", "64")])
        with h5py.File(path, "r") as f:
            def reached(name, key):
                values = [r.attrs[key] for r in f["cases"][name]["repeats"].values() if r.attrs["target_reached"]]
                self.assertTrue(values, f"case {name}: no repeat reached the target")
                return float(np.mean(values))

            t0, t1 = reached("0000", "time_to_target_s"), reached("0001", "time_to_target_s")
            s0, s1 = reached("0000", "steps_to_target"), reached("0001", "steps_to_target")
        row = rows[1]
        speedup, hardware, statistical = (float(row[k]) for k in ("speedup", "hardware_factor", "statistical_factor"))
        self.assertAlmostEqual(speedup, t0 / t1, places=9)
        self.assertAlmostEqual(statistical, s0 / s1, places=9)
        self.assertAlmostEqual(hardware * statistical, speedup, places=9)
        self.assertAlmostEqual(float(row["statistical_ideal"]), 2.0)  # B doubled
        self.assertAlmostEqual(float(row["hardware_ideal"]), 1.0)  # the same samples per rank and step
        self.assertTrue(os.path.isfile(os.path.join(outdir, "noise_scale.csv")))
        with open(os.path.join(outdir, "index.html")) as f:
            self.assertIn("time to target at scale", f.read())

    def test_the_mllog_checker_finds_what_a_log_breaks(self):
        # The checker the test above trusts, on a good log and on each kind of break.
        good = [
            ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "%s", "value": %s, '
            '"metadata": {}}' % (k, v) for k, v in (
                ("submission_benchmark", '"x"'), ("submission_org", '"o"'), ("submission_division", '"open"'),
                ("submission_status", '"research"'), ("submission_platform", '"p"'), ("cache_clear", "true"))]
        events = [("INTERVAL_START", "init_start", {}), ("POINT_IN_TIME", "train_samples", {}),
                  ("POINT_IN_TIME", "eval_samples", {}), ("POINT_IN_TIME", "seed", {}),
                  ("POINT_IN_TIME", "global_batch_size", {}), ("POINT_IN_TIME", "gradient_accumulation_steps", {}),
                  ("POINT_IN_TIME", "opt_name", {}), ("POINT_IN_TIME", "opt_base_learning_rate", {}),
                  ("INTERVAL_END", "init_stop", {}), ("INTERVAL_START", "run_start", {}),
                  ("INTERVAL_START", "epoch_start", {"epoch_num": 1}), ("INTERVAL_END", "epoch_stop", {"epoch_num": 1}),
                  ("INTERVAL_START", "eval_start", {"epoch_num": 1}),
                  ("POINT_IN_TIME", "eval_accuracy", {"epoch_num": 1}), ("INTERVAL_END", "eval_stop", {"epoch_num": 1}),
                  ("INTERVAL_END", "run_stop", {"status": "success"})]
        for t, k, m in events:
            good.append(":::MLLOG " + json.dumps({"namespace": "", "time_ms": 2, "event_type": t, "key": k,
                                                  "value": 1, "metadata": m}))
        self.assertEqual(mllog_rules.check(good), [])
        without_seed = [line for line in good if '"seed"' not in line]
        self.assertIn("seed: 0 times, needs exactly one", mllog_rules.check(without_seed))
        stop_first = [good[-1]] + good[:-1]
        self.assertTrue(any("out of order" in b for b in mllog_rules.check(stop_first)))
        bad_status = good[:-1] + [good[-1].replace("success", "done")]
        self.assertIn("run_stop status 'done'", mllog_rules.check(bad_status))

    def test_timing_cases_record_the_noise_scale_where_gradients_are_averaged(self):
        # One rank, one micro-batch: nothing averaged, no group (not zeros). Two micro-batches or
        # two ranks: the group, from micro-batches of 8 and the global batch.
        out = self.path("noise.h5")
        proc = dlscale(["run", "-w", TINY, "-d", DRIVER, "--batch", "8", "--ranks", "1,2", "--accumulate", "1,2",
                        "--warmup", "1", "--iterations", "6", "--threads", "1", "--peak", "skip", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            seen = []
            for case in f["cases"].values():
                a = dict(case.attrs)
                self.assertEqual(a["status"], "ok", a["message"])
                seen.append((a["ranks"], a["accumulate"]))
                self.assertEqual(a["global_batch"], 8 * a["ranks"] * a["accumulate"])
                if a["ranks"] * a["accumulate"] == 1:
                    self.assertNotIn("noise_scale", case)
                    continue
                noise = case["noise_scale"]
                self.assertEqual((noise.attrs["batch_small"], noise.attrs["batch_big"]), (8, a["global_batch"]))
                self.assertEqual(noise.attrs["steps"], 6)  # the timed steps
                self.assertEqual(noise["small_sq"].shape, (6,))
                self.assertTrue(np.all(noise["small_sq"][()] > 0) and np.all(noise["big_sq"][()] > 0))
            self.assertEqual(sorted(seen), [(1, 1), (1, 2), (2, 1), (2, 2)])


        def estimate(epochs):
            proc = dlscale(["run", "--mode", "accuracy", "-w", TINY, "-d", DRIVER, "--data", f"mnist:{MNIST}",
                            "--batch", "16", "--validation", "0.5", "--epochs", str(epochs), "--dry-run",
                            "--assume-gflops", "1", "--out", self.path("never.h5")])
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            line = next(line for line in proc.stdout.splitlines() if line.startswith("0000 "))
            self.assertIn("# about ", line)
            return float(line.split("# about ")[1].split(" s")[0])

        listing = subprocess.run([DLSCALE, "list", "--json", TINY], capture_output=True, text=True, check=True)
        train_flops = json.loads(listing.stdout)["train_flops_per_sample"]
        # 8,000 digits, half held out: 4,000 trained on in steps of 2 ranks x 16, per epoch.
        steps = (8000 - 4000) // 32
        training_s = train_flops * 16 * steps / 1e9  # per rank and epoch, at 1 GFLOP/s
        one, three = estimate(1), estimate(3)
        # The training steps, plus forward passes over 2,000 validation and 1,000 test digits a rank
        # (a forward pass is less work than a training step's forward and backward).
        self.assertGreater(one, training_s)
        self.assertLess(one, training_s + (2000 + 1000) * train_flops / 1e9)
        self.assertGreater(three, 2.5 * one)  # the epochs scale it; testing is paid once
        self.assertLess(three, 3 * one)
        self.assertFalse(os.path.exists(self.path("never.h5")))


class AccuracyBadInput(AccuracyTest):
    """Every rule of the mode: exit 2, one line naming the value, nothing written, nothing run."""

    side_by_side = 4  # each test waits mostly for the launcher to end a job that exited 2

    def refused(self, args, needle, files=None):
        for name, text in (files or {}).items():
            with open(self.path(name), "w") as f:
                f.write(text)
        before = sorted(os.listdir(self.dir))
        proc = dlscale(["run", "-w", TINY, "-d", "reference", "--out", "x.h5"] + args, cwd=self.dir, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        # mpiexec adds its own banner about the exit code; dlscale's part is one line.
        lines = [line for line in proc.stderr.splitlines() if line.startswith("dlscale")]
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("dlscale: error: "), lines[0])
        self.assertIn(needle, lines[0])
        for banned in ("Traceback", "terminate called", "MPI_ABORT", "HDF5-DIAG"):
            self.assertNotIn(banned, proc.stderr)
        self.assertNotIn("# dlscale run", proc.stdout)  # no case started
        self.assertEqual(sorted(os.listdir(self.dir)), before)  # no results file, no lock, no copy

    def test_synthetic_data_has_nothing_to_learn(self):
        self.refused(["--mode", "accuracy"], "--mode accuracy needs labelled data")

    def test_data_without_a_test_set(self):
        self.refused(["--mode", "accuracy", "--data", "tokens:corpus.h5"], "'tokens:corpus.h5' has no labelled test set")

    def test_the_test_split_is_not_a_training_set(self):
        self.refused(["--mode", "accuracy", "--data", f"mnist:{MNIST}:test"], "is a test set")

    def test_validation_outside_0_1(self):
        for v in ("0", "1", "1.5", "-0.2", "nan"):
            with self.subTest(validation=v):
                self.refused(["--mode", "accuracy", "--validation", v], f"'{v}'" if v == "nan" else f"got {v}")

    def test_learning_rate_not_positive(self):
        for lr in ("-0.01", "0"):
            with self.subTest(lr=lr):
                self.refused(["--lr", lr], f"--lr must be positive, got {lr}")

    def test_target_outside_0_1(self):
        for t in ("1.5", "0", "-1"):
            with self.subTest(target=t):
                self.refused(["--mode", "accuracy", "--target-accuracy", t], f"must be in (0, 1], got {t}")

    def test_epochs_and_repeats_below_one(self):
        self.refused(["--mode", "accuracy", "--epochs", "0"], "epochs must be from 1")
        self.refused(["--mode", "accuracy", "--repeats", "0"], "repeats must be from 1")

    def test_unknown_mode_and_optimizer(self):
        self.refused(["--mode", "training"], "unknown mode 'training'")
        self.refused(["--optimizer", "rmsprop"], "rmsprop")

    def test_toml_names_the_line_and_the_key_as_written(self):
        self.refused(["--config", "a.toml"], "a.toml:2: lr must be positive",
                     files={"a.toml": 'workload = "mnist_fnn"\nlr = -1.0\n'})
        self.refused(["--config", "b.toml"], "b.toml:3: target_accuracy must be in (0, 1]",
                     files={"b.toml": 'workload = "mnist_fnn"\nmode = "accuracy"\ntarget_accuracy = 2.0\n'})

    @unittest.skipUnless(HAVE_MNIST, "the MNIST digits are not in data/mnist")
    def test_evaluations_further_apart_than_an_epoch(self):
        self.refused(["--mode", "accuracy", "--data", f"mnist:{MNIST}", "--validation", "0.5", "--batch", "100",
                      "--eval-every", "5000"], "--eval-every 5000: more than an epoch's")

    def test_an_mllog_directory_that_cannot_be_made(self):
        # A new directory is made only inside an existing one; a file is not a directory.
        self.refused(["--mode", "accuracy", "--data", f"mnist:{MNIST}", "--mllog", "no-such-dir/logs/"],
                     "--mllog no-such-dir/logs/: neither a directory nor a new one in an existing directory")
        self.refused(["--mode", "accuracy", "--data", f"mnist:{MNIST}", "--mllog", "a.toml"],
                     "--mllog a.toml: neither a directory nor a new one", files={"a.toml": ""})

    def test_fewer_than_one_micro_batch(self):
        self.refused(["--accumulate", "0"], "--accumulate must be from 1 to 1048576, got 0")

    def test_rate_scaling_without_its_base_batch(self):
        self.refused(["--lr-scaling", "sqrt"], "--lr-scaling sqrt needs --lr-base-batch")

    def test_accumulation_that_does_not_divide_a_strong_batch(self):
        self.refused(["--ranks", "1", "--scaling", "strong", "--batch", "10", "--accumulate", "4"],
                     "global batch 10 does not divide by 1 ranks x 4 micro-batches")

    def test_a_split_that_leaves_no_epoch(self):
        # 1% of 8,000 digits left to train on cannot fill one global batch of 2 x 64.
        self.refused(["--mode", "accuracy", "--data", f"mnist:{MNIST}", "--validation", "0.99", "--batch", "64"],
                     "an epoch needs at least one global batch")


if __name__ == "__main__":
    unittest.main()
