"""The docs cannot drift from the code: every flag of `dlscale run`, every TOML key and every
attribute, dataset and software entry that a real run writes must have its line in
docs/running.md or docs/schema.md, and every flag and key documented must exist. A new flag,
key or attribute without its doc line fails here, naming it. Nor can they point past the
project: every file a doc links to, names in backquotes or cites as NAME.md must be in the
repository (DocPaths); every flag of a command line in their code blocks must be one its
program's --help lists (CommandLines).

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH (tests/README.md).
"""

import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

from dlscale_test import needs_drivers

SOURCE = os.environ["DLSCALE_SOURCE_DIR"]
DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")


def read(name):
    with open(os.path.join(SOURCE, "docs", name), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The text under a markdown heading, up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    lines, fenced = [], False
    for line in text[start + len(heading) + 1:].splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,%d} " % level, line):
            break
        lines.append(line)
    return "\n".join(lines)


def first_column_names(table_text, pattern=r"`([^`]+)`"):
    """Every backquoted name in the first cell of each row of the markdown tables in the text."""
    names = set()
    for line in table_text.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cell = line.replace("\\|", "/").split("|")[1]  # an escaped | inside a cell is not a column
        names.update(re.findall(pattern, cell))
    return names


def run_help():
    proc = subprocess.run([DLSCALE, "run", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {m for m in re.findall(r"(--[a-z][a-z0-9-]*)", proc.stdout)} - {"--help"}


class RunningMd(unittest.TestCase):
    def test_flag_table_is_exactly_the_cli(self):
        documented = set()
        for name in first_column_names(section(read("running.md"), "### Flags")):
            documented.update(re.findall(r"--[a-z][a-z0-9-]*", name))
        cli = run_help()
        self.assertEqual(cli - documented, set(), "flags of `dlscale run` missing from docs/running.md's table")
        self.assertEqual(documented - cli, set(), "flags in docs/running.md's table that `dlscale run` lacks")

    def test_toml_key_table_is_exactly_the_parser(self):
        tmp = tempfile.mkdtemp(prefix="dlscale_docs_")
        try:
            cfg = os.path.join(tmp, "probe.toml")
            with open(cfg, "w") as f:
                f.write('workload = "mnist_fnn"\nno_such_key = 1\n')
            proc = subprocess.run([DLSCALE, "run", "--config", cfg], capture_output=True, text=True, cwd=tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(proc.returncode, 2)
        known = re.search(r"\(known: ([^)]*)\)", proc.stderr)
        self.assertIsNotNone(known, proc.stderr)
        keys = {k.strip() for k in known.group(1).split(",")} - {"[[matrix]]"}
        table = section(read("running.md"), "### `--config`: TOML run matrices")
        documented = first_column_names(table) & ({k for k in first_column_names(table) if re.fullmatch(r"[a-z_]+", k)})
        self.assertEqual(keys - documented, set(), "TOML keys missing from docs/running.md's key table")
        self.assertEqual(documented - keys, set(), "TOML keys in docs/running.md that the parser rejects")

    def test_subcommands(self):
        proc = subprocess.run([DLSCALE, "--help"], capture_output=True, text=True)
        commands = set(re.findall(r"^  ([a-z]+)\s", proc.stdout.split("Subcommands:")[1], re.M))
        intro = read("running.md").split("\n## ")[0]
        for c in commands:
            self.assertIn(f"`{c}`", intro, f"subcommand {c} missing from docs/running.md's introduction")
        self.assertIn(f"{len(commands)} subcommands" if len(commands) > 4 else
                      ["", "one", "two", "three", "four"][len(commands)] + " subcommands", intro)


@needs_drivers("libtorch")  # the documented example's driver
class PrintedExample(unittest.TestCase):
    def test_what_is_printed_matches_a_real_run(self):
        block = section(read("running.md"), "### What is printed").split("```")[1].strip("\n").splitlines()
        command = next(line for line in block if line.startswith("# dlscale run "))[len("# dlscale run "):]
        tmp = tempfile.mkdtemp(prefix="dlscale_docs_")
        try:
            proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", *command.split(), "--out", "x.h5"],
                                  capture_output=True, text=True, cwd=tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)

        def shape(lines):
            # Numbers, and the instruction set after the precision, differ between machines; a
            # busy machine adds "| contended: …" and may lift a share above the peak, "(above it: …)".
            lines = [re.sub(r" \| contended: [^|]*(?= \|)", "", re.sub(r" \(above it: [^)]*\)", "", line)) for line in lines]
            return [re.sub(r"@\S+", "@ISA", re.sub(r"\d+(\.\d+)?(e[+-]\d+)?", "N", line)) for line in lines]

        self.assertEqual(shape(proc.stdout.splitlines()), shape(block))


@needs_drivers("onednn")
class SchemaMd(unittest.TestCase):
    """A 2-rank run with --phases and --bucket-mb writes nearly everything there is to write."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlscale_docs_")
        cls.out = os.path.join(cls.tmp, "all.h5")
        proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=16", "-d", "onednn",
                               "--batch", "4", "--warmup", "1", "--iterations", "2", "--phases",
                               "--bucket-mb", "0.01", "--out", cls.out], capture_output=True, text=True, cwd=cls.tmp)
        assert proc.returncode == 0, proc.stderr
        cls.schema = read("schema.md")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assert_documented(self, written, heading, what):
        documented = first_column_names(section(self.schema, heading))
        # Rows such as "attrs `alpha_s`" or "`a`, `b`" name several; keep bare names.
        documented = {re.sub(r"^attrs ", "", d) for d in documented}
        self.assertEqual(set(written) - documented, set(), f"{what} missing from docs/schema.md ({heading})")

    def test_root_attributes(self):
        with h5py.File(self.out, "r") as f:
            self.assert_documented(f.attrs.keys(), "### `/` (root attributes)", "root attributes")

    def test_rank_table_fields(self):
        with h5py.File(self.out, "r") as f:
            fields = f["system/ranks"].dtype.names
        self.assert_documented(fields, "### `/system/ranks` (table, one row per rank)", "/system/ranks fields")

    def test_software_entries(self):
        with h5py.File(self.out, "r") as f:
            keys = list(f["system/software"].attrs.keys())
        self.assert_documented(keys, "### `/system/software` (string attributes)", "/system/software entries")

    def test_case_attributes_datasets_and_summary(self):
        heading = "### `/cases/NNNN` (one group per case)"
        with h5py.File(self.out, "r") as f:
            case = f["cases/0000"]
            self.assert_documented(case.attrs.keys(), heading, "case attributes")
            self.assert_documented([k for k in case.keys() if k not in ("projection",)], heading, "case datasets")
            summary_text = section(self.schema, heading)
            listed = set(re.findall(r"`([a-z0-9_]+)`", summary_text.split("`summary` attributes")[1].split("\n\n")[0]))
            missing = set(case["summary"].attrs.keys()) - listed
            self.assertEqual(missing, set(), "summary attributes missing from docs/schema.md's list")
            self.assertIn("projection", case)
            projection_rows = first_column_names(summary_text.split("a `projection` group")[1])
            projection_rows = {re.sub(r"^attrs ", "", d) for d in projection_rows}
            names = set(case["projection"].attrs.keys()) | set(case["projection"].keys())
            self.assertEqual(names - projection_rows, set(), "projection entries missing from docs/schema.md")
            self.assertIn("timeline", case)
            timeline_rows = first_column_names(summary_text.split("a `timeline` group")[1])
            timeline_rows = {re.sub(r"^attrs ", "", d) for d in timeline_rows}
            names = set(case["timeline"].attrs.keys()) | set(case["timeline"].keys())
            self.assertEqual(names - timeline_rows, set(), "timeline entries missing from docs/schema.md")

    def test_allreduce_group(self):
        with h5py.File(self.out, "r") as f:
            group = f["allreduce"][sorted(f["allreduce"])[0]]
            names = set(group.attrs.keys()) | set(group.keys())
        self.assert_documented(names, "### `/allreduce/NNNN` (all-reduce microbenchmarks)", "all-reduce entries")


class DocPaths(unittest.TestCase):
    """Every relative link, backquoted repository path and cited NAME.md of the project's markdown
    files names something in the repository; a failure lists each one as DOC:LINE."""

    DOCS = ["README.md", *sorted(glob.glob("docs/*.md", root_dir=SOURCE)),
            *sorted(glob.glob("*/README.md", root_dir=SOURCE))]

    @classmethod
    def setUpClass(cls):
        # What the .gitignore files ignore is made by a build, a run or pip (build/, data/,
        # results/*.h5, results/*-report/, results/build/, ...): the docs may name it, but it is
        # not a repository path, so it is not checked. (folder, pattern) of each of their lines.
        cls.ignore = []
        for folder in ["", *sorted(os.listdir(SOURCE))]:
            path = os.path.join(SOURCE, folder, ".gitignore")
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    patterns = [line.strip() for line in f if line.strip() and not line.startswith("#")]
                assert not any(p.startswith("!") for p in patterns), f"{path}: a negation, which ignored() does not know"
                cls.ignore += [(folder, p) for p in patterns]
        # A backquoted path is a repository path when it starts with one of the repository's
        # top-level folders and a slash, or is a top-level file (`CMakeLists.txt`).
        cls.top = {n for n in os.listdir(SOURCE) if n != ".git" and not cls.ignored(n)}
        cls.anchors = {}

    @classmethod
    def ignored(cls, path):
        """Whether a .gitignore pattern matches the path or a folder above it, as git matches them:
        a pattern with a slash before its end is anchored at its .gitignore's folder, one without
        matches any single name along the path."""
        for folder, pattern in cls.ignore:
            if folder and not path.startswith(folder + "/"):
                continue
            parts = path[len(folder) + 1 if folder else 0:].strip("/").split("/")
            if "/" in pattern.rstrip("/"):
                if any(fnmatch.fnmatchcase("/".join(parts[:k]), pattern.strip("/")) for k in range(1, len(parts) + 1)):
                    return True
            elif any(fnmatch.fnmatchcase(part, pattern.rstrip("/")) for part in parts):
                return True
        return False

    @staticmethod
    def prose(doc):
        """The doc's text with its fenced code blocks blanked (their lines kept, so that offsets
        still give line numbers): what a code block shows is not a reference."""
        lines, fenced = [], False
        with open(os.path.join(SOURCE, doc), encoding="utf-8") as f:
            for line in f:
                fence = line.lstrip().startswith("```")
                lines.append("\n" if fenced or fence else line)
                fenced ^= fence
        return "".join(lines)

    def headings(self, doc):
        """GitHub's anchors of a markdown file's headings: lower case, punctuation but - and _
        dropped, spaces to -, a repeated one numbered."""
        if doc not in self.anchors:
            seen = {}
            for heading in re.findall(r"^#{1,6} (.+)$", self.prose(doc), re.M):
                slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
                seen[slug] = seen.get(slug, -1) + 1
                seen[f"{slug}-{seen[slug]}" if seen[slug] else slug] = 0
            self.anchors[doc] = set(seen)
        return self.anchors[doc]

    def problems(self, doc):
        """'DOC:LINE: PATH: why' for each path of the doc that names nothing in the repository."""
        text, here, found = self.prose(doc), os.path.dirname(doc), []
        # Relative links: the file part relative to the doc, the anchor among its headings.
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            linked = os.path.normpath(os.path.join(here, file)) if file else doc
            if not os.path.exists(os.path.join(SOURCE, linked)):
                found.append((m.start(), linked, f"link ({target}) to a file that does not exist"))
            elif anchor and linked.endswith(".md") and anchor not in self.headings(linked):
                found.append((m.start(), f"{linked}#{anchor}", f"link ({target}) to a heading that does not exist"))
        # Backquoted repository paths; of a command, its first word (`slurm/study --nodes 1,2`).
        # A placeholder (`tests/unit/test_<name>_driver.cpp`) names no file; a glob must match one.
        for m in re.finditer(r"`([^`]+)`", text):
            path = m.group(1).split()[0]
            if path.split("/")[0] not in self.top or ("/" not in path and path not in self.top):
                continue
            if not re.search(r"<[^>]+>", path) and not self.ignored(path) and not glob.glob(path, root_dir=SOURCE):
                found.append((m.start(), path, "backquoted path that does not exist"))
        # A NAME.md cited in the text, beside the doc or from the root: DESIGN.md, outside the
        # repository, was cited so. (Link targets are checked above.)
        for m in re.finditer(r"[\w./-]+\.md\b", re.sub(r"\]\([^)]*\)", lambda t: " " * len(t.group()), text)):
            if not any(os.path.isfile(os.path.join(SOURCE, where, m.group())) for where in (here, "")):
                found.append((m.start(), m.group(), "markdown file that is not in the repository"))
        # One line per path and doc line: a backquoted NAME.md is found by two of the rules.
        lines = {(text.count("\n", 0, at) + 1, path): why for at, path, why in sorted(found, reverse=True)}
        return [f"{doc}:{line}: {path}: {why}" for (line, path), why in sorted(lines.items())]

    def test_every_path_a_doc_names_exists(self):
        missing = [line for doc in self.DOCS for line in self.problems(doc)]
        if missing:
            self.fail("paths the docs name that are not in the repository:\n" + "\n".join(missing))


class CommandLines(unittest.TestCase):
    """Every command line in a code block of README.md and docs/ gives its program only flags that
    the program's --help lists: a renamed or removed flag cannot stay behind in an example."""

    TOOLS = {"dlscale": ("run", "allreduce", "peak", "list", "info"),
             "dlscale-report": ("summary", "check", "scaling", "threads", "batch", "phases", "ranks", "allreduce",
                                "diagnosis", "compare", "report"),
             "dlscale-project": ()}

    def help_flags(self, tool, sub):
        command = {"dlscale": [DLSCALE],
                   "dlscale-report": [sys.executable, os.path.join(SOURCE, "results", "dlscale-report")],
                   "dlscale-project": [os.path.join(os.path.dirname(DLSCALE), "dlscale-project")]}[tool]
        proc = subprocess.run(command + ([sub] if sub else []) + ["--help"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, f"{tool} {sub} --help: {proc.stderr}")
        return set(re.findall(r"(--[a-z][a-z0-9-]*)", proc.stdout))

    def command_lines(self):
        """(file, line, tool, subcommand, flags) of every command line in a fenced code block."""
        for path in [os.path.join(SOURCE, "README.md")] + sorted(glob.glob(os.path.join(SOURCE, "docs", "*.md"))):
            fenced = False
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("```"):
                        fenced = not fenced
                        continue
                    if not fenced:
                        continue
                    text = line.strip()
                    if text.startswith("# dlscale run "):  # a case key as dlscale prints it
                        text = text[2:]
                    text = re.split(r"\s(?:#|\||&&|;)\s|^#", text)[0]
                    words = [w.strip("[]()") for w in text.split()]
                    for i, word in enumerate(words):
                        tool = os.path.basename(word)
                        if tool not in self.TOOLS:
                            continue
                        subs = self.TOOLS[tool]
                        rest = words[i + 1:]
                        if subs:
                            if not rest or not all(s in subs for s in rest[0].split("|")):
                                break
                            chosen, rest = rest[0].split("|"), rest[1:]
                        else:
                            chosen = [""]
                        flags = {w.split("=")[0] for w in rest if re.match(r"--[a-z]", w)}
                        yield os.path.relpath(path, SOURCE), text, tool, chosen, flags
                        break

    def test_every_flag_in_a_documented_command_exists(self):
        project = os.path.join(os.path.dirname(DLSCALE), "dlscale-project")
        helps, unknown, seen = {}, [], 0
        for path, text, tool, subs, flags in self.command_lines():
            if tool == "dlscale-project" and not os.path.exists(project):
                continue  # built without SimGrid
            for sub in subs:
                if (tool, sub) not in helps:
                    helps[(tool, sub)] = self.help_flags(tool, sub) | (self.help_flags(tool, "") if sub else set())
                seen += 1
                unknown += [f"{path}: {text}: {tool} {sub} has no {flag}".replace("  ", " ")
                            for flag in sorted(flags - helps[(tool, sub)])]
        self.assertGreater(seen, 20, "the command lines were not found")
        self.assertEqual(unknown, [], "\n".join(unknown))


if __name__ == "__main__":
    unittest.main()
