"""Bad input, as a careless or hostile user would type it: every one of the inputs below must
end with exit code 2 and at most 3 lines on stderr, the first naming the offending value, with
no Python or C++ stack trace and no MPI_ABORT banner, before anything runs: no results file is
created and files that already exist stay byte for byte the same.

Damaged, foreign and partial results files, given to every dlscale-report command and to
`dlscale run --resume`, are tests/e2e/test_damaged_files.py's.

CTest sets DLSCALE_BIN, MPIEXEC and DLSCALE_SOURCE_DIR. The inputs run as one MPI process
(singleton), which is how a user's typo reaches dlscale first; tests/e2e/test_cli.py runs bad
input under mpiexec.
"""

import concurrent.futures
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

DLSCALE = os.environ["DLSCALE_BIN"]
W = "mnist_fnn:width=16"

FIFO = object()  # in `files`: a FIFO instead of a file with these bytes

cases = []
def c(*args, files=None, names=None):
    """One bad input: dlscale's arguments, files to create first, and what the message must name
    (default: the last argument, the flag before it, or one of the files)."""
    cases.append((list(args), files or {}, names))
# CLI syntax
c("run", "-w", W, "--batchsize", "3"); c("run", "-w", W, "--batch", "lots"); c("run", "-w", W, "--batch", "1.5")
c("run", "-w", W, "--batch", "0"); c("run", "-w", W, "--batch", "-4"); c("run", "-w", W, "--batch", "8,,16")
c("run", "-w", W, "--batch", "8,"); c("run", "-w", W, "--batch", ",8"); c("run", "-w", W, "--batch", "8,8")
c("run", "-w", W, "--batch", "9223372036854775808"); c("run", "-w", W, "--batch", "2147483648")
c("run", "-w", W, "--batch", "0x10"); c("run", "-w", W, "--batch", " 8"); c("run", "-w", W, "--batch", "")
c("run", "-w", W, "--warmup", "-1"); c("run", "-w", W, "--warmup", "4294967297"); c("run", "-w", W, "--iterations", "0")
c("run", "-w", W, "--iterations", "4294967297"); c("run", "-w", W, "--iterations", "1e3"); c("run", "-w", W, "--iterations", "1,2")
c("run", "-w", W, "--seed", "-1"); c("run", "-w", W, "--seed", "18446744073709551616"); c("run", "-w", W, "--seed", "9223372036854775808")
c("run", "-w", W, "--threads", "0"); c("run", "-w", W, "--threads", "-2"); c("run", "-w", W, "--threads", "100000000")
c("run", "-w", W, "--threads", "auto,auto"); c("run", "-w", W, "--threads", "two"); c("run", "-w", W, "--ranks", "0")
c("run", "-w", W, "--ranks", "2"); c("run", "-w", W, "--ranks", "1,1"); c("run", "-w", W, "--ranks", "-1")
c("run", "-w", W, "--bucket-mb", "nan"); c("run", "-w", W, "--bucket-mb", "inf"); c("run", "-w", W, "--bucket-mb", "-1")
c("run", "-w", W, "--bucket-mb", "1e400"); c("run", "-w", W, "--bucket-mb", "0,0"); c("run", "-w", W, "--device", "gpu")
c("run", "-w", W, "--allreduce-hierarchy", "tree"); c("run", "-w", W, "--grad-compression", "fp8"); c("run", "-w", W, "--grad-compression", "fp16,fp16"); c("run", "-w", W, "--grad-compression", ""); c("run", "-w", W, "--sharding", "zero3"); c("run", "-w", W, "--sharding", "optimizer,optimizer")
c("run", "-w", W, "--device", "cpu,cpu"); c("run", "-w", W, "--precision", "fp16"); c("run", "-w", W, "--precision", "bf-16")
c("run", "-w", W, "--denormals", "daz"); c("run", "-w", W, "--scaling", "linear"); c("run", "-w", W, "--scaling", "strong", "--batch", "0")
c("run", "-w", W, "--format", "yaml"); c("run", "-w", W, "--format", ""); c("run", "-w", W, "--assume-gflops", "3")
c("run", "-w", W, "--dry-run", "--assume-gflops", "0"); c("run", "-w", W, "--dry-run", "--assume-gflops", "nan")
c("run", "-w", W, "--dry-run", "--assume-gflops", "-inf"); c("run", "-w", W, "--out", ""); c("run", "-w", W, "--out", "/nonexistent/x.h5")
c("run", "-w", W, "--out", "."); c("run", "-w", W, "--out", "keep.h5", files={"keep.h5": b"previous results"})
c("run", "-w", W, "--resume", "--out", "keep.h5", files={"keep.h5": b"previous results"})
c("run", "-w", W, "--resume", "--out", "absent.h5"); c("run", "-w", W, "--resume", "--overwrite", "--out", "x.h5", names=["--overwrite and --resume"])
c("run", "-w", W, "--config", "missing.toml"); c("run", "-w", W, "--config", "."); c("run", "--config", "/dev/zero")
c("run", "--config", "big.toml", files={"big.toml": b"# " + b"x" * (2 << 20) + b"\n"})
c("run", "--config", "a.toml", "--suite", "smoke", files={"a.toml": b'workload = "mnist_fnn"\n'})
c("run", "--suite", "nightly-xl"); c("run", "--suite", "")
# workloads and drivers
c("run", "-w", "resnet9000"); c("run", "-w", ""); c("run", "-w", ",mnist_fnn"); c("run", "-w", "mnist_fnn,mnist_fnn")
c("run", "-w", "mnist_fnn:width"); c("run", "-w", "mnist_fnn:width="); c("run", "-w", "mnist_fnn:=16"); c("run", "-w", "mnist_fnn:width=0")
c("run", "-w", "mnist_fnn:width=-3"); c("run", "-w", "mnist_fnn:width=abc"); c("run", "-w", "mnist_fnn:width=16,width=32")
c("run", "-w", "mnist_fnn:depth=3"); c("run", "-w", "mnist_fnn:width=9223372036854775807"); c("run", "-w", "mnist_fnn:width=99999999999999999999")
c("run", "-w", "resnet50:width=4611686018427387904"); c("run", "-w", "fcn5:features=3037000500,width=3037000500")
c("run", "-w", "fcn5:features=1024,width=3012202793")  # each tensor fits an int64, their sum does not
c("run", "-w", "alexnet:image=10"); c("run", "-w", "lstm32:seq=0"); c("run", "-w", "fcn5", "--batch", "2147483647")
c("run", "-w", W, "-d", "caffe"); c("run", "-w", W, "-d", "reference,reference"); c("run", "-w", W, "-d", "")
c("run", "-w", W, "-d", "cuda"); c("run", "-w", W, "--precision", "BF16")
c("run", "-w", W, "--data", "mnist:/nonexistent"); c("run", "-w", W, "--data", "imagenet:/x"); c("run", "-w", W, "--data", "")
c("run", "-w", "lstm32", "--data", "mnist:/tmp")
# TOML
T = lambda text: {"m.toml": text.encode()}
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\n\nbatch = [8,\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbatchsize = 8\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\niterations = 4294967297\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\niterations = "ten"\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbatch = 8.5\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbatch = [8, 8]\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbatch = []\n'))
c("run", "--config", "m.toml", files=T('workload = ["mnist_fnn", ""]\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbucket_mb = nan\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbucket_mb = inf\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nthreads = "many"\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nthreads = 5000\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nphases = "yes"\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nseed = -5\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nwarmup = [1, 2]\n'))
c("run", "--config", "m.toml", files=T('[[matrix]]\nworkload = "mnist_fnn"\n[[matrix]]\nbatch = 8\ndriver = "nope"\n'))
c("run", "--config", "m.toml", files=T('[matrix]\nworkload = "mnist_fnn"\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\ndevice = "tpu"\n'))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\ndenormals = ["flush", "flush"]\n'))
c("run", "--config", "m.toml", files={"m.toml": b'\xff\xfeworkload = 1\n'})
c("run", "--config", "m.toml", files=T(''))
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nscaling = "strong"\nbatch = 0\n'))
# allreduce, list, subcommands
c("allreduce", "--backend", "gloo"); c("allreduce", "--min-bytes", "-4"); c("allreduce", "--min-bytes", "6")
c("allreduce", "--min-bytes", "64", "--max-bytes", "8"); c("allreduce", "--sizes", "5"); c("allreduce", "--sizes", "4,,8")
c("allreduce", "--max-bytes", "9223372036854775804"); c("allreduce", "--sizes", "1152921504606846976")
c("allreduce", "--iterations", "0"); c("allreduce", "--warmup", "-1"); c("allreduce", "--out", "")
c("allreduce", "--out", "keep.h5", files={"keep.h5": b"previous results"}); c("allreduce", "--backend", "nccl")
c("list", "--json", "resnet9000"); c("list", "--json", "mnist_fnn:width=0", names=["override width needs a positive integer, got '0'"]); c("frobnicate"); c("run", "extra-positional")
c("info", "--verbose")
# measured peaks: nothing is measured and no file is created
c("peak", "-d", "nosuch"); c("peak", "-d", "onednn,caffe"); c("peak", "--precision", "fp64"); c("peak", "--precision", "")
c("peak", "--device", "tpu"); c("peak", "--threads", "0"); c("peak", "--threads", "two"); c("peak", "--seconds", "0")
c("peak", "--seconds", "nan"); c("peak", "--out", ""); c("peak", "--out", "keep.h5", files={"keep.h5": b"previous results"})
c("run", "-w", W, "--peak", "missing.h5"); c("run", "-w", W, "--peak", "")
c("run", "-w", W, "--peak", "keep.h5", files={"keep.h5": b"not a results file"})
c("run", "-w", W, "--peak-seconds", "0"); c("run", "-w", W, "--peak-seconds", "-1")
c("run", "-w", W, "--peak", "skip", "--peak-seconds", "1", names=["--peak-seconds"])
# accuracy mode (tests/e2e/test_accuracy.py runs these under mpiexec too)
c("run", "-w", W, "--mode", "accuracy"); c("run", "-w", W, "--mode", "accuracy", "--data", "tokens:x.h5")
c("run", "-w", W, "--mode", "accuracy", "--validation", "1"); c("run", "-w", W, "--mode", "accuracy", "--validation", "0")
c("run", "-w", W, "--lr", "-0.01"); c("run", "-w", W, "--lr", "0"); c("run", "-w", W, "--target-accuracy", "1.5")
c("run", "-w", W, "--target-accuracy", "0"); c("run", "-w", W, "--epochs", "0"); c("run", "-w", W, "--repeats", "0")
c("run", "-w", W, "--mode", "train"); c("run", "-w", W, "--optimizer", "rmsprop"); c("run", "-w", W, "--mode", "timing,accuracy")
# a stray word after a value, an empty override list, a TOML error named by its key as written,
# an --out that is no regular file (FIFO stands for a FIFO made in place of the file)
c("run", "-w", W, "--iterations", "2", "stray_word"); c("run", "-w", W, "--batch", "8", "16")
c("run", "-w", "mnist_fnn:"); c("run", "-w", "mnist_fnn:width=16,"); c("run", "-w", W, "--malloc", "jemalloc")
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbucket_mb = -1\n'), names=["bucket_mb must be 0"])
c("run", "--config", "m.toml", files=T('workload = "mnist_fnn"\nbatch = 0\n'), names=["m.toml:2: batch must be"])
c("run", "-w", W, "--out", "fifo.h5", "--overwrite", files={"fifo.h5": FIFO}, names=["fifo.h5: not a regular file"])
c("run", "-w", W, "--out", "fifo.h5", "--resume", files={"fifo.h5": FIFO}, names=["fifo.h5: not a regular file"])
# control characters in what is quoted stay one line: written out as \n, \t, \x1b
c("run", "-w", "mnist_fnn\nresnet50", names=["mnist_fnn\\nresnet50"])
c("run", "-w", W, "--data", "mnist:/no\tsuch\x1b[2J", names=["mnist:/no\\tsuch\\x1b[2J"])



def run_in_fresh_folder(args, files):
    """Runs dlscale with `args` in a new folder holding `files`; returns the finished process,
    the files' bytes afterwards (None for a FIFO still a FIFO) and the names it left beside them."""
    d = tempfile.mkdtemp(prefix="dlscale_bad_")
    try:
        for name, data in files.items():
            if data is FIFO:
                os.mkfifo(os.path.join(d, name))
            else:
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
        proc = subprocess.run([DLSCALE] + args, cwd=d, capture_output=True, text=True, timeout=300)
        after = {}
        for name in files:
            path = os.path.join(d, name)
            if files[name] is FIFO:
                after[name] = None if stat.S_ISFIFO(os.stat(path).st_mode) else b"replaced"
                continue
            with open(path, "rb") as f:
                after[name] = f.read()
        left = sorted(set(os.listdir(d)) - set(files))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return proc, after, left


class BadInputCorpus(unittest.TestCase):
    def test_corpus_size(self):
        self.assertGreaterEqual(len(cases), 100)

    def test_every_input_is_refused_cleanly(self):
        # Each input is its own process in its own folder: they run side by side, one per core,
        # and are checked in order afterwards.
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            runs = list(pool.map(lambda case: run_in_fresh_folder(*case[:2]), cases))
        for (args, files, names), (proc, after, left) in zip(cases, runs):
            with self.subTest(args=args, files=sorted(files)):
                self.check(args, files, names, proc, after, left)

    def check(self, args, files, names, proc, after, left):
        for name in [name for name, data in files.items() if data is FIFO]:
            self.assertIsNone(after.pop(name), f"{name} is no longer the FIFO it was")
        files = {name: data for name, data in files.items() if data is not FIFO}
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertLessEqual(len(lines), 3, proc.stderr)
        self.assertTrue(lines and lines[0].startswith(("dlscale: error: ", "Run with --help", "The following")) or
                        any(line.startswith("dlscale: error: ") for line in lines), proc.stderr)
        for banned in ("Traceback", "MPI_ABORT", "terminate called", "std::", "Aborted"):
            self.assertNotIn(banned, proc.stderr)
        self.assertEqual(after, files, "an existing file was changed")
        self.assertEqual(left, [], "files were created")
        message = next(line for line in lines if "error" in line.lower() or "--" in line)
        wanted = names or [args[-1], args[-2].lstrip("-") if len(args) > 1 else args[-1]] + list(files)
        self.assertTrue(any(w and w in message for w in wanted), f"{message!r} names none of {wanted}")


if __name__ == "__main__":
    unittest.main()
