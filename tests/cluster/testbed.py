#!/usr/bin/env python3
"""The cluster on one machine: hosts made of Linux namespaces, joined by a bridge, real TCP.

Each host is a network namespace (`ip netns`, own interfaces, addresses and ports) with its own
UTS namespace (own hostname, so `gethostname` and `MPI_Get_processor_name` differ), linked by a
veth pair to a bridge in a switch namespace. Nothing of a test bed lives in the machine's own
network namespace: its addresses, a private /24, exist only inside the bed. The hosts share the
machine's file system, CPUs and memory. See docs/cluster-testing.md.

Python:

    from testbed import Cluster
    with Cluster(hosts=2) as c:                      # raises Unavailable without root or ip
        c.run(c.hosts[1], ["hostname"])              # CompletedProcess, inside that host
        cmd = c.mpirun_args(2) + [dlscale, "info"]   # run it in c.hosts[0]
        c.shape(c.hosts[1], "500mbit"); c.unshape(c.hosts[1]); c.link(c.hosts[1], False)
        with c.slurm() as s:                         # munged, slurmctld, one slurmd per host
            s.run(["sbatch", "--wait", "-N", "2", ...])   # on the first host, SLURM_CONF set

CLI (as root; `--name` picks the instance when several are up):

    testbed.py up --hosts 2 [--name NAME]     testbed.py run HOST -- CMD...
    testbed.py mpirun [--ranks-per-host 2] -- PROGRAM ARGS...
    testbed.py shape HOST --rate 500mbit      testbed.py unshape HOST
    testbed.py link HOST down|up              testbed.py kill HOST
    testbed.py slurm up|down                  testbed.py status
    testbed.py down [--name NAME | --all]

Teardown (`Cluster.close`, `down`) kills every process inside the hosts' namespaces and the
instance's munged, unmounts the UTS files, deletes the namespaces (and with them veths and
bridge) and the instance's directory. A Cluster object also tears down at exit and from a
detached watchdog once the creating process is gone (killed by a timeout, SIGKILL...).
"""

import argparse
import atexit
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "slurm"))
import slurm_setup  # noqa: E402  (tests/slurm: what a test's own Slurm needs)
RSH_AGENT = os.path.join(HERE, "rsh-agent")
RUN_DIR = os.environ.get("DLSCALE_CLUSTER_RUN_DIR", "/run/dlscale-cluster")
PREFIX = "dlc"                     # instance names: dlc<pid>[a-z]*; hosts <name>n<i>, switch <name>sw
NAME_RE = re.compile(r"^dlc[0-9]+[a-z]*$")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
PR_SET_PDEATHSIG = 1


class Unavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no ip, no permission): tests skip (77)."""


def _die_with_parent(sig=signal.SIGKILL):
    def f():
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    return f


def _sh(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(shlex.quote, cmd))} exited with {r.returncode}: {r.stderr.strip()}")
    return r


def _with_sbin_on_path():
    path = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(path + [d for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin") if d not in path])


def machine_cpu():
    """The CPU model of the machine every host of the bed shares (lscpu), for benches to name
    the machine their figures come from."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return out.split("Model name:")[1].splitlines()[0].strip() if "Model name:" in out else "unknown"


