"""The Slurm templates and slurm/study against a real single-node Slurm started by the test.

The test starts its own munged (own key and socket), slurmctld and slurmd from a slurm.conf it
writes into a temporary directory (free ports, state and spool there, the machine's real
sockets/cores from `slurmd -C`), points every Slurm command at it with SLURM_CONF, and stops
the daemons by their PIDs at the end, also when a test fails (the daemons also get SIGTERM
when this process dies: PR_SET_PDEATHSIG).

Exit code 77 (CTest SKIP_RETURN_CODE) when the Slurm or munge packages are absent or when
not run as root (slurmd must be root). CTest sets DLSCALE_BIN and DLSCALE_SOURCE_DIR; run by
hand with those exported:

  DLSCALE_BIN=build/cpu/dlscale DLSCALE_SOURCE_DIR=$PWD OMPI_ALLOW_RUN_AS_ROOT=1 \\
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /usr/bin/python3 tests/slurm/test_slurm.py -v
"""

import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import slurm_setup

SKIP = 77
SOURCE = os.environ.get("DLSCALE_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DLSCALE = os.environ.get("DLSCALE_BIN", os.path.join(SOURCE, "build", "cpu", "dlscale"))
CPU_TEMPLATE = os.path.join(SOURCE, "slurm", "dlscale-cpu.sbatch")
GPU_TEMPLATE = os.path.join(SOURCE, "slurm", "dlscale-gpu.sbatch")
STUDY = os.path.join(SOURCE, "slurm", "study")
REPORT = os.path.join(SOURCE, "results", "dlscale-report")
SMALL = ["-w", "mnist_fnn:width=16", "--batch", "8", "--iterations", "3", "--warmup", "1"]
NODE = "localhost"

PR_SET_PDEATHSIG = 1


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


# Run detached from the test: once the test process is gone (killed by a CTest timeout,
# SIGKILL, …) it kills what is left of its Slurm -- the processes whose working directory is
# the cluster's directory (daemons, slurmstepd, job processes) -- and removes the directory.
WATCHDOG = r"""
import os, shutil, signal, sys, time
parent, root = int(sys.argv[1]), sys.argv[2]
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
for _ in range(3):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if int(pid) != os.getpid() and (cwd == root or cwd.startswith(root + "/")):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.5)
shutil.rmtree(root, ignore_errors=True)
"""


def leftovers(root):
    """PIDs of processes (other than this one) whose working directory is in `root`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if int(pid) != os.getpid() and (cwd == root or cwd.startswith(root + "/")):
            pids.append(int(pid))
    return pids


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpus_of(text):
    """'0-3,8' -> {0, 1, 2, 3, 8}"""
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpus_of_mask(mask):
    value = int(mask, 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}


def sockets_of_machine():
    """{socket id: set of online CPUs} from sysfs."""
    sockets = {}
    for cpu in _online_cpus():
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"
        try:
            with open(path) as f:
                pkg = int(f.read())
        except OSError:
            pkg = 0
        sockets.setdefault(pkg, set()).add(cpu)
    return sockets


def _online_cpus():
    try:
        with open("/sys/devices/system/cpu/online") as f:
            return sorted(cpus_of(f.read()))
    except OSError:
        return list(range(os.cpu_count() or 1))


def cores_of_socket0():
    out = subprocess.run(["lscpu", "-p=SOCKET,CORE"], capture_output=True, text=True,
                         env=dict(os.environ, LC_ALL="C")).stdout
    return len({line.split(",")[1] for line in out.splitlines() if line and not line.startswith("#")
                and line.split(",")[0] == "0"})


class Cluster:
    """munged + slurmctld + slurmd in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_slurm_")
        self.procs = []               # (name, Popen) in start order
        self.env = slurm_setup.environment(self.dir)
        self.task_plugin = "task/affinity" if slurm_setup.affinity_works() else "task/none"
        self.watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), self.dir],
                                         cwd="/", start_new_session=True, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _start(self, name, cmd):
        log = open(self.path("log", f"{name}.out"), "w")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.dir,
                             preexec_fn=_die_with_parent)
        log.close()
        self.procs.append((name, p))
        return p

    def start(self):
        for d in ("state", "spool", "log", "jobs"):
            os.makedirs(self.path(d))
        sock = slurm_setup.start_munged(self.dir, self._start, self._wait_for)
        slurm_setup.write_conf(self.env["SLURM_CONF"], name="dlscaletest", controller=NODE, address="127.0.0.1",
                               ports=(free_port(), free_port()), sock=sock, directory=self.dir,
                               task_plugin=self.task_plugin, nodes=[(NODE, "127.0.0.1")], per_node=False)
        self._start("slurmctld", ["slurmctld", "-D", "-i"])
        self._start("slurmd", ["slurmd", "-D", "-N", NODE])

        def idle():
            r = subprocess.run(["sinfo", "--noheader", "--format=%T", f"--nodes={NODE}"],
                               capture_output=True, text=True, env=self.env)
            return r.returncode == 0 and r.stdout.strip() == "idle"
        self._wait_for(idle, 60, f"node {NODE} to become idle")

    def _wait_for(self, ready, timeout, what):
        slurm_setup.wait_for(self.procs, ready, timeout, what, self.logs)

    def logs(self, lines=30):
        return slurm_setup.log_tails(self.path("log"), lines)

    def run(self, cmd, env=None, timeout=180, cwd=None):
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout, cwd=cwd or self.dir,
                              preexec_fn=_die_with_parent)

    def stop(self):
        if self.watchdog is not None:
            self.watchdog.terminate()
            self.watchdog.wait(timeout=10)
            self.watchdog = None
        if not self.procs:
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        alive = {name: p for name, p in self.procs if p.poll() is None}
        if "slurmctld" in alive and "munged" in alive:
            # End every job of this cluster so that no slurmstepd outlives its slurmd.
            subprocess.run(["scancel", f"--user={os.geteuid()}"], env=self.env, capture_output=True, timeout=20)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                r = subprocess.run(["squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED"],
                                   env=self.env, capture_output=True, text=True, timeout=20)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.3)
        for name, p in reversed(self.procs):   # slurmd, slurmctld, then munged
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        self.procs = []
        # A slurmstepd that lost its slurmd retries for minutes: end those of this cluster.
        for pid in leftovers(self.dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if os.environ.get("DLSCALE_KEEP_SLURM_DIR"):
            print(f"kept {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = Cluster()
    atexit.register(CLUSTER.stop)
    started = time.monotonic()
    try:
        CLUSTER.start()
    except BaseException:
        CLUSTER.stop()
        raise
    print(f"slurm ({CLUSTER.task_plugin}) up in {time.monotonic() - started:.1f} s in {CLUSTER.dir}",
          file=sys.stderr)


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.stop()


def job_id_of(proc):
    m = re.search(r"Submitted batch job (\d+)", proc.stdout)
    return m.group(1) if m else None


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def job_state(job_id, timeout_s=60):
    """The job's final state and exit code: sbatch --wait can return while slurmctld still holds
    the job COMPLETING (its epilog and clean-up, slower on a loaded machine)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = CLUSTER.run(["scontrol", "show", "job", "--oneliner", job_id])
        fields = dict(kv.split("=", 1) for kv in r.stdout.split() if "=" in kv)
        state = fields.get("JobState")
        if state != "COMPLETING" or time.monotonic() > deadline:
            return state, fields.get("ExitCode")
        time.sleep(0.5)


class SlurmCase(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="job_", dir=CLUSTER.path("jobs"))
        self.started = time.monotonic()

    def tearDown(self):
        print(f"({time.monotonic() - self.started:.1f} s) ", end="", file=sys.stderr, flush=True)

    def sbatch_wait(self, template, args, sbatch=(), env=None):
        """sbatch --wait; returns (process, job id, the job's output)."""
        out = os.path.join(self.dir, "slurm-%j.out")
        proc = CLUSTER.run(["sbatch", "--wait", f"--output={out}", *sbatch, template, *args],
                           env=env, cwd=self.dir)
        job = job_id_of(proc)
        self.assertIsNotNone(job, f"no job id from sbatch: {proc.stdout!r} {proc.stderr!r}")
        text = read(out.replace("%j", job)) if os.path.exists(out.replace("%j", job)) else ""
        return proc, job, text

    def assert_results(self, path, job, ranks, device="cpu"):
        import h5py
        self.assertTrue(os.path.isfile(path), f"{path} missing")
        with h5py.File(path, "r") as f:
            self.assertEqual(f.attrs["schema"], "dlscale/4")
            self.assertEqual(f.attrs["world_size"], ranks)
            env = dict(f["system/environment"].attrs)
            self.assertEqual(env.get("SLURM_JOB_ID"), job, env)
            self.assertEqual(env.get("SLURM_NTASKS"), str(ranks), env)
            table = f["system/ranks"][()]
            self.assertEqual(list(table["rank"]), list(range(ranks)))
            affinity = [cpus_of(v.decode()) for v in table["cpu_affinity"]]
            case = f["cases/0000"]
            self.assertEqual(case.attrs["status"], "ok", case.attrs.get("message"))
            self.assertEqual(case.attrs["device_type"], device)
            self.assertEqual(case.attrs["ranks"], ranks)
            self.assertEqual(case["iter_time_s"].shape, (ranks, 3))
            return env, affinity, dict(case.attrs)

    # -- the templates ---------------------------------------------------------------------

    def test_cpu_template_one_rank_per_socket(self):
        outdir = os.path.join(self.dir, "results")
        proc, job, text = self.sbatch_wait(CPU_TEMPLATE, SMALL, sbatch=["--ntasks=2"],
                                           env={"DLSCALE_OUT_DIR": outdir, "DLSCALE_REPORT": REPORT})
        self.assertEqual(proc.returncode, 0, text)
        self.assertIn("--cpu-bind=sockets", text)
        self.assertIn("--mpi=pmix", text)
        self.assertIn(f"dlscale-cpu.sbatch: results in {outdir}/dlscale-{job}.h5", text)
        self.assertRegex(text, r"0000\s+mnist_fnn:width=16\s+\w+\s+cpu", "dlscale-report summary ran")
        env, affinity, case = self.assert_results(os.path.join(outdir, f"dlscale-{job}.h5"), job, 2)
        state = job_state(job)
        if state[0] is not None:    # (purged only after MinJobAge)
            self.assertEqual(state, ("COMPLETED", "0:0"))
        # threads = the cores of a socket
        self.assertEqual(case["threads"], cores_of_socket0())
        if CLUSTER.task_plugin == "task/affinity":
            sockets = list(sockets_of_machine().values())
            for rank, cpus in enumerate(affinity):
                self.assertIn(cpus, sockets, f"rank {rank} bound to {sorted(cpus)}, not to one socket {sockets}")
            # Slurm's record of the binding agrees with what dlscale read (rank 0's mask).
            masks = env["SLURM_CPU_BIND_LIST"].split(",")
            self.assertEqual(len(masks), 2, env)
            self.assertEqual(cpus_of_mask(masks[0]), affinity[0])

    def test_gpu_template_runs_on_cpu_with_dlscale_device_cpu(self):
        outdir = os.path.join(self.dir, "results")
        # dlscale's flags half from DLSCALE_ARGS, half as the script's arguments
        proc, job, text = self.sbatch_wait(GPU_TEMPLATE, SMALL[4:], sbatch=["--ntasks-per-node=2", "--gpus-per-task=0"],
                                           env={"DLSCALE_OUT_DIR": outdir, "DLSCALE_DEVICE": "cpu",
                                                "DLSCALE_BIN": DLSCALE, "DLSCALE_ARGS": " ".join(SMALL[:4])})
        self.assertEqual(proc.returncode, 0, text)
        self.assertNotIn("--gpu-bind", text)
        env, affinity, case = self.assert_results(os.path.join(outdir, f"dlscale-{job}.h5"), job, 2)
        if CLUSTER.task_plugin == "task/affinity":
            # --cpus-per-task = CPUs / ranks, --cpu-bind=cores: disjoint CPU sets
            self.assertTrue(all(affinity), affinity)
            self.assertFalse(affinity[0] & affinity[1], affinity)
            self.assertEqual(case["threads"], len(affinity[0]))   # --threads auto

    def test_gpu_template_without_gpu_fails_clearly(self):
        if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
            self.skipTest("this machine has a GPU")
        proc, job, text = self.sbatch_wait(GPU_TEMPLATE, SMALL, sbatch=["--ntasks-per-node=2", "--gpus-per-task=0"],
                                           env={"DLSCALE_OUT_DIR": os.path.join(self.dir, "results")})
        self.assertNotEqual(proc.returncode, 0, text)
        self.assertIn(f"dlscale-gpu.sbatch: error: no GPU is visible to job {job}", text)
        self.assertIn("DLSCALE_DEVICE=cpu", text)
        self.assertIn(job_state(job)[0], ("FAILED", None))   # None: purged after MinJobAge

    def test_bad_workload_fails_with_message_and_exit_code(self):
        outdir = os.path.join(self.dir, "results")
        args = ["-w", "no_such_net"] + SMALL[2:]
        proc, job, text = self.sbatch_wait(CPU_TEMPLATE, args, sbatch=["--ntasks=2"], env={"DLSCALE_OUT_DIR": outdir})
        self.assertEqual(proc.returncode, 2, text)      # sbatch --wait returns the job's exit code
        self.assertIn("dlscale: error: unknown workload 'no_such_net'", text)
        self.assertIn(f"dlscale-cpu.sbatch: error: dlscale exited with code 2 in job {job} (bad input", text)
        state, code = job_state(job)
        if state is not None:    # (purged only after MinJobAge)
            self.assertEqual((state, code), ("FAILED", "2:0"))
        self.assertFalse(os.path.exists(os.path.join(outdir, f"dlscale-{job}.h5")))

    def test_installed_cpu_template_runs_the_installed_binary(self):
        build = os.environ.get("DLSCALE_BUILD_DIR")
        if not build:
            self.skipTest("DLSCALE_BUILD_DIR (the build tree to install) is not set")
        prefix = os.path.join(self.dir, "prefix")
        install = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
        self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
        template = os.path.join(prefix, "share", "dlscale", "slurm", "dlscale-cpu.sbatch")
        outdir = os.path.join(self.dir, "results")
        # Nothing but the installed tree: no DLSCALE_BIN, no dlscale on PATH, no report given.
        proc, job, text = self.sbatch_wait(template, SMALL, sbatch=["--ntasks=1"],
                                           env={"DLSCALE_BIN": "", "DLSCALE_OUT_DIR": outdir, "PATH": "/usr/bin:/bin"})
        self.assertEqual(proc.returncode, 0, text)
        self.assertIn(f"{prefix}/bin/dlscale run", text)
        self.assert_results(os.path.join(outdir, f"dlscale-{job}.h5"), job, 1)
        self.assertRegex(text, r"0000\s+mnist_fnn:width=16\s+\w+\s+cpu", "the installed dlscale-report ran")

    def test_missing_binary_fails_clearly(self):
        missing = os.path.join(self.dir, "no", "dlscale")
        proc, job, text = self.sbatch_wait(CPU_TEMPLATE, SMALL, sbatch=["--ntasks=1"], env={"DLSCALE_BIN": missing})
        self.assertEqual(proc.returncode, 1, text)
        self.assertIn(f"dlscale-cpu.sbatch: error: dlscale binary '{missing}' is not an executable file", text)

    # -- slurm/study -----------------------------------------------------------------------

    def study(self, args, env=None, timeout=150):
        e = {"DLSCALE_BIN": DLSCALE}
        e.update(env or {})
        return CLUSTER.run([STUDY, *args], env=e, timeout=timeout, cwd=self.dir)

    def test_study_two_points_wait(self):
        d = os.path.join(self.dir, "study")
        # Bind each rank to its own core here (2 ranks on a 1-socket machine would share it).
        proc = self.study(["--ranks", "1,2", "-w", "mnist_fnn:width=16", "--batch", "8", "--study-dir", d,
                           "--wait", "--poll", "0.3", "--timeout", "120", "--", "--iterations", "3", "--warmup", "1"],
                          env={"DLSCALE_CPU_BIND": "cores", "DLSCALE_THREADS": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr + proc.stdout)
        with open(os.path.join(d, "study.json")) as f:
            manifest = json.load(f)
        points = manifest["points"]
        self.assertEqual([p["label"] for p in points], ["ranks-1", "ranks-2"])
        files = []
        for p, ranks in zip(points, (1, 2)):
            self.assertEqual((p["state"], p["exit_code"]), ("COMPLETED", "0:0"), p)
            path = os.path.join(d, f"dlscale-{p['job_id']}.h5")
            self.assertEqual(p["file"], path)
            env, affinity, case = self.assert_results(path, p["job_id"], ranks)
            self.assertEqual(case["threads"], 1)
            if CLUSTER.task_plugin == "task/affinity":
                self.assertTrue(all(len(a) == 1 for a in affinity), affinity)
            files.append(path)
        with open(os.path.join(d, "files.txt")) as f:
            self.assertEqual(f.read().split(), files)
        self.assertIn(f"{REPORT} summary {files[0]} {files[1]}", proc.stdout)
        # One summary row per file (the diagnosis sentences after the table name the series too).
        # One row per file; what both share (workload, driver, device) said once above the table.
        rows = re.findall(r"^\S+\.h5\s+\d{4}\s", proc.stdout, re.M)
        self.assertEqual(len(rows), 2, proc.stdout)
        self.assertRegex(" ".join(proc.stdout.split()), r"every row: workload mnist_fnn:width=16, driver \w+, "
                                                        r"device cpu,")

    def test_study_without_wait_prints_job_ids_then_collect(self):
        d = os.path.join(self.dir, "study")
        proc = self.study(["--ranks", "1", "-w", "mnist_fnn:width=16", "--study-dir", d, "--",
                           "--batch", "8", "--iterations", "3", "--warmup", "1"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        ids = proc.stdout.split()
        self.assertEqual(len(ids), 1, proc.stdout)
        self.assertTrue(ids[0].isdigit())
        self.assertIn(f"--collect {d} --wait", proc.stderr)
        proc = self.study(["--collect", d, "--wait", "--poll", "0.3", "--timeout", "120"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assert_results(os.path.join(d, f"dlscale-{ids[0]}.h5"), ids[0], 1)

    def test_study_refuses_a_bad_matrix_before_submitting_and_runs_no_shell(self):
        d = os.path.join(self.dir, "study")
        marker = os.path.join(self.dir, "INJECTED")
        evil = f"no_such_net;touch {marker};$(touch {marker})"
        proc = self.study(["--ranks", "1,2", "-w", evil, "--batch", "8", "--study-dir", d, "--wait",
                           "--poll", "0.3", "--timeout", "120", "--", "--iterations", "3"])
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertFalse(os.path.exists(marker), "a workload name was run by a shell")
        self.assertIn(f"slurm/study: error: dlscale flags: unknown workload '{evil}'", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "study.json")), "nothing may be submitted")

    def test_study_reports_failed_jobs_without_hanging(self):
        # A matrix the one-process check on the submit host accepts but a 2-rank job refuses:
        # strong scaling of a global batch of 3 divides by 1 rank, not by 2.
        d = os.path.join(self.dir, "study")
        started = time.monotonic()
        proc = self.study(["--ranks", "1,2", "-w", "mnist_fnn:width=16", "--batch", "3", "--study-dir", d, "--wait",
                           "--poll", "0.3", "--timeout", "120", "--tail", "8", "--",
                           "--scaling", "strong", "--iterations", "3"])
        self.assertLess(time.monotonic() - started, 120)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        with open(os.path.join(d, "study.json")) as f:
            points = {p["label"]: p for p in json.load(f)["points"]}
        self.assertEqual(points["ranks-1"]["state"], "COMPLETED", points)
        failed = points["ranks-2"]
        self.assertEqual((failed["state"], failed["exit_code"]), ("FAILED", "2:0"), failed)
        self.assertIn(f"FAILED: job {failed['job_id']} (ranks-2): FAILED, exit code 2:0", proc.stderr)
        self.assertEqual(proc.stderr.count("dlscale: error: strong scaling: global batch 3 does not divide by 2 ranks"),
                         1, proc.stderr)
        self.assertIn("1 of 2 job(s) produced results", proc.stderr)

    def test_study_reports_unsubmittable_and_never_starting_points(self):
        # An unknown partition: sbatch refuses the job.
        d = os.path.join(self.dir, "study")
        proc = self.study(["--ranks", "1", "-w", "mnist_fnn:width=16", "--study-dir", d, "--wait",
                           "--sbatch-arg=--partition=no_such_partition", "--poll", "0.3", "--timeout", "60"])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("error: sbatch failed for point ranks-1", proc.stderr)
        self.assertIn("FAILED: point ranks-1 was not submitted", proc.stderr)
        # 2 nodes of a 1-node partition: the job pends forever; reported, not waited for.
        d2 = os.path.join(self.dir, "study2")
        proc = self.study(["--nodes", "2", "-w", "mnist_fnn:width=16", "--study-dir", d2, "--wait",
                           "--poll", "0.3", "--timeout", "60"])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        m = re.search(r"FAILED: job (\d+) \(nodes-2\): pending with reason PartitionConfig", proc.stderr)
        self.assertIsNotNone(m, proc.stderr)
        CLUSTER.run(["scancel", m.group(1)])

    def test_study_usage_errors(self):
        proc = self.study(["--ranks", "1", "-w", "mnist_fnn", "--", "--out", "x.h5"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--out is set by the study", proc.stderr)
        proc = self.study(["--ranks", "0,1", "-w", "mnist_fnn"])
        self.assertEqual(proc.returncode, 2)
        proc = self.study(["-w", "mnist_fnn"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--ranks LIST or --nodes LIST", proc.stderr)

    def test_study_one_job_with_dlscale_ranks(self):
        helptext = subprocess.run([DLSCALE, "run", "--help"], capture_output=True, text=True).stdout
        if "--ranks" not in helptext:
            self.skipTest("this dlscale has no --ranks option")
        d = os.path.join(self.dir, "study")
        proc = self.study(["--one-job", "--ranks", "1,2", "-w", "mnist_fnn:width=16", "--batch", "8",
                           "--study-dir", d, "--wait", "--poll", "0.3", "--timeout", "120", "--",
                           "--iterations", "3", "--warmup", "1"], env={"DLSCALE_CPU_BIND": "cores", "DLSCALE_THREADS": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        import h5py
        with open(os.path.join(d, "files.txt")) as f:
            files = f.read().split()
        self.assertEqual(len(files), 1)
        with h5py.File(files[0], "r") as f:
            self.assertEqual(f.attrs["world_size"], 2)
            self.assertEqual(sorted(f[f"cases/{c}"].attrs["ranks"] for c in f["cases"]), [1, 2])


def main():
    # munged, slurmctld and slurmd live in /usr/sbin, which a non-login PATH may lack.
    path = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(path + [d for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin") if d not in path])
    missing = slurm_setup.missing_commands()
    if missing:
        print(f"SKIP: Slurm/munge not installed (missing {', '.join(missing)}): "
              "apt-get install slurm-wlm munge", file=sys.stderr)
        return SKIP
    if os.geteuid() != 0:
        print("SKIP: the test starts slurmd, which must run as root", file=sys.stderr)
        return SKIP
    for path in (DLSCALE, STUDY):
        if not os.access(path, os.X_OK):
            print(f"error: {path} is not executable", file=sys.stderr)
            return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # run atexit's clean-up
    started = time.monotonic()
    result = unittest.main(argv=[sys.argv[0]] + sys.argv[1:], exit=False).result
    print(f"slurm tests took {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
