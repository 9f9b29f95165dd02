"""GPU end to end (label gpu): the dlscale binary trains every catalog network on the cuda driver,
records the GPU it ran on, turns an out-of-memory batch into an `oom` case and goes on, and reduces
gradient buckets during backward. The faults on the NCCL path are test_gpu_faults.py's.

Without a GPU the module exits 77, which CTest reports as skipped. CTest runs it in shards (its
load_tests) and sets DLSCALE_BIN, MPIEXEC and PYTHONPATH (tests/README.md).
"""

import math
import subprocess
import sys
import unittest

import dlscale_test
from dlscale_test import DLSCALE, Workdir, driver_devices, visible_gpus

GPUS = visible_gpus()
if GPUS == 0:
    print("test_gpu_e2e: dlscale sees no GPU: skipped")
    sys.exit(77)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

load_tests = dlscale_test.load_tests  # CTest runs the module in shards (tests/CMakeLists.txt)


def catalog():
    """The workload names `dlscale list` prints."""
    lines = subprocess.run([DLSCALE, "list"], capture_output=True, text=True, check=True).stdout.splitlines()
    start = lines.index("Workloads") + 2
    end = lines.index("", start)
    return [line.split()[0] for line in lines[start:end]]


CATALOG = catalog()


def gpu_drivers():
    """The drivers `dlscale list` shows able to run on cuda (the cuda driver; LibTorch where it was
    built against a CUDA LibTorch)."""
    return [name for name, devices in driver_devices().items() if "cuda" in devices]


def dlscale(args, ranks=1, timeout=900):
    """One rank unless told otherwise: most of these need one GPU."""
    return dlscale_test.dlscale(args, ranks=ranks, timeout=timeout)


