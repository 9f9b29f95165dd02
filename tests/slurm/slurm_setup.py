"""What a test's own Slurm needs, shared by the single-node Slurm of tests/slurm/test_slurm.py and
the per-host Slurm of the cluster test bed (tests/cluster/testbed.py): the commands, the
environment its commands run with, munged, the node description, slurm.conf, and waiting for the
daemons."""

import os
import shlex
import shutil
import subprocess
import sys
import time

NEEDED = ["munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "sinfo", "scancel"]
# Variables of the caller's own Slurm job, which would steer the test's commands to it.
CALLER_SLURM = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SACCT_")


def missing_commands():
    return [c for c in NEEDED if shutil.which(c) is None]


def affinity_works():
    """Whether sched_setaffinity restricts a process here (task/affinity needs it)."""
    probe = subprocess.run([sys.executable, "-c",
                            "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
                            "print(len(os.sched_getaffinity(0)))"], capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() == "1"


def environment(directory):
    """The environment of the Slurm in `directory`: none of the caller's SLURM_* variables, its
    slurm.conf, and `directory`/bin first on PATH holding a python3 that is this interpreter:
    slurm/study and results/dlscale-report start with `#!/usr/bin/env python3`, and the jobs run
    dlscale-report, so everything the cluster runs gets this one (which has h5py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CALLER_SLURM)}
    env["SLURM_CONF"] = os.path.join(directory, "slurm.conf")
    bin_dir = os.path.join(directory, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    with open(os.path.join(bin_dir, "python3"), "w") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    os.chmod(os.path.join(bin_dir, "python3"), 0o755)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", os.defpath)
    return env


def start_munged(directory, start, wait_for):
    """A munged with its own key and socket under `directory` (munge/, log/), started with
    start(name, argv); returns its socket once it exists."""
    munge = os.path.join(directory, "munge")
    os.makedirs(munge, exist_ok=True)
    os.chmod(directory, 0o755)   # munged wants execute permission for all on its socket path
    os.chmod(munge, 0o755)
    key = os.path.join(munge, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = os.path.join(munge, "munge.socket")
    start("munged", ["munged", "--foreground", f"--socket={sock}", f"--key-file={key}",
                     f"--pid-file={os.path.join(munge, 'munged.pid')}",
                     f"--log-file={os.path.join(directory, 'log', 'munged.log')}",
                     f"--seed-file={os.path.join(munge, 'munged.seed')}"])
    wait_for(lambda: os.path.exists(sock), 10, "munged's socket")
    return sock


def node_hardware(env):
    """The node as slurmd sees it: CPUs, boards, sockets, cores, threads (not RealMemory, which
    would drain the node if it came out a little higher than at registration)."""
    probe = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, env=env)
    first = probe.stdout.splitlines()[0] if probe.stdout else ""
    hw = " ".join(f for f in first.split() if f.split("=")[0] in
                  ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore"))
    if "CPUs=" not in hw:
        raise RuntimeError(f"slurmd -C gave no node description: {probe.stdout!r} {probe.stderr!r}")
    return hw


def write_conf(path, *, name, controller, address, ports, sock, directory, task_plugin, nodes, per_node):
    """slurm.conf for a Slurm under `directory`: nodes is [(name, address)]. per_node: each node's
    spool, pid file, log and TmpFS have their own path (%n), as nodes sharing one file system need;
    else one node's paths."""
    def under(*parts):
        return os.path.join(directory, *parts)
    open(under("plugstack.conf"), "w").close()    # no site SPANK plugins
    hw = node_hardware({**os.environ, "SLURM_CONF": path})
    node_paths = (f"SlurmdSpoolDir={under('spool', '%n')}\nTmpFS={under('tmp', '%n')}\n"
                  f"SlurmdPidFile={under('spool', 'slurmd-%n.pid')}\nSlurmdLogFile={under('log', 'slurmd-%n.log')}"
                  if per_node else
                  f"SlurmdSpoolDir={under('spool')}\nSlurmdPidFile={under('slurmd.pid')}\n"
                  f"SlurmdLogFile={under('log', 'slurmd.log')}")
    node_lines = "\n".join(f"NodeName={n} NodeAddr={a} {hw} State=UNKNOWN" for n, a in nodes)
    with open(path, "w") as f:
        f.write(f"""\
ClusterName={name}
SlurmctldHost={controller}({address})
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={under('state')}
{node_paths}
SlurmctldPidFile={under('slurmctld.pid')}
SlurmctldLogFile={under('log', 'slurmctld.log')}
PlugStackConfig={under('plugstack.conf')}
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin={task_plugin}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# sbatch --wait polls every 2 s only while that is under MinJobAge/2.
MinJobAge=4
SlurmctldTimeout=30
SlurmdTimeout=30
{node_lines}
PartitionName=debug Nodes={','.join(n for n, _ in nodes)} Default=YES MaxTime=INFINITE State=UP
""")


def wait_for(procs, ready, timeout, what, logs):
    """Until ready() or `timeout` s; a daemon of `procs` ([(name, Popen)]) that exits, or the
    timeout, raises with logs()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode}:\n{logs()}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}:\n{logs()}")


def log_tails(log_dir, lines=30):
    """The last lines of every file in `log_dir`."""
    text = []
    for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
        with open(os.path.join(log_dir, name), errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
        text.append(f"--- {name}\n" + "\n".join(tail))
    return "\n".join(text)
