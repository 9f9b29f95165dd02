"""dlscale-project on a real 2-rank --phases run: the simulation group it writes (datasets,
attributes, parts adding up to the step, P = 1, the error at the measured point from the file's
own numbers), the measured platform against the case's ring fit, the buckets' measured and estimated
readiness, bad
input refused with exit code 2 and one line, the file left byte for byte as it was, and
dlscale-report's summary line, check and report plot on the file it wrote.

CTest sets DLSCALE_BIN, DLSCALE_PROJECT_BIN, MPIEXEC and DLSCALE_SOURCE_DIR; without
DLSCALE_PROJECT_BIN (no SimGrid, so no dlscale-project) every test is skipped.
"""

import html
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest

import h5py
import numpy as np

DLSCALE = os.environ.get("DLSCALE_BIN", "")
PROJECT = os.environ.get("DLSCALE_PROJECT_BIN", "")
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
REPORT = os.path.join(os.environ.get("DLSCALE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                      "results", "dlscale-report")

# One device per node, NICs of 10 GB/s and 1 us: every ring edge has the same route (a crossbar).
CROSSBAR = """name = "test-crossbar"
nodes = 64
devices_per_node = 1
[intra_node]
bandwidth_GBps = 1000000
[nic]
bandwidth_GBps = 10
latency_us = 1
[fabric]
topology = "star"
"""
# The same crossbar as a SimGrid platform file: 64 hosts, each on its own 10 GB/s, 1 us duplex
# link to a backbone that costs nothing.
CROSSBAR_XML = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="xml-crossbar" prefix="node-" suffix="" radical="0-63" speed="1Gf" bw="10GBps" lat="1us"
           sharing_policy="SPLITDUPLEX" bb_bw="1000000GBps" bb_lat="0us"/>
</platform>
"""
PARTS = ("compute_s", "straggler_wait_s", "exposed_allreduce_s", "update_s")


@unittest.skipUnless(PROJECT and os.path.exists(PROJECT), "dlscale-project not built (no SimGrid)")
class Project(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlscale_project_")
        cls.measured = os.path.join(cls.dir, "measured.h5")
        # Case 0000: one bucket after backward; case 0001: 20 kB buckets (52008 bytes of gradients),
        # as cut: without a warm-up step there is nothing to merge them by.
        proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=16", "-d", "reference",
                               "--ranks", "2", "--bucket-mb", "0,0.02", "--phases", "--warmup", "0",
                               "--iterations", "5", "--peak",
                               "skip", "--progress", "none", "--out", cls.measured],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(proc.stdout + proc.stderr)
        cls.crossbar = os.path.join(cls.dir, "crossbar.toml")
        with open(cls.crossbar, "w") as f:
            f.write(CROSSBAR)
        cls.crossbar_xml = os.path.join(cls.dir, "crossbar.xml")
        with open(cls.crossbar_xml, "w") as f:
            f.write(CROSSBAR_XML)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def copy(self, name):
        path = os.path.join(self.dir, name)
        shutil.copyfile(self.measured, path)
        return path

    def run_two_ranks(self, name, workload, *options):
        """A 2-rank --phases job of the reference driver (one warm-up, 5 iterations) into `name`."""
        path = os.path.join(self.dir, name)
        proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", workload, "-d", "reference", "--ranks", "2",
                               *options, "--phases", "--warmup", "1", "--iterations", "5", "--peak", "skip",
                               "--progress", "none", "--out", path],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return path

    def project(self, *args):
        return subprocess.run([PROJECT] + list(args), capture_output=True, text=True, timeout=300)

    def test_group_on_a_crossbar(self):
        path = self.copy("crossbar.h5")
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "4,8", "--case", "0000")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("error at the measured P = 2", proc.stdout)
        with h5py.File(path, "r") as f:
            case = f["cases/0000"]
            self.assertEqual(list(case["simulations"]), ["0000"])
            self.assertNotIn("simulations", f["cases/0001"])
            g = case["simulations/0000"]
            a = dict(g.attrs)
            self.assertEqual(a["source"], "dlscale-project")
            self.assertEqual(a["platform"], "test-crossbar")
            self.assertEqual(a["platform_toml"], CROSSBAR)
            self.assertEqual((a["placement"], a["allreduce"], a["model"], a["steps"], a["seed"]),
                             ("block", "ring", "flow", 3, 1))
            self.assertEqual(a["allreduce_source"], "recorded")
            self.assertRegex(a["simgrid_version"], r"^\d+\.\d+\.\d+$")
            self.assertEqual((a["measured_ranks"], a["scaling"], a["overlap"]), (2, "weak", 0))
            ranks = g["ranks"][()]
            self.assertEqual(list(ranks), [1, 2, 4, 8])
            step = g["step_s"][()]
            total = sum(g[p][()] for p in PARTS)
            np.testing.assert_allclose(total, step, rtol=0, atol=1e-9)
            self.assertEqual(g["exposed_allreduce_s"][0], 0)
            self.assertEqual(g["straggler_wait_s"][0], 0)
            self.assertEqual(g["efficiency"][0], 1)
            np.testing.assert_allclose(g["efficiency"][()], step[0] / step)
            # The error at the measured point, from the file's own numbers.
            measured = case["summary"].attrs["step_median_s"]
            self.assertEqual(a["measured_step_s"], measured)
            self.assertAlmostEqual(a["error"], step[list(ranks).index(2)] / measured - 1, delta=1e-12)
            self.assertEqual(list(g["bucket_bytes"][()]), [52008])
            self.assertEqual(list(g["bucket_ready_fraction"][()]), [1])

    def test_compressed_gradients_cross_in_half_the_bytes(self):
        # A case recorded with --grad-compression fp16 sent 16-bit gradients: the simulated bucket
        # is half the float32 one, and its exposed all-reduce, on the same draws, n/2B less.
        exposed = {}
        for compression in ("none", "fp16"):
            path = self.copy(f"compressed-{compression}.h5")
            with h5py.File(path, "r+") as f:
                f["cases/0000"].attrs["grad_compression"] = compression
            proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "0")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with h5py.File(path, "r") as f:
                g = f["cases/0000/simulations/0000"]
                self.assertEqual(list(g["bucket_bytes"][()]), [52008 if compression == "none" else 26004])
                exposed[compression] = g["exposed_allreduce_s"][list(g["ranks"][()]).index(2)]
        self.assertAlmostEqual(exposed["none"] - exposed["fp16"], 26004 / 10e9, delta=1e-10)
        path = self.copy("compressed-bad.h5")
        with h5py.File(path, "r+") as f:
            f["cases/0000"].attrs["grad_compression"] = "fp8"
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "0")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("unknown gradient compression 'fp8'", proc.stderr)

    def test_sharded_optimizer_gathers_after_the_update(self):
        # A sharded optimiser's case: its file records each step's all-gather apart from the
        # update phase that holds it; the simulation reduce-scatters the one bucket after backward
        # and, after the last rank's update, all-gathers its parameters: on the crossbar exactly
        # half a ring, (P-1) a + (P-1)/P n/B, whatever the draws, n the parameters' bytes (the
        # reference driver's are float64: twice the gradients', as its memory rows say).
        path = self.run_two_ranks("sharded.h5", "mnist_fnn:width=16", "--bucket-mb", "0", "--sharding", "optimizer",
                                  "--optimizer", "adam")
        with h5py.File(path, "r") as f:
            case = f["cases/0000"]
            self.assertEqual(case.attrs["sharding"], "optimizer")
            gather, update = case["parameter_gather_s"][()], case["phase_time_s"][()][:, :, 3]
            self.assertEqual(gather.shape, (2, 5))
            memory = case["memory"][()]
            widths = memory["parameter_bytes"] / memory["gradient_bytes"]
            self.assertEqual(list(widths), [2, 2])
            # The file's own fitted projection: the update of the share apart from the compute,
            # and a ring of the mean of the reduce-scatter's float32 and the all-gather's float64.
            fitted = case["projection"].attrs
            self.assertGreater(fitted["sharded_update_s"], 0)
            self.assertEqual(fitted["grad_bytes"], 1.5 * case.attrs["grad_bytes"])
            self.assertTrue(np.all((gather > 0) & (gather <= update)), (gather, update))
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2,4,8", "--case", "0")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("ring (as recorded) reduce-scatter and all-gather (sharded optimiser)", proc.stdout)
        self.assertIn("of which all-gather ms", proc.stdout)
        with h5py.File(path, "r") as f:
            g = f["cases/0000/simulations/0000"]
            self.assertEqual(g.attrs["sharding"], "optimizer")
            ranks, n = list(g["ranks"][()]), g["bucket_bytes"][()]
            self.assertEqual(ranks, [1, 2, 4, 8])
            self.assertEqual(len(n), 1)
            gathered = g["parameter_gather_s"][()]
            want = [(p - 1) * 2e-6 + (p - 1) / p * 2 * n[0] / 10e9 for p in ranks]
            np.testing.assert_allclose(gathered, want, rtol=1e-6, atol=1e-12)
            self.assertTrue(np.all(gathered <= g["update_s"][()]))
            np.testing.assert_allclose(sum(g[p][()] for p in PARTS), g["step_s"][()], rtol=0, atol=1e-9)
        check = subprocess.run([sys.executable, REPORT, "check", path], capture_output=True, text=True, timeout=300)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # The binomial tree is no reduce-scatter; a file without the all-gather recorded apart
        # cannot say what of its update phase was the network's.
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "0", "--allreduce", "binomial")
        self.assertEqual((proc.returncode, proc.stderr.count("\n")), (2, 1), proc.stderr)
        self.assertIn("a sharded optimiser reduce-scatters and all-gathers round a ring", proc.stderr)
        with h5py.File(path, "r+") as f:
            del f["cases/0000/parameter_gather_s"]
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "0")
        self.assertEqual((proc.returncode, proc.stderr.count("\n")), (2, 1), proc.stderr)
        self.assertIn("without parameter_gather_s", proc.stderr)

    def test_two_level_allreduce_as_recorded_or_asked(self):
        # Nodes of two ranks, a network 50 times slower than the node. The case's one bucket after
        # backward, at P = 4: the flat ring's slowest edges cross the network (6 steps of 3 us,
        # 1.5 n/B), the two-level all-reduce goes up and down the node (1 us + n/50 GB/s each)
        # and round the two leaders (2 x 3 us + n/B). The exposed all-reduce is exactly that,
        # whatever the draws; the case's recorded allreduce_hierarchy chooses, the option asks.
        nodes = os.path.join(self.dir, "nodes-of-2.toml")
        with open(nodes, "w") as f:
            f.write(CROSSBAR.replace("devices_per_node = 1", "devices_per_node = 2")
                    .replace("bandwidth_GBps = 1000000\n", "bandwidth_GBps = 50\nlatency_us = 0.5\n")
                    .replace("bandwidth_GBps = 10\n", "bandwidth_GBps = 1\n"))
        path = self.copy("hierarchy.h5")
        with h5py.File(path, "r+") as f:
            f["cases/0000"].attrs["allreduce_hierarchy"] = "host"
        for args in ([], ["--allreduce-hierarchy", "flat"]):
            proc = self.project(path, "--platform", nodes, "--ranks", "4", "--case", "0", *args)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual("all-reduce in two levels" in proc.stdout, not args, proc.stdout)
            # The report's line for the newest simulation says which all-reduce it simulated.
            summary = subprocess.run([sys.executable, REPORT, "summary", path], capture_output=True, text=True,
                                     timeout=300)
            self.assertEqual("ring all-reduce in two levels" in " ".join(summary.stdout.split()), not args)
        n = 52008
        want = {"host": 2 * (1e-6 + n / 50e9) + 2 * 3e-6 + n / 1e9, "flat": 6 * 3e-6 + 1.5 * n / 1e9}
        with h5py.File(path, "r") as f:
            for name in ("0000", "0001"):
                g = f["cases/0000/simulations"][name]
                hierarchy = g.attrs["allreduce_hierarchy"]
                got = g["exposed_allreduce_s"][list(g["ranks"][()]).index(4)]
                self.assertAlmostEqual(got, want[hierarchy], delta=1e-9 * want[hierarchy])
            self.assertEqual([f["cases/0000/simulations"][k].attrs["allreduce_hierarchy"] for k in ("0000", "0001")],
                             ["host", "flat"])
        # The message model is the flat ring's; an unknown hierarchy is refused.
        for args, message in ((["--model", "message"], "simulated with the ring's flow model"),
                              (["--allreduce-hierarchy", "tree"], "--allreduce-hierarchy tree: must be flat or host")):
            proc = self.project(path, "--platform", nodes, "--ranks", "4", "--case", "0", *args)
            self.assertEqual((proc.returncode, proc.stderr.count("\n")), (2, 1), proc.stderr)
            self.assertIn(message, proc.stderr)

    def test_sparse_embedding_rows_gathered_up_to_the_crossover(self):
        # A small PTB model whose embedding (2000 rows of 16 floats) the buckets summed as the rows
        # the ranks touched: simulated as every rank's rows (17 floats each, the index with them)
        # gathered from every rank, in float32, while that is fewer bytes than the ring's
        # 2(P-1)/P of the block: up to a share of 2 x 16 / (P x 17), dense beyond.
        path = self.run_two_ranks("sparse.h5", "lstm32:vocab=2000,embed=16,hidden=16,seq=4", "--bucket-mb", "0.01",
                                  "--sparse-embedding")
        with h5py.File(path, "r") as f:
            case = f["cases/0000"]
            share = case.attrs["sparse_embedding_rows_share"]
            self.assertTrue(0 < share < 1, share)
            self.assertEqual(case["bucket_bytes"][0], 2000 * 16 * 4)
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2,4,8,16,32", "--case", "0")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("the embedding's rows all-gathered where fewer bytes than its block", proc.stdout)
        with h5py.File(path, "r") as f:
            g = f["cases/0000/simulations/0000"]
            ranks = list(g["ranks"][()])
            self.assertEqual(g["bucket_bytes"][-1], 2000 * 16 * 4)  # ready last, in float32
            want = [0 if p == 1 or share >= 2 * 16 / (p * 17) else p * share * 2000 * 17 * 4 for p in ranks]
            np.testing.assert_allclose(g["embedding_rows_bytes"][()], want, rtol=1e-9)
            self.assertGreater(sum(w > 0 for w in want), 1)  # gathered at two P or more
            self.assertIn(0, want[1:])  # and dense beyond the crossover
            np.testing.assert_allclose(sum(g[p][()] for p in PARTS), g["step_s"][()], rtol=0, atol=1e-9)
        check = subprocess.run([sys.executable, REPORT, "check", path], capture_output=True, text=True, timeout=300)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_binomial_sends_the_bucket_across_and_back(self):
        # One bucket after backward on two ranks: the ring sends both ways at once (n/B + 2a),
        # Open MPI's binomial tree up and then down (2 n/B + 2a): n/B more, with the same draws.
        path = self.copy("binomial.h5")
        exposed = {}
        for allreduce in ("ring", "binomial"):
            proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "0",
                                "--allreduce", allreduce)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn(f"{allreduce} all-reduce, flow model", proc.stdout)
        with h5py.File(path, "r") as f:
            for name in ("0000", "0001"):
                g = f["cases/0000/simulations"][name]
                exposed[g.attrs["allreduce"]] = g["exposed_allreduce_s"][list(g["ranks"][()]).index(2)]
        self.assertAlmostEqual(exposed["binomial"] - exposed["ring"], 52008 / 10e9, delta=1e-10)

    def test_the_default_all_reduce_is_the_one_the_case_ran(self):
        path = self.copy("recorded.h5")
        with h5py.File(path, "r") as f:
            self.assertEqual(f["cases/0001"].attrs["allreduce_mechanism"], "mpi_allreduce_buckets_thread")
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("ring (as recorded) all-reduce", proc.stdout)
        # A file written before the mechanism was recorded: its buckets were MPI_Iallreduce calls,
        # which Open MPI 4.1 runs as a binomial tree.
        with h5py.File(path, "a") as f:
            del f["cases/0001"].attrs["allreduce_mechanism"]
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("binomial (as recorded) all-reduce", proc.stdout)
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1", "--allreduce", "ring")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(path, "r") as f:
            groups = f["cases/0001/simulations"]
            self.assertEqual([(groups[n].attrs["allreduce"], groups[n].attrs["allreduce_source"]) for n in groups],
                             [("ring", "recorded"), ("binomial", "recorded"), ("ring", "--allreduce")])

    def test_simgrid_xml_platform_equals_its_toml_twin(self):
        path = self.copy("xml.h5")
        for platform in (self.crossbar, self.crossbar_xml):
            proc = self.project(path, "--platform", platform, "--ranks", "4,8", "--case", "0")
            self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(path, "r") as f:
            toml, simgrid = f["cases/0000/simulations/0000"], f["cases/0000/simulations/0001"]
            self.assertEqual((simgrid.attrs["platform"], simgrid.attrs["placement"]), ("crossbar", "by-host-name"))
            self.assertEqual((simgrid.attrs["platform_xml"], simgrid.attrs["platform_toml"]), (CROSSBAR_XML, ""))
            self.assertEqual(toml.attrs["platform_xml"], "")
            for part in ("step_s",) + PARTS:
                np.testing.assert_allclose(simgrid[part][()], toml[part][()], rtol=1e-9, err_msg=part)

    def test_buckets_without_a_communication_thread_are_reduced_after_backward(self):
        path = self.copy("progress.h5")
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(path, "a") as f:
            g = f["cases/0001/simulations/0000"]
            self.assertEqual((g.attrs["overlap"], g.attrs["progress"]), (1, "thread"))
            # A run whose MPI gave less than MPI_THREAD_SERIALIZED had no communication thread:
            # its buckets were reduced after backward.
            f["cases/0001"].attrs["allreduce_mechanism"] = "mpi_allreduce_buckets_after_backward"
        proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("after backward: no communication thread to progress them", proc.stdout)
        with h5py.File(path, "r") as f:
            g = f["cases/0001/simulations/0001"]
            self.assertEqual((g.attrs["overlap"], g.attrs["progress"]), (0, "polling"))

    def test_a_file_without_the_mechanism_takes_the_runs_thread_level(self):
        # A file older than the case's allreduce_mechanism and progress_thread: the run's thread
        # level, in /system/software, says whether a thread progressed the buckets.
        path = self.copy("thread_level.h5")
        for level, progress in (("MPI_THREAD_FUNNELED", "polling"), ("MPI_THREAD_MULTIPLE", "thread")):
            with h5py.File(path, "a") as f:
                for name in ("progress_thread", "allreduce_mechanism"):
                    if name in f["cases/0001"].attrs:
                        del f["cases/0001"].attrs[name]
                f["system/software"].attrs.modify("mpi_thread_level", level)
            proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with h5py.File(path, "r") as f:
                last = sorted(f["cases/0001/simulations"])[-1]
                self.assertEqual(f["cases/0001/simulations"][last].attrs["progress"], progress, level)

    def test_bucket_readiness_measured_and_estimated(self):
        # 13002 floats (layers of 12560, 272 and 170) in buckets of about 5000 (0.02 MB = 20000
        # bytes) that begin only at a layer's start, or inside the first layer, longer than a
        # bucket, a whole bucket before its end: [0, 2560), [2560, 7560), [7560, 13002), the last
        # of the buffer ready first. The case records them; the simulation takes them from it.
        path = self.copy("buckets.h5")

        def project_without(dataset):
            """Projects case 1 once the file's `dataset` is gone (None: as dlscale wrote it)."""
            if dataset:
                with h5py.File(path, "a") as f:
                    del f["cases/0001"][dataset]
            proc = self.project(path, "--platform", self.crossbar, "--ranks", "2", "--case", "1")
            self.assertEqual(proc.returncode, 0, proc.stderr)

        project_without(None)
        with h5py.File(path, "r") as f:
            self.assertEqual(list(f["cases/0001/bucket_bytes"][()]), [10240, 20000, 21768])
            g = f["cases/0001/simulations/0000"]
            self.assertEqual(list(g["bucket_bytes"][()]), [21768, 20000, 10240])
            # dlscale recorded when each bucket started: the fractions are measured, the median
            # over ranks and iterations of (start - forward) / backward, never falling.
            self.assertEqual(g.attrs["bucket_readiness"], "measured")
            starts = f["cases/0001/bucket_start_s"][()]
            phases = f["cases/0001/phase_time_s"][()]
            self.assertEqual(starts.shape, phases.shape[:2] + (3,))
            fractions = np.clip((starts - phases[:, :, :1]) / phases[:, :, 1:2], 0, 1)
            expected = np.maximum.accumulate([max(np.median(fractions[:, :, b]), 1e-9) for b in (2, 1, 0)])
            np.testing.assert_allclose(g["bucket_ready_fraction"][()], expected, rtol=1e-12)
        # A file without bucket_start_s (written before dlscale recorded it): estimated from each
        # bucket's place in the buffer.
        project_without("bucket_start_s")
        with h5py.File(path, "r") as f:
            g = f["cases/0001/simulations/0001"]
            self.assertEqual(g.attrs["bucket_readiness"], "estimated")
            np.testing.assert_allclose(g["bucket_ready_fraction"][()], [21768 / 52008, 41768 / 52008, 1])
        # Nor bucket_bytes: cut as dlscale cuts a buffer whose layers it does not know, whole
        # buckets from the end.
        project_without("bucket_bytes")
        with h5py.File(path, "r") as f:
            g = f["cases/0001/simulations/0002"]
            self.assertEqual(list(g["bucket_bytes"][()]), [20000, 20000, 12008])
            np.testing.assert_allclose(g["bucket_ready_fraction"][()], [5000 / 13002, 10000 / 13002, 1])

    def test_measured_platform_reproduces_the_ring_fit(self):
        path = self.copy("measured_platform.h5")
        proc = self.project(path, "--platform", "measured", "--ranks", "4", "--case", "0000")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # Beyond the 2 ranks it measured it says what it extrapolates from, in one line.
        lines = [line for line in proc.stdout.splitlines() if "extrapolates" in line]
        self.assertEqual(lines, ["--platform measured extrapolates case 0000's all-reduce on 2 ranks on 1 host to 2 "
                                 "nodes of 2: every node and link as fast as measured there, and between hosts the "
                                 "within-host fit (no between-host figures measured)"])
        with h5py.File(path, "r") as f:
            fit = dict(f["cases/0000/projection"].attrs)
            g = f["cases/0000/simulations/0000"]
            self.assertEqual(g.attrs["platform"], "measured-case-0000")
            platform = tomllib.loads(g.attrs["platform_toml"])
            self.assertEqual(list(g["ranks"][()]), [1, 2, 4])
            self.assertTrue(np.isfinite(g.attrs["error"]))
        # A ring within a node: 2 hops of the intra-node link per edge.
        self.assertEqual(platform["devices_per_node"], 2)
        self.assertAlmostEqual(2 * platform["intra_node"]["latency_us"] * 1e-6 / fit["within_alpha_s"], 1, delta=1e-9)
        self.assertAlmostEqual(1 / (platform["intra_node"]["bandwidth_GBps"] * 1e9) / fit["within_beta_s_per_byte"], 1,
                               delta=1e-9)

    def test_dry_run_writes_nothing(self):
        path = self.copy("dry.h5")
        with open(path, "rb") as f:
            before = f.read()
        proc = self.project(path, "--dry-run")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("P = 1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192", proc.stdout)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_report_shows_the_simulation(self):
        path = self.copy("report.h5")
        proc = self.project(path, "--platform", "cpu-2socket-100Gbps-nic", "--ranks", "4,64", "--case", "0000")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(path, "r") as f:
            g = f["cases/0000/simulations/0000"]
            error, version = g.attrs["error"], g.attrs["simgrid_version"]
            step = g["step_s"][()]
            eff = g["efficiency"][()]

        def report(*args):
            # This interpreter (DLSCALE_PYTHON, with h5py), not whatever `env python3` finds.
            return subprocess.run([sys.executable, REPORT] + list(args), capture_output=True, text=True, timeout=300)

        proc = report("check", path)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        proc = report("summary", "--wide", path)   # each sentence on one line
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = [l for l in proc.stdout.splitlines() if "simulated on" in l]
        self.assertEqual(len(lines), 1, proc.stdout)
        direction = "below" if error < 0 else "above"
        sentence = (f"case 0000: simulated on cpu-2socket-100Gbps-nic (SimGrid {version}, ring all-reduce, flow model, "
                    f"3 steps; simulation 0000): P=1 to 64, efficiency")
        self.assertIn(sentence, lines[0])
        self.assertIn(f"{eff[-1]:.2f} at P=64", lines[0])
        self.assertIn(f"at the measured P=2 the simulated step ({step[1] * 1e3:.3f} ms) is "
                      f"{100 * abs(error):.1f}% {direction} the measured one", lines[0])
        out = os.path.join(self.dir, "report")
        proc = report("report", path, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn('<img src="simulation_0000_0000.png"', page)
        self.assertIn(html.escape(lines[0].strip()), page)
        with open(os.path.join(out, "simulation_0000_0000.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_bad_input(self):
        path = self.copy("bad.h5")
        bad_toml = os.path.join(self.dir, "bad.toml")
        with open(bad_toml, "w") as f:
            f.write(CROSSBAR.replace("bandwidth_GBps = 10", "bandwidth_GBps = -3"))
        broken_xml = os.path.join(self.dir, "broken.xml")
        with open(broken_xml, "w") as f:
            f.write('<platform version="4.1"><zone')
        not_results = os.path.join(self.dir, "not_results.h5")
        with open(not_results, "w") as f:
            f.write("not HDF5")
        with open(path, "rb") as f:
            before = f.read()
        cases = [
            ([path, "--ranks", "0"], "0"), ([path, "--ranks", "2,x"], "x"), ([path, "--ranks", "2,2"], "2,2"),
            ([path, "--ranks", "4,"], "4,"), ([path, "--ranks", "100", "--platform", self.crossbar], "100"),
            ([path, "--platform", "no-such-preset"], "no-such-preset"), ([path, "--platform", bad_toml], "-3"),
            ([path, "--platform", os.path.join(self.dir, "absent.toml")], "absent.toml"),
            ([path, "--platform", broken_xml], "broken.xml"),
            ([path, "--ranks", "100", "--platform", self.crossbar_xml], "100"),
            ([path, "--model", "fast"], "fast"), ([path, "--allreduce", "tree"], "tree"), ([path, "--steps", "0"], "0"), ([path, "--steps", "many"], "many"),
            ([path, "--seed", "-1"], "-1"), ([path, "--case", "9"], "9"), ([path, "--case", "abc"], "abc"),
            ([path, "--model", "message"], "message"), ([path, "--frobnicate"], "--frobnicate"),
            ([not_results], "not_results.h5"), ([os.path.join(self.dir, "absent.h5")], "absent.h5"),
        ]
        for args, named in cases:
            with self.subTest(args=args[1:] or args):
                proc = self.project(*args)
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                lines = proc.stderr.splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertTrue(lines[0].startswith("dlscale-project: error: "), lines[0])
                self.assertIn(named, lines[0])
                self.assertEqual(proc.stdout, "")
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), before)
                self.assertFalse(os.path.exists(path + ".dlscale-tmp"))


if __name__ == "__main__":
    unittest.main()
