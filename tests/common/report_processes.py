"""Many dlscale-report command lines, each in a process of its own, without paying Python's start
and imports in each (imported by tests, not a test).

A user's `dlscale-report CMD FILE` starts Python, imports h5py, numpy and the package (and
matplotlib for figures: most of a second in all), then runs `dlscale_report.cli.main()`, which
forks the child that reads the file. A test corpus of hundreds of (file, command) pairs spends
most of its time in those imports. Here one server process imports them once, then forks one
child per command line; the child sets sys.argv as the script would, changes to the command's
folder, sends its stdout and stderr to files and runs the same `main()`: the command, its own
crash-containing child, its exit status and its output are the real ones. What it skips is only
the script's choice of Python (dlscale_report/_interpreter.py), which tests/report covers.

    run_reports([(args, cwd), ...], timeout=600)  ->  [subprocess.CompletedProcess, ...]

args are the command line after `dlscale-report` (["summary", "x.h5"]). The server runs as many
children at once as this machine has CPUs; a child still running after `timeout` seconds is
killed (SIGALRM) and has returncode None and a stderr that says so, as run_all's timeouts.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

RESULTS = os.path.join(os.environ.get("DLSCALE_SOURCE_DIR",
                                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")),
                       "results")
REPORT = os.path.join(RESULTS, "dlscale-report")

# The server: reads {"jobs": [[args, cwd], ...], "timeout": s, "workers": n} on stdin, writes one
# JSON list of [returncode or -signal, stdout path, stderr path] on stdout. Single-threaded, so
# that each fork copies a process with no other thread holding a lock.
_SERVER = r'''
import json, os, signal, sys, tempfile
sys.path.insert(0, sys.argv[1])
import h5py, numpy                      # what every command imports
import dlscale_report.cli as cli
try:
    import dlscale_report.plots         # matplotlib with its Agg backend, for report and -o DIR
except ImportError:
    pass
from dlscale_report import mannwhitney
mannwhitney.have_scipy()                # scipy.stats, which compare imports on its first test
request = json.load(sys.stdin)
out_dir = tempfile.mkdtemp(prefix="dlscale_report_runs_")
results, running, queue = [None] * len(request["jobs"]), {}, list(enumerate(request["jobs"]))

def reap():
    pid, status = os.wait()
    i = running.pop(pid)
    results[i][0] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)

while queue or running:
    while queue and len(running) < request["workers"]:
        i, (args, cwd) = queue.pop(0)
        paths = [os.path.join(out_dir, f"{i}.{stream}") for stream in ("out", "err")]
        results[i] = [None] + paths
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 2
            try:
                os.chdir(cwd)
                for fd, path in zip((1, 2), paths):
                    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    os.dup2(target, fd)
                    os.close(target)
                signal.alarm(request["timeout"])
                sys.argv = [request["report"]] + args
                code = cli.main(args)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 2
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
                os._exit(code if isinstance(code, int) else 2)
        running[pid] = i
    reap()
json.dump(results, sys.stdout)
'''


def run_reports(jobs, timeout=600):
    """Each (args, cwd) of `jobs` as `dlscale-report ARGS` run in `cwd`, in job order."""
    request = {"jobs": [[list(map(str, args)), cwd] for args, cwd in jobs], "timeout": int(timeout),
               "workers": os.cpu_count() or 1, "report": REPORT}
    server = subprocess.run([sys.executable, "-c", _SERVER, RESULTS], input=json.dumps(request),
                            capture_output=True, text=True, check=True)
    results = json.loads(server.stdout)
    procs = []
    for (args, _), (code, out_path, err_path) in zip(jobs, results):
        with open(out_path, encoding="utf-8", errors="replace") as f:
            out = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            err = f.read()
        if code == -signal.SIGALRM:  # the server's timeout
            code, err = None, f"killed: still running after {timeout} s"
        procs.append(subprocess.CompletedProcess([REPORT] + list(args), code, out, err))
    for folder in {os.path.dirname(out_path) for _, out_path, _ in results}:
        shutil.rmtree(folder, ignore_errors=True)
    return procs
