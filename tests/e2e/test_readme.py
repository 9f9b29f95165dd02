"""The README's commands work as a newcomer types them: every command line of its shell blocks
(those that need neither a GPU nor the set-up scripts) runs verbatim in an empty directory, as
a job of 2 ranks and as a job of 1; the report commands' text fits 120 columns, the default
study's `scaling` and `diagnosis` too, and its HTML report opens with the diagnosis table.

`build/current/` and `results/dlscale-report` name this build's binaries and the source tree's
report tool; the working directory is a fresh one, so the files the commands write (the study's
results/study.h5 among them) land there. On 1 rank a command that needs 2 stops before running
anything with one line that says how to launch it; every other command succeeds.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH (tests/README.md).
"""

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

from dlscale_test import needs_drivers

SOURCE = os.environ["DLSCALE_SOURCE_DIR"]
DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
BUILD = os.path.dirname(DLSCALE)
WIDTH = 120


def readme_commands():
    """Every command line of the README's sh blocks, comments cut off, in order; lines that need
    a GPU (-d cuda) or are the set-up scripts (scripts/...) left out."""
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        text = f.read()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if not words or words[0].startswith("scripts/") or any(w == "cuda" for w in words):
                continue
            commands.append(words)
    return commands


def localised(words, ranks):
    """The command for this build, as a job of `ranks` ranks."""
    out = []
    for w in words:
        if w.startswith("build/current/"):
            w = os.path.join(BUILD, w[len("build/current/"):])
        elif w == "results/dlscale-report":
            w = os.path.join(SOURCE, "results", "dlscale-report")
        out.append(w)
    if out[0] == "mpirun":
        out[0] = MPIEXEC
        out[out.index("-np") + 1] = str(ranks)
    return out


@needs_drivers("libtorch", "onednn", "kokkos")  # the quick start's study suite runs every CPU driver
class Readme(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_readme_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.commands = readme_commands()
        # The README shows at least the study, its summary and report, a run of its own and a
        # projection: a README that lost them would pass vacuously.
        joined = [" ".join(c) for c in self.commands]
        for needed in ("dlscale run", "dlscale-report summary results/study.h5", "dlscale-report report"):
            self.assertTrue(any(needed in c for c in joined), needed)

    def run_command(self, words):
        if words[0].endswith("dlscale-project") and not os.path.exists(words[0]):
            self.skipTest("dlscale-project not built (no SimGrid)")
        return subprocess.run(words, cwd=self.dir, capture_output=True, text=True, timeout=900)

    def test_two_ranks(self):
        for words in self.commands:
            command = localised(words, 2)
            proc = self.run_command(command)
            self.assertEqual(proc.returncode, 0, f"{' '.join(command)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            if os.path.basename(command[0]) == "dlscale-report":
                wide = [line for line in proc.stdout.splitlines() if len(line) > WIDTH]
                self.assertEqual(wide, [], " ".join(command))
        # The default study's scaling and diagnosis fit 120 columns too.
        study = os.path.join(self.dir, "results", "study.h5")
        for command in ("scaling", "diagnosis"):
            proc = self.run_command(localised(["results/dlscale-report", command, study], 2))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            wide = [line for line in proc.stdout.splitlines() if len(line) > WIDTH]
            self.assertEqual(wide, [], command)
        self.check_report(os.path.join(self.dir, "study-report", "index.html"))

    def check_report(self, index):
        """The study's report: the diagnosis table first, after few words, with its noise marks
        where the study measured a spread; rendered by Chromium where it is installed."""
        with open(index, encoding="utf-8") as f:
            page = f.read()
        first = page.index("<table")
        self.assertIn("<caption>scaling diagnosis", page[first:first + 200])
        self.assertLessEqual(len(re.sub(r"<[^>]+>", " ", page[page.index("<body>"):first]).split()), 250)
        table = page[first:page.index("</table>", first)]
        if "run-to-run spread" in page:
            self.assertIn(">~", table)
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            return
        shot = os.path.join(self.dir, "report.png")
        proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={os.path.join(self.dir, 'chromium')}", f"--screenshot={shot}",
                               "--window-size=1280,1600", f"file://{index}"],
                              capture_output=True, text=True, timeout=180)
        self.assertTrue(os.path.isfile(shot), proc.stderr[-2000:])
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_one_rank(self):
        for words in self.commands:
            if words[0] != "mpirun":
                continue  # the report and projection commands read what the 2-rank jobs write
            command = localised(words, 1)
            proc = self.run_command(command)
            if proc.returncode == 0:
                continue
            # A job too small for the command: one line, exit 2, how to launch it, nothing written.
            self.assertEqual(proc.returncode, 2, f"{' '.join(command)}:\n{proc.stderr[-3000:]}")
            errors = [line for line in proc.stderr.splitlines() if line.startswith("dlscale: error:")]
            self.assertEqual(len(errors), 1, proc.stderr)
            self.assertRegex(errors[0], r"`mpirun -np 2[ `]", errors[0])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "results", "study.h5")))


if __name__ == "__main__":
    unittest.main()