class GpuRuns(Workdir):
    def test_every_workload_trains_on_the_cuda_driver(self):
        out = self.path("all.h5")
        proc = dlscale(["run", "-d", "cuda", "-w", ",".join(CATALOG), "--batch", "2", "--warmup", "1",
                        "--iterations", "3", "--phases", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertTrue(f["system/ranks"]["device"][0].decode().startswith("cuda:"))
            self.assertIn("cudnn", f["system/software"].attrs)
            self.assertEqual(len(f["cases"]), len(CATALOG))
            for name, case in f["cases"].items():
                a = case.attrs
                self.assertEqual(a["status"], "ok", f"{a['workload']}: {a['message']}")
                self.assertEqual(a["device_type"], "cuda")
                self.assertTrue(np.all(np.isfinite(case["loss"][()])), a["workload"])
                self.assertGreater(case["memory"]["device_peak_bytes"][0], 4 * a["params"], a["workload"])
                t = case["iter_time_s"][()]
                phases = case["phase_time_s"][()]
                self.assertTrue(np.all(t > 0))
                # Event-timed phases partition the event-timed step.
                np.testing.assert_allclose(phases.sum(axis=2), t, rtol=1e-6, err_msg=a["workload"])

    def test_precisions(self):
        out = self.path("prec.h5")
        proc = dlscale(["run", "-d", "cuda", "-w", "fcn5:features=256,width=128,mnist_cnn,lstm32:seq=8",
                        "--precision", "fp32,tf32,bf16", "--batch", "8", "--iterations", "3", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(len(f["cases"]), 9)
            for case in f["cases"].values():
                a = case.attrs
                self.assertEqual(a["status"], "ok", f"{a['workload']} {a['precision']}: {a['message']}")
                self.assertTrue(all(math.isfinite(x) for x in case["loss"][()]))

    def test_every_workload_trains_in_bf16_on_every_gpu_driver(self):
        drivers = gpu_drivers()
        out = self.path("bf16.h5")
        proc = dlscale(["run", "-d", ",".join(drivers), "--device", "cuda", "-w", ",".join(CATALOG),
                        "--precision", "bf16", "--batch", "2", "--warmup", "1", "--iterations", "3", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(len(f["cases"]), len(CATALOG) * len(drivers))
            for case in f["cases"].values():
                a = case.attrs
                self.assertEqual(a["status"], "ok", f"{a['driver']} {a['workload']}: {a['message']}")
                self.assertEqual(a["precision"], "bf16")
                self.assertTrue(np.all(np.isfinite(case["loss"][()])), f"{a['driver']} {a['workload']}")

    def test_out_of_memory_is_recorded_and_the_sweep_goes_on(self):
        out = self.path("oom.h5")
        # FCN-5 of 4 features and width 4096 at 20 million samples: 0.5 GB of inputs and labels on
        # the host, but 328 GB for the first activation on the GPU, so it is the device that runs
        # out, at the first large allocation: the test holds no device memory that the tests beside
        # it (ctest -j) could miss.
        proc = dlscale(["run", "-d", "cuda", "-w", "fcn5:features=4,width=4096", "--batch", "20000000,8",
                        "--iterations", "2", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(f["cases/0000"].attrs["status"], "oom", f["cases/0000"].attrs["message"])
            self.assertIn("CUDA error", f["cases/0000"].attrs["message"])
            self.assertEqual(f["cases/0001"].attrs["status"], "ok", f["cases/0001"].attrs["message"])

    def test_nccl_microbenchmark_is_exact(self):
        out = self.path("nccl.h5")
        ranks = min(2, GPUS)  # NCCL takes one GPU per rank
        proc = dlscale(["allreduce", "--backend", "nccl", "--sizes", "12,4100,1000004,4194332", "--iterations", "3",
                        "--out", out], ranks=ranks)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            g = f["allreduce/0000"]
            self.assertEqual(g.attrs["backend"], "nccl")
            self.assertEqual(list(g["bytes"][()]), [12, 4100, 1000004, 4194332])
            self.assertTrue(np.all(g["errors"][()] == 0))
            self.assertTrue(np.all(g["time_s"][()] > 0))

    @unittest.skipIf(GPUS < 2, "needs two GPUs (one per rank)")
    def test_two_ranks_phases_and_nccl_projection(self):
        out = self.path("two.h5")
        proc = dlscale(["run", "-d", "cuda", "-w", "fcn5:features=1024,width=512", "--batch", "16", "--phases",
                        "--iterations", "5", "--out", out], ranks=2)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            devices = [d.decode() for d in f["system/ranks"]["device"]]
            self.assertNotEqual(devices[0], devices[1])
            case = f["cases/0000"]
            self.assertEqual(case.attrs["status"], "ok", case.attrs["message"])
            self.assertIn("projection", case)
            self.assertEqual(f["allreduce/0000"].attrs["backend"], "nccl")
            self.assertTrue(np.all(f["allreduce/0000/errors"][()] == 0))

    def test_buckets_on_one_gpu_overlap_backward_and_train_alike(self):
        # One rank: the buckets go through a one-rank NCCL on their own stream; a bucket larger
        # than every gradient is one all-reduce after backward, the baseline of the same path.
        out = self.path("buckets.h5")
        proc = dlscale(["run", "-d", "cuda", "-w", "fcn5:features=1024,width=512", "--batch", "16", "--phases",
                        "--bucket-mb", "1,100000", "--iterations", "5", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            cases = {f["cases"][n].attrs["bucket_mb"]: f["cases"][n] for n in f["cases"]}
            for case in cases.values():
                self.assertEqual(case.attrs["status"], "ok", case.attrs["message"])
                self.assertEqual(case.attrs["overlap"], 1)
                self.assertEqual(case.attrs["progress_thread"], 0, "NCCL needs no host thread: a stream")
                self.assertTrue(np.all(case["phase_time_s"][()][:, :, 2] >= 0))
            np.testing.assert_array_equal(cases[1.0]["loss"][()], cases[100000.0]["loss"][()])


if __name__ == "__main__":
    unittest.main()
