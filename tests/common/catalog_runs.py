"""What the end-to-end tests of several drivers share (imported, not a test): docs/workloads.md's
parameter counts, and one run of every catalog network at batch 2 through the dlscale binary
under a real mpiexec (DLSCALE_BIN and MPIEXEC from CTest).
"""

import os
import subprocess

import h5py

# docs/workloads.md's parameter counts (biases included): the specification, independent of the
# catalog code.
WORKLOADS_MD_PARAMS = {
    "fcn5": 117997696, "fcn8": 130586752, "alexnet": 61100840, "resnet50": 25557032,
    "lstm32": 6180624, "lstm64": 6180624, "mnist_cnn": 225034, "cifar10_cnn": 315722,
    "mnist_fnn": 669706, "vgg16_cifar": 33638218, "imdb_lstm": 213301, "mnist_cnn_nayak": 1669002,
}


def train_catalog(test, driver, ranks, out):
    """Trains every catalog network one step at batch 2 on `driver` and `ranks` ranks into `out`,
    checks each case (status ok, the driver, docs/workloads.md's parameter count, the rank count, the
    batch, one positive loss) as subtests of `test`, and returns /system/software's attributes."""
    cmd = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(ranks), os.environ["DLSCALE_BIN"], "run",
           "-w", ",".join(WORKLOADS_MD_PARAMS), "-d", driver, "--batch", "2", "--warmup", "0", "--iterations", "1",
           "--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    test.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
    with h5py.File(out, "r") as f:
        names = sorted(f["cases"])
        cases = [dict(f["cases"][k].attrs) for k in names]
        losses = [f["cases"][k]["loss"][()] for k in names]
        software = dict(f["system/software"].attrs)
    test.assertEqual([c["workload"] for c in cases], list(WORKLOADS_MD_PARAMS))
    for c, loss in zip(cases, losses):
        with test.subTest(workload=c["workload"], ranks=ranks):
            test.assertEqual(c["status"], "ok", c["message"])
            test.assertEqual(c["driver"], driver)
            test.assertEqual(c["params"], WORKLOADS_MD_PARAMS[c["workload"]])
            test.assertEqual(c["ranks"], ranks)
            test.assertEqual(c["batch_per_rank"], 2)
            test.assertEqual(loss.shape, (1,))
            test.assertTrue(loss[0] > 0)
    return software