def why_unavailable():
    """None where the test bed can be made here, else one line naming the reason."""
    _with_sbin_on_path()
    if os.geteuid() != 0:
        return "the cluster test bed needs root (network namespaces, bind mounts)"
    for tool in ("ip", "nsenter", "unshare", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"the cluster test bed needs '{tool}' (iproute2, util-linux)"
    probe = f"{PREFIX}probe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot make a network namespace here: ip netns add: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ns_inode(path):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def pids_in(net_inodes=(), uts_inodes=(), cwd_root=None):
    """PIDs (not this one) in one of these network or UTS namespaces, or whose cwd is under cwd_root."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            if net_inodes and os.stat(f"/proc/{pid}/ns/net").st_ino in net_inodes:
                found.append(int(pid))
                continue
            if uts_inodes and os.stat(f"/proc/{pid}/ns/uts").st_ino in uts_inodes:
                found.append(int(pid))
                continue
            if cwd_root:
                cwd = os.readlink(f"/proc/{pid}/cwd")
                if cwd == cwd_root or cwd.startswith(cwd_root + "/"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _kill_all(pids_fn, rounds=20):
    for _ in range(rounds):
        pids = pids_fn()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)


# -- one instance -------------------------------------------------------------------------


# tbf's bucket: above the largest packet the hosts' TCP hands the link (64 KiB, with segmentation
# offload). tbf cuts a packet larger than its bucket into frames in software: with a 64 KiB
# bucket, TCP both ways at 500 Mbit/s took 1.4 of the machine's 2 cores (softirq), 7.4 ns of CPU
# per byte at each end; with 80 KiB, 1.7 ns (bench/shaped_link.py --burst). The bed's hosts share
# the machine's cores: a shaper eating them slowed the ranks' compute as no real NIC would.
SHAPER_BURST = "80kb"


class Cluster:
    """A test bed of `hosts` hosts. `owner`: the PID whose death tears it down (None: persists)."""

    def __init__(self, hosts=2, name=None, watchdog=True, subnet=None):
        reason = why_unavailable()
        if reason:
            raise Unavailable(reason)
        if hosts < 1 or hosts > 200:
            raise ValueError("hosts: 1 to 200")
        self.name = name or self._free_name()
        if not NAME_RE.match(self.name):
            raise ValueError(f"instance name must match {NAME_RE.pattern}")
        self.dir = os.path.join(RUN_DIR, self.name)
        octet = os.getpid() % 250 + 1
        self.subnet_prefix = subnet or f"10.{200 + len(self.name) % 50}.{octet}"
        self.subnet = f"{self.subnet_prefix}.0/24"
        self.hosts = [f"{self.name}n{i}" for i in range(hosts)]
        self.switch = f"{self.name}sw"
        self.addresses = {h: f"{self.subnet_prefix}.{i + 1}" for i, h in enumerate(self.hosts)}
        self._slurm = None
        self._watchdog = None
        self._closed = False
        os.makedirs(RUN_DIR, exist_ok=True)
        os.chmod(RUN_DIR, 0o755)
        os.makedirs(self.dir)      # fails when the name is taken
        os.chmod(self.dir, 0o755)
        self._save(owner=os.getpid() if watchdog else 0)
        if watchdog:
            atexit.register(self.close)
            self._watchdog = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "_watch", self.name, str(os.getpid())],
                cwd="/", start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _free_name():
        base = f"{PREFIX}{os.getpid()}"
        for suffix in [""] + [chr(c) for c in range(ord("a"), ord("z") + 1)]:
            if not os.path.exists(os.path.join(RUN_DIR, base + suffix)):
                return base + suffix
        raise RuntimeError("no free instance name")

    def _save(self, owner):
        state = {"name": self.name, "hosts": self.hosts, "switch": self.switch, "subnet": self.subnet,
                 "addresses": self.addresses, "owner": owner}
        with open(os.path.join(self.dir, "state.json"), "w") as f:
            json.dump(state, f)

    @classmethod
    def attach(cls, name):
        """The running instance `name` (made by another process, e.g. `testbed.py up`)."""
        with open(os.path.join(RUN_DIR, name, "state.json")) as f:
            state = json.load(f)
        self = cls.__new__(cls)
        self.name, self.hosts, self.switch = state["name"], state["hosts"], state["switch"]
        self.subnet, self.addresses = state["subnet"], state["addresses"]
        self.subnet_prefix = self.subnet.rsplit(".", 1)[0]
        self.dir = os.path.join(RUN_DIR, name)
        self._slurm, self._watchdog, self._closed = None, None, False
        return self

    def uts_file(self, host):
        return os.path.join(self.dir, "uts", host)

    def _build(self):
        os.makedirs(os.path.join(self.dir, "uts"))
        _sh(["ip", "netns", "add", self.switch])
        _sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        _sh(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        _sh(["ip", "-n", self.switch, "link", "set", "lo", "up"])
        for i, h in enumerate(self.hosts):
            _sh(["ip", "netns", "add", h])
            _sh(["ip", "-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", h])
            _sh(["ip", "-n", self.switch, "link", "set", f"p{i}", "master", "br0"])
            _sh(["ip", "-n", self.switch, "link", "set", f"p{i}", "up"])
            _sh(["ip", "-n", h, "addr", "add", f"{self.addresses[h]}/24", "dev", "eth0"])
            _sh(["ip", "-n", h, "link", "set", "eth0", "up"])
            _sh(["ip", "-n", h, "link", "set", "lo", "up"])
            uts = self.uts_file(h)
            open(uts, "w").close()
            # unshare bind-mounts the new UTS namespace on the file: it outlives the command.
            _sh(["unshare", f"--uts={uts}", "hostname", h])

    # -- running things in a host --------------------------------------------------------

    def host(self, host):
        """`host` as a full host name; "n1" and "1" are short for <name>n1."""
        if host in self.hosts:
            return host
        for full in (self.name + host, f"{self.name}n{host}"):
            if full in self.hosts:
                return full
        raise ValueError(f"no host {host!r} in {self.name} (hosts: {' '.join(self.hosts)})")

    def enter(self, host):
        """The command prefix that runs a command inside `host`."""
        host = self.host(host)
        if host not in self.hosts:
            raise ValueError(f"no host {host!r} in {self.name} (hosts: {' '.join(self.hosts)})")
        return ["nsenter", f"--net=/run/netns/{host}", f"--uts={self.uts_file(host)}", "--"]

    def _cmd(self, host, cmd):
        if isinstance(cmd, str):
            cmd = ["sh", "-c", cmd]
        return self.enter(host) + list(cmd)

    def run(self, host, cmd, env=None, timeout=300, check=False, **kw):
        """subprocess.run of `cmd` (list, or str for sh -c) inside `host`, output captured as text."""
        kw.setdefault("capture_output", "stdout" not in kw and "stderr" not in kw)
        kw.setdefault("text", True)
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run(self._cmd(host, cmd), env=e, timeout=timeout, check=check,
                              preexec_fn=_die_with_parent(), **kw)

    def popen(self, host, cmd, env=None, **kw):
        """subprocess.Popen of `cmd` inside `host`; it gets SIGKILL when this process dies."""
        e = dict(os.environ)
        e.update(env or {})
        kw.setdefault("preexec_fn", _die_with_parent())
        p = subprocess.Popen(self._cmd(host, cmd), env=e, **kw)
        # Return once it runs inside the host (nsenter has joined both namespaces), so that
        # kill_host right after popen finds it.
        want = (ns_inode(f"/run/netns/{self.host(host)}"), ns_inode(self.uts_file(self.host(host))))
        deadline = time.monotonic() + 10
        while p.poll() is None and time.monotonic() < deadline:
            try:
                if (os.stat(f"/proc/{p.pid}/ns/net").st_ino, os.stat(f"/proc/{p.pid}/ns/uts").st_ino) == want:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        return p

    def mpirun_args(self, ranks_per_host=1, hosts=None):
        """`env OMPI_ALLOW_RUN_AS_ROOT... mpirun ...` spreading ranks over `hosts` (default:
        all); run it in the first of them (c.run(c.hosts[0], c.mpirun_args(2) + [prog, ...]))."""
        hosts = list(hosts or self.hosts)
        hostfile = os.path.join(self.dir, f"hostfile-{'-'.join(hosts)}-{ranks_per_host}")
        with open(hostfile, "w") as f:
            f.writelines(f"{h} slots={ranks_per_host}\n" for h in hosts)
        env = dict(MPI_ENV)
        if "DLSCALE_CLUSTER_RUN_DIR" in os.environ:
            env["DLSCALE_CLUSTER_RUN_DIR"] = RUN_DIR
        return (["env"] + [f"{k}={v}" for k, v in env.items()] +
                ["mpirun", "--hostfile", hostfile, "-np", str(ranks_per_host * len(hosts)),
                 "--mca", "plm_rsh_agent", RSH_AGENT,
                 "--mca", "btl", "tcp,self",
                 "--mca", "btl_tcp_if_include", self.subnet,
                 "--mca", "oob_tcp_if_include", self.subnet,
                 "--mca", "mpi_yield_when_idle", "1",
                 # Two TCP connections per pair of ranks: with one, a 16 MiB all-reduce between
                 # two hosts on a 500 Mbit/s link took 0.56-0.58 s, half of what TCP delivers both
                 # ways at once; with two 0.31-0.34 s (bench/shaped_link.py). Larger socket
                 # buffers (btl_tcp_sndbuf/rcvbuf 4 MiB) did not change it.
                 "--mca", "btl_tcp_links", "2",
                 # mpirun notices a daemon whose host became unreachable (its link down) from
                 # TCP keepalives on its connection to it, after 5 + 3 x 5 s, and ends the job;
                 # Open MPI's defaults (300 s, then 9 probes 20 s apart) wait 8 minutes.
                 "--mca", "oob_tcp_keepalive_time", "5", "--mca", "oob_tcp_keepalive_intvl", "5",
                 "--mca", "oob_tcp_keepalive_probes", "3",
                 # When mpirun ends a job it sends its ranks SIGCONT, SIGTERM and SIGKILL,
                 # odls_base_sigkill_timeout seconds apart (1 by default). A rank blocked in a
                 # collective prints its one line 0.5 s after SIGTERM (suite/process/stop_signals.h);
                 # on a loaded 2-core machine, 0.5 s of margin once lost that line to SIGKILL (CI,
                 # test_network_faults), and 5 s once more a surviving rank's line, in a CI run
                 # whose tests and background builds kept both cores busy. 10 s keeps what the
                 # fault tests check (that line) independent of the machine's load; it lengthens
                 # a job mpirun ends (SIGCONT, 10 s, SIGTERM, 10 s, SIGKILL), within the tests' bounds.
                 "--mca", "odls_base_sigkill_timeout", "10",
                 "--bind-to", "none"])

    # -- the network ---------------------------------------------------------------------

    def _port(self, host):
        return f"p{self.hosts.index(self.host(host))}"

    def shape(self, host, rate, burst=SHAPER_BURST, latency="50ms"):
        """Limit `host`'s link to `rate` (tc syntax, e.g. "500mbit") both ways (tbf at both ends)."""
        self.unshape(host)
        for ns, dev in ((self.host(host), "eth0"), (self.switch, self._port(host))):
            _sh(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                 "rate", rate, "burst", burst, "latency", latency])

    def unshape(self, host):
        for ns, dev in ((self.host(host), "eth0"), (self.switch, self._port(host))):
            _sh(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"], check=False)

    def shape_every_host(self, rate):
        """shape() every host's link to `rate`; "none": unshape() them all (the benches' --rates)."""
        for h in self.hosts:
            if rate == "none":
                self.unshape(h)
            else:
                self.shape(h, rate)

    def link(self, host, up):
        """Take `host`'s link down (up=False: its switch port goes down, eth0 loses carrier) or up."""
        _sh(["ip", "-n", self.switch, "link", "set", self._port(host), "up" if up else "down"])

    def wait_reachable(self, src, dst, timeout=30):
        """Until `src` reaches `dst`: a TCP connection attempt to a closed port answered (refused:
        dst's kernel sent its RST). Right after a link comes back, src's ARP entry for dst can
        still be failing a resolution begun while the link was down, and a connection then
        fails at once with "no route to host" (test_network_faults, docs/cluster-testing.md)."""
        code = ("import socket, sys, time\n"
                f"end = time.monotonic() + {timeout}\n"
                "while True:\n"
                "    try:\n"
                f"        socket.create_connection(({self.addresses[self.host(dst)]!r}, 9), timeout=1).close()\n"
                "        break\n"
                "    except ConnectionRefusedError:\n"
                "        break\n"
                "    except OSError:\n"
                "        if time.monotonic() > end:\n"
                "            sys.exit(f'{sys.argv[0]}: not reachable')\n"
                "        time.sleep(0.1)\n")
        r = self.run(src, [sys.executable, "-c", code], timeout=timeout + 30)
        if r.returncode != 0:
            raise RuntimeError(f"{dst} not reachable from {src} within {timeout} s: {r.stderr.strip()}")

    # -- processes -----------------------------------------------------------------------

    def host_pids(self, host):
        host = self.host(host)
        return pids_in(net_inodes={ns_inode(f"/run/netns/{host}")} - {None},
                       uts_inodes={ns_inode(self.uts_file(host))} - {None})

    def kill_host(self, host):
        """SIGKILL every process running in `host` (its network or UTS namespace)."""
        self.enter(host)
        _kill_all(lambda: self.host_pids(host))

    # -- Slurm ---------------------------------------------------------------------------

    def slurm(self, detached=False):
        """The Slurm of this bed (munged, slurmctld in the first host, a slurmd per host);
        `with c.slurm() as s:` starts and stops it; s.run(cmd) runs a command on the first host."""
        if self._slurm is None:
            self._slurm = Slurm(self, detached=detached)
        return self._slurm

    # -- teardown ------------------------------------------------------------------------

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            if self._slurm is not None:
                self._slurm.stop()
        finally:
            teardown(self.name)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait()
            self._watchdog = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def teardown(name):
    """Remove everything of instance `name`: processes, mounts, namespaces, its directory."""
    d = os.path.join(RUN_DIR, name)
    netns = [n for n in _netns_list() if n.startswith(name) and re.fullmatch(re.escape(name) + r"(n[0-9]+|sw)", n)]
    net_inodes = {ns_inode(f"/run/netns/{n}") for n in netns} - {None}
    uts_dir = os.path.join(d, "uts")
    uts_files = [os.path.join(uts_dir, f) for f in os.listdir(uts_dir)] if os.path.isdir(uts_dir) else []
    uts_inodes = {i for i in (ns_inode(f) for f in uts_files) if i is not None}
    # Once its daemons are gone the instance's files are no UTS namespace any more: only namespace
    # inodes (nsfs) count, not the plain empty files.
    uts_inodes = {i for f, i in zip(uts_files, (ns_inode(f) for f in uts_files)) if _is_mountpoint(f)} & uts_inodes
    _kill_all(lambda: pids_in(net_inodes, uts_inodes, cwd_root=d))
    for f in uts_files:
        while _is_mountpoint(f):
            if subprocess.run(["umount", f], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", f], capture_output=True)
                break
    for n in sorted(netns, key=lambda n: n.endswith("sw")):   # hosts first, then the switch
        subprocess.run(["ip", "netns", "del", n], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


def _is_mountpoint(path):
    try:
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == path for line in f)
    except OSError:
        return False


def _netns_list():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def instances():
    """{name: owner pid (0: made by `up`)} of the instances on this machine, also half-removed ones."""
    found = {}
    if os.path.isdir(RUN_DIR):
        for n in os.listdir(RUN_DIR):
            if NAME_RE.match(n):
                try:
                    with open(os.path.join(RUN_DIR, n, "state.json")) as f:
                        found[n] = json.load(f).get("owner", 0)
                except (OSError, ValueError):
                    found[n] = 0
    for n in _netns_list():
        m = re.fullmatch(r"(dlc[0-9]+[a-z]*?)(n[0-9]+|sw)", n)
        if m:
            found.setdefault(m.group(1), 0)
    return found


def _alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# -- Slurm --------------------------------------------------------------------------------


class Slurm:
    """munged (machine's namespace, its socket in the bed's directory), slurmctld on the first
    host, `slurmd -N HOST` on every host; NodeAddr = the host's address; per-node spool, pid,
    log and TmpFS (`%n`)."""

    def __init__(self, cluster, detached=False):
        self.c = cluster
        self.dir = os.path.join(cluster.dir, "slurm")
        self.detached = detached
        self.procs = []
        self.login = cluster.hosts[0]
        os.makedirs(self.dir, exist_ok=True)
        self.env = slurm_setup.environment(self.dir)
        # Open MPI under srun: TCP on the bed's subnet, ranks yield when idle (the hosts share CPUs).
        self.env.update({"OMPI_MCA_btl": "tcp,self", "OMPI_MCA_btl_tcp_if_include": cluster.subnet,
                         "OMPI_MCA_oob_tcp_if_include": cluster.subnet, "OMPI_MCA_mpi_yield_when_idle": "1"})
        self.env.update(MPI_ENV)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _start(self, name, cmd, host=None):
        log = open(self.path("log", f"{name}.out"), "w")
        full = self.c.enter(host) + cmd if host else cmd
        kw = {"start_new_session": True} if self.detached else {"preexec_fn": _die_with_parent(signal.SIGTERM)}
        p = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=self.env, cwd=self.dir, **kw)
        log.close()
        self.procs.append((name, p))
        with open(self.path("pids"), "a") as f:
            f.write(f"{name} {p.pid}\n")
        return p

    def start(self):
        missing = slurm_setup.missing_commands()
        if missing:
            raise Unavailable(f"Slurm/munge not installed (missing {', '.join(missing)}): apt-get install slurm-wlm munge")
        for d in ("state", "spool", "log", "tmp"):
            os.makedirs(self.path(d), exist_ok=True)
        sock = slurm_setup.start_munged(self.dir, self._start, self._wait_for)
        for h in self.c.hosts:
            os.makedirs(self.path("spool", h), exist_ok=True)
            os.makedirs(self.path("tmp", h), exist_ok=True)
        ctl = self.login
        self.task_plugin = "task/affinity" if slurm_setup.affinity_works() else "task/none"
        # Fixed ports: every host has its own network stack.
        slurm_setup.write_conf(self.env["SLURM_CONF"], name=self.c.name, controller=ctl, address=self.c.addresses[ctl],
                               ports=(6817, 6818), sock=sock, directory=self.dir, task_plugin=self.task_plugin,
                               nodes=[(h, self.c.addresses[h]) for h in self.c.hosts], per_node=True)
        self._start("slurmctld", ["slurmctld", "-D", "-i"], host=ctl)
        for h in self.c.hosts:
            self._start(f"slurmd-{h}", ["slurmd", "-D", "-N", h], host=h)

        def idle():
            r = self.run(["sinfo", "--noheader", "--format=%T"], timeout=30)
            return r.returncode == 0 and r.stdout.split() == ["idle"]
        self._wait_for(idle, 60, "the nodes to become idle")
        return self

    def _wait_for(self, ready, timeout, what):
        slurm_setup.wait_for(self.procs, ready, timeout, what, self.logs)

    def logs(self, lines=30):
        return slurm_setup.log_tails(self.path("log"), lines)

    def run(self, cmd, env=None, timeout=300, host=None, cwd=None):
        """A Slurm command (sbatch, srun, squeue, slurm/study...) on the first host (the login node)."""
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run(self.c.enter(host or self.login) + list(cmd), env=e, capture_output=True,
                              text=True, timeout=timeout, cwd=cwd or self.dir, preexec_fn=_die_with_parent())

    def stop(self):
        names = {}
        if os.path.exists(self.path("pids")):
            with open(self.path("pids")) as f:
                names = dict(line.split() for line in f if line.strip())
        if names:
            try:
                self.run(["scancel", f"--user={os.geteuid()}"], timeout=20)
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    r = self.run(["squeue", "--noheader"], timeout=20)
                    if r.returncode != 0 or not r.stdout.strip():
                        break
                    time.sleep(0.3)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for name, pid in reversed(list(names.items())):   # slurmds, slurmctld, then munged
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass
        for name, p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # Whatever is left (slurmstepd, job processes) is in the hosts or under this directory.
        for h in self.c.hosts:
            self.c.kill_host(h)
        _kill_all(lambda: pids_in(cwd_root=self.dir))
        self.procs = []
        try:
            os.remove(self.path("pids"))
        except OSError:
            pass

    def __enter__(self):
        if not self.procs:
            try:
                self.start()
            except BaseException:
                self.stop()
                raise
        return self

    def __exit__(self, *exc):
        self.stop()


# -- CLI ----------------------------------------------------------------------------------


def _pick(name):
    if name:
        return Cluster.attach(name)
    up = sorted(n for n in instances() if os.path.exists(os.path.join(RUN_DIR, n, "state.json")))
    if len(up) != 1:
        sys.exit(f"testbed: {'no instance is up' if not up else 'several instances are up: ' + ' '.join(up)}; "
                 "name one with --name")
    return Cluster.attach(up[0])


def main(argv=None):
    p = argparse.ArgumentParser(prog="testbed.py", description="the cluster on one machine (docs/cluster-testing.md)")
    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("--name", default=argparse.SUPPRESS, help="the instance (default: the only one up)")
    p.add_argument("--name", default=None, help="the instance (default: the only one up)")
    sub = p.add_subparsers(dest="cmd", required=True)
    _add = sub.add_parser
    sub.add_parser = lambda *args, **kw: _add(*args, parents=[named], **kw)
    s = sub.add_parser("up", help="make an instance and leave it up")
    s.add_argument("--hosts", type=int, default=2)
    s = sub.add_parser("run", help="run a command in a host")
    s.add_argument("host")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    s = sub.add_parser("mpirun", help="mpirun from the first host over every host")
    s.add_argument("--ranks-per-host", type=int, default=1)
    s.add_argument("--print", action="store_true", help="print the command instead of running it")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    s = sub.add_parser("shape", help="limit a host's link (tbf at both ends)")
    s.add_argument("host")
    s.add_argument("--rate", required=True)
    s = sub.add_parser("unshape")
    s.add_argument("host")
    s = sub.add_parser("link", help="take a host's link down or up")
    s.add_argument("host")
    s.add_argument("state", choices=["up", "down"])
    s = sub.add_parser("kill", help="SIGKILL every process in a host")
    s.add_argument("host")
    s = sub.add_parser("slurm", help="start or stop the instance's Slurm")
    s.add_argument("state", choices=["up", "down"])
    sub.add_parser("status")
    s = sub.add_parser("down", help="remove an instance")
    s.add_argument("--all", action="store_true", help="every instance whose owner process is gone")
    s = sub.add_parser("_watch")
    s.add_argument("instance")
    s.add_argument("parent", type=int)
    a = p.parse_args(argv)
    _with_sbin_on_path()

    if a.cmd == "_watch":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # the owner closed it itself
        while _alive(a.parent):
            time.sleep(0.5)
        teardown(a.instance)
        return 0
    if a.cmd == "up":
        try:
            c = Cluster(hosts=a.hosts, name=a.name, watchdog=False)
        except Unavailable as e:
            print(f"testbed: {e}", file=sys.stderr)
            return 77
        for h in c.hosts:
            print(f"{h} {c.addresses[h]}")
        print(f"testbed: instance {c.name} up (subnet {c.subnet}); remove it with: {sys.argv[0]} --name {c.name} down",
              file=sys.stderr)
        return 0
    if a.cmd == "down":
        if a.all:
            for n, owner in instances().items():
                if not _alive(owner):
                    teardown(n)
                    print(f"testbed: removed {n}", file=sys.stderr)
            return 0
        c = _pick(a.name)
        if os.path.exists(os.path.join(c.dir, "slurm", "pids")):
            Slurm(c).stop()
        teardown(c.name)
        return 0
    if a.cmd == "status":
        for n, owner in sorted(instances().items()):
            print(f"{n} owner={owner or '-'}{'' if _alive(owner) or not owner else ' (gone: down --all removes it)'}")
        return 0
    c = _pick(a.name)
    argv = list(getattr(a, "argv", []))
    if argv and argv[0] == "--":
        argv = argv[1:]
    if a.cmd == "run":
        # With the instance's Slurm up: its SLURM_CONF, Open MPI settings and python3 too.
        env = Slurm(c).env if os.path.exists(os.path.join(c.dir, "slurm", "pids")) else os.environ
        os.execvpe("nsenter", c.enter(a.host) + (argv or ["bash"]), env)
    if a.cmd == "mpirun":
        cmd = c.enter(c.hosts[0]) + c.mpirun_args(a.ranks_per_host) + argv
        if a.print:
            print(" ".join(map(shlex.quote, cmd)))
            return 0
        os.execvp("nsenter", cmd)
    if a.cmd == "shape":
        c.shape(a.host, a.rate)
    elif a.cmd == "unshape":
        c.unshape(a.host)
    elif a.cmd == "link":
        c.link(a.host, a.state == "up")
    elif a.cmd == "kill":
        c.kill_host(a.host)
    elif a.cmd == "slurm":
        s = Slurm(c, detached=True)
        if a.state == "up":
            try:
                s.start()
            except BaseException:
                s.stop()
                raise
            print(f"testbed: Slurm of {c.name} up; `run HOST -- CMD` sets SLURM_CONF={s.env['SLURM_CONF']}",
                  file=sys.stderr)
        else:
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
