"""The Slurm templates and slurm/study on a 2-node Slurm of the cluster test bed (testbed.py):
munged, slurmctld on the first host, one slurmd per host, jobs across both hosts.

  DLSCALE_BIN=build/cpu/dlscale DLSCALE_SOURCE_DIR=$PWD /usr/bin/python3 tests/cluster/test_slurm_multinode.py -v

Exit 77 where the bed cannot be made or Slurm/munge are not installed.
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
import time
import unittest

import clustertest
from clustertest import DLSCALE, SMALL, SOURCE, testbed

CPU_TEMPLATE = os.path.join(SOURCE, "slurm", "dlscale-cpu.sbatch")
STUDY = os.path.join(SOURCE, "slurm", "study")
REPORT = os.path.join(SOURCE, "results", "dlscale-report")
# One backend thread per rank: 4 ranks share the machine's cores.
JOB_ENV = {"DLSCALE_BIN": DLSCALE, "DLSCALE_THREADS": "1"}

BED = None
SLURM = None


def openmpi_startup_crash(log):
    """Whether a job log shows Open MPI's start-up race and nothing of dlscale's ranks: a rank's
    SIGSEGV at address 0 (Open MPI's own signal lines), no line a dlscale rank printed."""
    return ("Signal: Segmentation fault (11)" in log and "Failing at address: (nil)" in log
            and not re.search(r"^dlscale: ", log, re.M) and not re.search(r"^\d{4} ", log, re.M))


def setUpModule():
    global BED, SLURM
    BED = testbed.Cluster(hosts=2)
    started = time.monotonic()
    SLURM = BED.slurm().__enter__()
    print(f"2-node slurm ({SLURM.task_plugin}) up in {time.monotonic() - started:.1f} s", file=sys.stderr)


def tearDownModule():
    if BED is not None:
        BED.close()


class MultiNode(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_multinode_")
        os.chmod(self.dir, 0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)

    def assert_two_node_file(self, path, job, ranks_per_node=2, nodes=2):
        """The results file of job `job`: its node list, ranks on both hosts, the case ok."""
        import h5py
        self.assertTrue(os.path.isfile(path), f"{path} missing")
        hosts = BED.hosts[:nodes]
        with h5py.File(path, "r") as f:
            ranks = ranks_per_node * nodes
            self.assertEqual(f.attrs["world_size"], ranks)
            env = dict(f["system/environment"].attrs)
            self.assertEqual(env.get("SLURM_JOB_ID"), job, env)
            expected_list = f"{BED.name}n[0-1]" if nodes == 2 else hosts[0]
            self.assertEqual(env.get("SLURM_JOB_NODELIST"), expected_list, env)
            self.assertEqual(env.get("SLURM_NNODES"), str(nodes), env)
            self.assertEqual(env.get("SLURM_NTASKS"), str(ranks), env)
            self.assertEqual(env.get("SLURM_TASKS_PER_NODE"), f"{ranks_per_node}(x2)" if nodes == 2 else str(ranks_per_node), env)
            table = f["system/ranks"][()]
            self.assertEqual([h.decode() for h in table["host"]],
                             [h for h in hosts for _ in range(ranks_per_node)])
            self.assertEqual(list(table["local_rank"]), list(range(ranks_per_node)) * nodes)
            case = f["cases/0000"]
            self.assertEqual(case.attrs["status"], "ok", case.attrs.get("message"))
            self.assertEqual(case.attrs["ranks"], ranks)
            self.assertEqual(case["iter_time_s"].shape, (ranks, 3))

    def test_cpu_template_on_two_nodes(self):
        outdir = os.path.join(self.dir, "results")
        out = os.path.join(self.dir, "slurm-%j.out")
        # The installed template and binary, as a site runs them (CTest names the build tree);
        # by hand without DLSCALE_BUILD_DIR, the source tree's template and DLSCALE_BIN.
        template, env = CPU_TEMPLATE, dict(JOB_ENV, DLSCALE_OUT_DIR=outdir, DLSCALE_REPORT=REPORT)
        build = os.environ.get("DLSCALE_BUILD_DIR")
        if build:
            prefix = os.path.join(self.dir, "prefix")
            install = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True,
                                     text=True)
            self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
            template = os.path.join(prefix, "share", "dlscale", "slurm", "dlscale-cpu.sbatch")
            env.update(DLSCALE_BIN="", DLSCALE_REPORT="")
        for attempt in (1, 2):
            proc = SLURM.run(["sbatch", "--wait", "--nodes=2", f"--output={out}", template, *SMALL],
                             env=env, cwd=self.dir, timeout=240)
            m = re.search(r"Submitted batch job (\d+)", proc.stdout)
            self.assertIsNotNone(m, proc.stdout + proc.stderr)
            job = m.group(1)
            log = out.replace("%j", job)
            text = ""
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    text = f.read()
            # Open MPI's own start-up race (docs/slurm.md: a rank's SIGSEGV at address 0 inside
            # MPI_Init, before any dlscale code ran; 5 of 200 starts under load) is not what this
            # test checks: such a job is submitted once more, as the docs tell a user to.
            if attempt == 1 and proc.returncode != 0 and openmpi_startup_crash(text):
                print(f"\njob {job}: Open MPI's start-up SIGSEGV at address 0; submitted again", file=sys.stderr)
                continue
            break
        self.assertEqual(proc.returncode, 0, text + SLURM.logs())
        self.assertIn(f"job {job} on {BED.name}n[0-1]: 4 rank(s), 2 node(s)", text)
        self.assertIn(f"dlscale-cpu.sbatch: results in {outdir}/dlscale-{job}.h5", text)
        if build:
            self.assertIn(f"{prefix}/bin/dlscale run", text)
        self.assert_two_node_file(os.path.join(outdir, f"dlscale-{job}.h5"), job)

    def test_study_over_one_and_two_nodes(self):
        d = os.path.join(self.dir, "study")
        proc = SLURM.run([STUDY, "--nodes", "1,2", *SMALL[:4], "--study-dir", d, "--wait", "--poll", "0.5",
                          "--timeout", "240", "--", *SMALL[4:]], env=JOB_ENV, cwd=self.dir, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr + proc.stdout + SLURM.logs())
        with open(os.path.join(d, "study.json")) as f:
            points = json.load(f)["points"]
        self.assertEqual([p["label"] for p in points], ["nodes-1", "nodes-2"])
        files = []
        for p, nodes in zip(points, (1, 2)):
            self.assertEqual((p["state"], p["exit_code"]), ("COMPLETED", "0:0"), p)
            self.assert_two_node_file(p["file"], p["job_id"], nodes=nodes)
            files.append(p["file"])
        # The report: one summary row per file, on 2 and on 4 ranks (1 and 2 nodes).
        self.assertIn(f"{REPORT} summary {files[0]} {files[1]}", proc.stdout)
        # One row per file; what both share (workload, driver, device) said once above the table.
        rows = re.findall(r"^(\S+\.h5)\s+\d{4}\s.*$", proc.stdout, re.M)
        self.assertRegex(" ".join(proc.stdout.split()), r"every row: workload mnist_fnn:width=16, driver \w+, "
                                                        r"device cpu,")
        self.assertEqual([os.path.basename(r) for r in rows], [os.path.basename(f) for f in files], proc.stdout)
        # Both node counts, as the report's hosts column gives them.
        summary = subprocess.run([sys.executable, REPORT, "summary", "--format", "csv", *files], capture_output=True,
                                 text=True)
        self.assertEqual(summary.returncode, 0, summary.stdout + summary.stderr)
        by_file = {os.path.basename(r["file"]): int(r["hosts"]) for r in csv.DictReader(io.StringIO(summary.stdout))}
        self.assertEqual([by_file[os.path.basename(f)] for f in files], [1, 2], summary.stdout)
        self.assert_report_ranks(proc.stdout, files)

    def assert_report_ranks(self, text, files):
        """The report tells the points apart by their rank counts (2 per node)."""
        lines = [line for line in text.splitlines() if re.match(r"^\S+\.h5\s+\d{4}\s", line)]
        header = next((line for line in text.splitlines() if re.match(r"^\s*file\s", line)), None)
        self.assertIsNotNone(header, text)
        cols = header.split()
        self.assertTrue({"P", "ranks"} & set(cols), header)
        col = cols.index("P") if "P" in cols else cols.index("ranks")
        self.assertEqual([line.split()[col] for line in lines], ["2", "4"], text)


if __name__ == "__main__":
    sys.exit(clustertest.main(needs_slurm=True))
