"""Command line of dlscale-report.

  dlscale-report summary FILE... [--format text|csv|json]    one row per case (text: and
                                                             the scaling diagnosis)
  dlscale-report check FILE...                               recorded vs recomputed stats
  dlscale-report scaling FILE... [--mode weak|strong] [--format text|csv|json] [-o DIR]
  dlscale-report threads FILE... [--format text|csv|json] [-o DIR]    thread sweep
  dlscale-report batch FILE... [--format text|csv|json] [-o DIR]      batch sweep
  dlscale-report phases FILE... [--format text|csv|json] [-o DIR]     forward/backward/...
  dlscale-report ranks FILE... [--format text|csv|json] [-o DIR]      per-rank times, stragglers
  dlscale-report allreduce FILE... [--format text|csv|json] [-o DIR]  all-reduce bandwidth
  dlscale-report diagnosis FILE... [--format text|csv|json] [-o DIR]  why each series loses
                                                             efficiency, per part
  dlscale-report compare A B [--format text|csv|json]        B/A per matched case, U test
  dlscale-report report FILE... -o DIR [--compare-to A]      everything as DIR/index.html
  dlscale-report trace FILE [--case N] [-o DIR] [--per-rank] each --phases case's timeline as
                                                             Chrome trace JSON and OTF2
  dlscale-report --version                                   version and source commit

FILE... may come from several jobs: their cases form one study. -o DIR writes
the command's figures (PNG) and table (CSV) into DIR and names them on stderr,
so stdout stays the table alone. `report` prints the path of index.html.

Exit codes: 0 success, 1 `check` found inconsistencies, 2 unusable input
(missing/foreign/malformed/partial file, wrong schema, bad usage, a missing Python
module), always with one line `dlscale-report: error: ...` on stderr.

A damaged group of a file (a case group a full disk left half written, say)
is skipped: the other commands warn with one line per such file on stderr and
report the rest (exit 0); `check` exits 2 naming them. Whatever else goes wrong
ends with one line `dlscale-report: error: FILE: ...` and exit 2, never a traceback.
The command runs in a child process (main()), so that a crash inside HDF5 on a
damaged file (a flipped bit in its metadata) ends the same way, naming the file,
never as a dead process.

Only the standard library is imported before the command is known: --help and
--version work without h5py, and a missing module is named, not a traceback.
matplotlib and scipy are imported only once the input is read, by the commands
that draw or test, so a refused file costs no more than starting Python and h5py.
"""

import argparse
import importlib
import os
import signal
import sys

from ._version import version_line
from .views import COMMANDS, VIEW, Context

PROG = "dlscale-report"
FORMATS = ("text", "csv", "json")

# Debian 12 package of each third-party module (scripts/setup-deps.sh installs them all).
DEBIAN_PACKAGES = {"h5py": "python3-h5py", "numpy": "python3-numpy",
                   "matplotlib": "python3-matplotlib", "scipy": "python3-scipy"}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other error (subcommands inherit the class)."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """--version; the commit is looked up (git) only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version and the source commit, then exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(PROG))
        parser.exit(0)


def _parser():
    p = _Parser(prog=PROG, description="Report on dlscale benchmark results files.")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def files(s):
        s.add_argument("files", nargs="+", metavar="FILE",
                       help="dlscale results file (.h5); several files form one study")

    def fmt(s):
        s.add_argument("--format", choices=FORMATS, default="text",
                       help="aligned text table (default), or CSV or JSON (an array of row "
                            "objects) at full precision")
        s.add_argument("--wide", action="store_true",
                       help="text: every column and every line whole (default: within 120 "
                            "columns; what applies to every row said once, detail columns "
                            "left out and named)")

    def out(s):
        s.add_argument("-o", "--out", metavar="DIR",
                       help="also write the figures (PNG) and the table (CSV) into DIR")

    s = sub.add_parser("summary", help="print a table of every case")
    files(s)
    fmt(s)

    c = sub.add_parser("check", help="compare recorded summary statistics with a recomputation")
    files(c)

    s = sub.add_parser("scaling", help=VIEW["scaling"].help)
    files(s)
    s.add_argument("--mode", choices=("weak", "strong"),
                   help="scaling mode (default: every mode present)")
    fmt(s)
    out(s)

    for view in COMMANDS:
        if view.name == "scaling":
            continue
        s = sub.add_parser(view.name, help=view.help)
        files(s)
        fmt(s)
        out(s)

    s = sub.add_parser("compare", help="ratio B/A of two runs per matched case, Mann-Whitney U")
    s.add_argument("a", metavar="A", help="baseline results file")
    s.add_argument("b", metavar="B", help="results file compared with A")
    fmt(s)

    s = sub.add_parser("report", help="everything as one HTML page DIR/index.html")
    files(s)
    s.add_argument("-o", "--out", metavar="DIR", required=True, help="output directory")
    s.add_argument("--compare-to", metavar="A", nargs="+",
                   help="baseline file(s): add a comparison of FILE... (B) with them (A)")
    s.add_argument("--title", help="page title (default: dlscale report)")

    s = sub.add_parser("trace", help="each --phases case's timeline as Chrome trace JSON (Perfetto) "
                                     "and OTF2 (Vampir)")
    s.add_argument("file", metavar="FILE", help="dlscale results file (.h5)")
    s.add_argument("--case", metavar="N", help="only this case (its group, 0003, or index, 3)")
    s.add_argument("-o", "--out", metavar="DIR",
                   help="output directory (default: FILE without .h5, plus -trace)")
    s.add_argument("--per-rank", action="store_true",
                   help="also one JSON file per rank, with its own distributedInfo (what Holistic "
                        "Trace Analysis reads)")
    return p


def _error(message):
    # Exactly one line, whatever h5py put into the exception text.
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def _needed_modules(args):
    """Third-party modules every command imports to read its input: (module, what for) pairs."""
    return [("h5py", None), ("numpy", None)]


def _plots_missing(args):
    """The missing-module line when the command draws figures and matplotlib is absent, else
    None; asked once the input is read (importing matplotlib takes most of a second)."""
    if args.command == "report" or getattr(args, "out", None):
        return _missing_modules([("matplotlib", "for the figures of -o DIR and report")])
    return None


# The warnings of the command being run (_warn_damaged), printed by run() once the command has done
# its work; one that then fails ends with its one error line, the warnings folded into it.
_warnings = []


def _warn_damaged(files):
    """One line per file that has damaged groups: they are left out, the rest is reported."""
    from .schema import describe_damaged
    for f in files:
        if f.damaged:
            _warnings.append(f"{f.path}: damaged, skipped: {describe_damaged(f.damaged)}; "
                             f"{len(f.cases) + len(f.accuracy)} case(s) read")


def _failed(message):
    """The one error line of a command that failed, naming the damaged groups it skipped, if any."""
    return _error(f"{message} ({'; '.join(_warnings)})" if _warnings else message)


def _inputs(args):
    """The files a command was given, for a message about an error of unknown origin."""
    files = list(getattr(args, "files", None) or []) + list(getattr(args, "compare_to", None) or []) + (
        [args.file] if getattr(args, "file", None) else [])
    if args.command == "compare":
        files = [args.a, args.b]
    return ", ".join(files)


def _missing_modules(needed):
    """One line naming the modules that cannot be imported and how to get them, or None."""
    missing, why = [], []
    for name, purpose in needed:
        try:
            importlib.import_module(name)
        except Exception as e:     # noqa: BLE001  (a broken install fails in many ways)
            missing.append(name)
            if not isinstance(e, ImportError) or getattr(e, "name", None) not in (None, name):
                why.append(f"{name} is there but fails to import: {e}")
            elif purpose:
                why.append(f"{name} {purpose}")
    if not missing:
        return None
    packages = " ".join(DEBIAN_PACKAGES.get(m, m) for m in missing)
    debian = "/usr/bin/python3"
    other = os.path.realpath(sys.executable) != os.path.realpath(debian)
    return (f"missing Python module(s) {', '.join(missing)}"
            + (f" ({'; '.join(why)})" if why else "")
            + f" in {sys.executable}: install {packages} (Debian 12, as scripts/setup-deps.sh "
            + "does)" + (f" and run with {debian}" if other else "")
            + f", or pip install {' '.join(missing)} into this Python")


def _emit(args, sections, outdir=None):
    """Print the sections' tables; with -o also write their CSV (one file, the columns once) and
    figures there."""
    tables = [t for s in sections for t, _ in s.tables]
    if args.format == "csv":
        text = tables[0].csv()
        for t in tables[1:]:                   # same columns: one CSV, header once
            text += t.csv().split("\n", 1)[1]
    elif args.format == "json":
        from .tables import json_text
        text = json_text([row for t in tables for row in t.json_rows()])
    else:
        text = "\n".join(t.text(_width(args)) for t in tables)
    sys.stdout.write(text)
    if outdir:
        name = os.path.join(outdir, f"{args.command}.csv")
        with open(name, "w") as f:
            f.write(tables[0].csv() + "".join(t.csv().split("\n", 1)[1] for t in tables[1:]))
        figures = [p for s in sections if s.figures for p, _ in s.figures(outdir)]
        for path in [name] + figures:
            print(f"{PROG}: wrote {path}", file=sys.stderr)


def _width(args):
    """The text output's width: None (no limit) with --wide."""
    from .tables import WIDTH
    return None if getattr(args, "wide", False) else WIDTH


def _outdir(args):
    from .schema import ReportError
    if getattr(args, "out", None):
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            raise ReportError(f"{args.out}: cannot create output directory ({e.strerror})") from e
        return args.out
    return None


def _run(args):
    from .check import check_case
    from .schema import ReportError, describe_damaged, load_results
    from .study import load_study

    if args.command == "check":
        files = [load_results(path) for path in args.files]
        problems = [line for f in files for case in f.cases for line in check_case(case)]
        for line in problems:
            print(line)
        damaged = [f for f in files if f.damaged]
        if damaged:
            # Unusable input, as for a refused file: exit 2 with one line that names every
            # damaged group (check_file() lists them one by one, for scripts).
            return _error("; ".join(f"{f.path}: damaged, not checked: {describe_damaged(f.damaged)}"
                                    for f in damaged))
        if not problems:
            print(f"{len(args.files)} file(s) consistent")
        return 1 if problems else 0
    if args.command == "trace":
        return _trace(args)
    if args.command == "compare":
        a, b = load_study([args.a]), load_study([args.b])
        _warn_damaged(a.files + b.files)
        _emit(args, VIEW["compare"].sections(b, Context(baseline=a)))
        return 0

    # Every other command reads FILE... as one study, once.
    study = load_study(args.files)
    baseline = load_study(args.compare_to) if args.command == "report" and args.compare_to else None
    _warn_damaged(study.files + (baseline.files if baseline else []))
    missing = _plots_missing(args)
    if missing:
        raise ReportError(missing)
    if args.command == "summary":
        sys.stdout.write(_summary_text(args, study))
        return 0
    if args.command == "report":
        from .report import write_report
        print(write_report(study, _outdir(args), baseline=baseline, title=args.title))
        return 0
    if args.command not in VIEW:                # pragma: no cover - argparse restricts it
        raise ReportError(f"unknown command {args.command}")
    context = Context(several=len(study.files) > 1, mode=getattr(args, "mode", None))
    _emit(args, VIEW[args.command].sections(study, context), _outdir(args))
    return 0


def _summary_text(args, study):
    """summary's text: the cases, the runs, the scaling diagnosis, the simulations and the accuracy
    cases; --format csv or json: the cases' rows only."""
    from .summary import case_row, format_csv, format_json, format_table, runs_text
    rows = [case_row(c) for c in study.cases]
    if args.format == "csv":
        return format_csv(rows)
    if args.format == "json":
        return format_json(rows)
    from .noise import measure_noise
    from .simulation import simulation_sentence, simulation_views
    from .tables import wrap
    width = _width(args)
    noise = measure_noise(study.cases)
    text = format_table(rows, len(args.files) > 1, width) if rows or not study.accuracy else ""
    if noise.repeats:
        text += "\n" + "\n".join(wrap(noise.summary(), width, "  ")) + "\n"
    text += runs_text(study.files, width)
    # Why each scaling series scales as it does: the lost efficiency by part (the spread is said
    # above).
    from .diagnosis import diagnose, diagnosis_notes, study_diagnosis_table
    diagnoses = diagnose(study.cases)
    table = study_diagnosis_table(diagnoses, noise, spread_note=False)
    if table.rows:
        text += "\n" + table.text(width)
    elif diagnoses:
        # No series to diagnose: only why not, one line each.
        text += "\nscaling diagnosis: none\n" + "".join(
            line + "\n" for note in diagnosis_notes(diagnoses) for line in wrap(f"note: {note}", width, "  "))
    # What dlscale-project simulated from the cases, against what was measured.
    views = simulation_views(study.cases, len(args.files) > 1)
    if views:
        text += "\nsimulated projections (dlscale-project; the newest per case and platform; docs/projection.md):\n"
        for v in views:
            text += "\n".join(wrap(f"  {simulation_sentence(v)}", width, "    ")) + "\n"
    # Accuracy-mode cases have no step times: their own tables follow, then time to target at
    # scale and the gradient noise scale of every case that has one.
    for section in VIEW["accuracy"].sections(study, Context()):
        if section.shown:
            text += "\n" + "\n".join(t.text(width) for t, _ in section.tables if t.rows)
    return text


def _trace(args):
    from .schema import ReportError, case_name
    from .study import load_study
    from .timeline import has_timeline
    from .trace import write_case_traces
    study = load_study([args.file])
    _warn_damaged(study.files)
    cases = study.cases
    if args.case is not None:
        wanted = case_name(int(args.case) if args.case.isdigit() and len(args.case) < 4 else args.case)
        cases = [c for c in cases if c.name == wanted]
        if not cases:
            raise ReportError(f"{args.file}: no timing case {wanted} (cases: "
                              f"{', '.join(c.name for c in study.cases) or 'none'})")
        if not has_timeline(cases[0]):
            raise ReportError(f"{args.file}: case {wanted} has no timeline: only cases that trained with "
                              "--phases record one")
    cases = [c for c in cases if has_timeline(c)]
    if not cases:
        raise ReportError(f"{args.file}: no case has a timeline: only cases that trained with --phases "
                          "record one")
    outdir = args.out or (os.path.splitext(args.file)[0] + "-trace")
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        raise ReportError(f"{outdir}: cannot create output directory ({e.strerror})") from e
    notes = set()
    for case in cases:
        hosts = study.case_hosts(case)
        backend = "nccl" if case.attrs.get("device_type") == "cuda" else "mpi"
        paths, case_notes = write_case_traces(case, hosts, backend, outdir, args.per_rank)
        for path in paths:
            print(path)
        notes.update(case_notes)
    for note in sorted(notes):
        print(f"{PROG}: note: {note}", file=sys.stderr)
    return 0


def run(argv=None, reading=None):
    """The command line in this process: what main() runs in its child; tests call it in
    process. reading: schema.reading's hook, set once the modules it needs are known to be there."""
    args = _parser().parse_args(argv)   # usage errors exit 2 via argparse; --version exits 0
    missing = _missing_modules(_needed_modules(args))
    if missing:
        return _error(missing)
    from . import schema
    from .schema import ReportError
    import numpy as np
    schema.reading = reading
    _warnings.clear()
    try:
        # IEEE arithmetic: a zero time or a huge one gives inf or NaN in the tables (and the
        # figures), never numpy's RuntimeWarning lines on stderr.
        with np.errstate(all="ignore"):
            code = _run(args)
    except ReportError as e:
        return _failed(e)
    except BrokenPipeError:
        # `dlscale-report ... | head`: the reader left; not an error of ours. Point stdout
        # at /dev/null so that the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except OSError as e:
        # Reading errors became ReportError in schema.py; this is writing -o DIR.
        return _failed(f"cannot write output: {e}")
    except Exception as e:     # noqa: BLE001  (the last resort: one line, never a traceback)
        # schema.py turns what h5py raises for a damaged file into ReportError or a skipped
        # group; anything that still gets here is unexpected, from one of the inputs.
        return _failed(f"{_inputs(args)}: unexpected {type(e).__name__} "
                       f"({' '.join(str(e).split()) or 'no message'}); please report it with the file")
    for line in _warnings:
        print(f"{PROG}: warning: {line}", file=sys.stderr)
    return code


# What a library dies of inside the process: HDF5 1.10 on some damaged files (a bit flipped in
# its metadata) reads through a wild pointer.
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL)

# How long the reading of one group of a file may go without finishing before the HDF5 library is
# taken to be stuck: on some damaged files (a bit flipped in the size of a global heap object that
# holds a string) it loops forever inside one call. A group reads in well under a second; a very
# slow file system may need more (DLSCALE_REPORT_STALL_S, seconds).
STALL_S_DEFAULT = 120.0


def _stall_seconds():
    """DLSCALE_REPORT_STALL_S as a number of seconds > 0, or None after printing why not."""
    text = os.environ.get("DLSCALE_REPORT_STALL_S", "")
    if not text:
        return STALL_S_DEFAULT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        _error(f"DLSCALE_REPORT_STALL_S {text!r}: not a number of seconds > 0")
        return None
    return value


def main(argv=None):
    """The dlscale-report process (script, python -m, pip's entry point): the command runs in a
    child process, which names each file as it starts reading it, again as it reads each group
    and "" once done (schema.reading), so that a crash inside HDF5, or HDF5 stuck in one group
    for DLSCALE_REPORT_STALL_S, ends as one line naming the file and exit 2, never a dead or
    hung process. The child's stderr passes through this process, which drops it after a crash:
    what the C libraries print as they die ("free(): invalid pointer") says nothing the line
    does not."""
    stall_s = _stall_seconds()
    if stall_s is None:
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    notes_in, notes_out = os.pipe()
    err_in, err_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(notes_in)
        os.close(err_in)
        os.dup2(err_out, 2)
        os.close(err_out)
        # h5py cannot release some identifiers of a damaged file and says so from its finaliser,
        # a traceback per object ("Exception ignored in ... __dealloc__"): the file is named as
        # damaged in one line already, and the traceback is nothing a user can act on.
        sys.unraisablehook = lambda unraisable: None
        code = 130                      # unless run() returns: Ctrl-C, as a shell reports it
        try:
            code = run(argv, reading=lambda path: os.write(notes_out, f"{path or ''}\n".encode()))
        except SystemExit as e:         # argparse: usage, --version
            code = e.code if isinstance(e.code, int) else 2
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (BrokenPipeError, OSError):
                    pass
            os._exit(code)
    os.close(notes_out)
    os.close(err_out)
    # Ctrl-C reaches the child too, which ends the command; this process only waits.
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    notes, err, stalled = _watch(pid, notes_in, err_in, stall_s)
    _, status = os.waitpid(pid, 0)
    signal.signal(signal.SIGINT, interrupt)
    if stalled:
        return _error(f"{stalled}: the HDF5 library made no progress reading it for {stall_s:g} s: the file is "
                      "damaged")
    if os.WIFEXITED(status):
        if err:
            os.write(2, err)
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    if sig not in CRASH_SIGNALS:
        # Killed from outside (SIGTERM, SIGKILL): end the same way.
        if err:
            os.write(2, err)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    name = signal.Signals(sig).name
    lines = notes.decode(errors="replace").split("\n")[:-1]
    if lines and lines[-1]:
        return _error(f"{lines[-1]}: the HDF5 library crashed reading it ({name}): the file is damaged")
    return _error(f"crashed ({name}) after reading its input; please report it with the command line")


def _watch(pid, notes_fd, err_fd, stall_s):
    """Everything the child writes to its notes and stderr pipes until it closes them, as bytes
    each, and the file it was reading when it went `stall_s` without a note while reading one
    (then killed), else None. Only reading is timed: the commands' own work takes what it takes."""
    import selectors
    import time
    data = {notes_fd: bytearray(), err_fd: bytearray()}
    last_note, stalled = time.monotonic(), None
    with selectors.DefaultSelector() as sel:
        for fd in data:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            lines = data[notes_fd].decode(errors="replace").split("\n")[:-1]
            reading = lines[-1] if lines else ""
            timeout = None if not reading or stalled else max(0.0, last_note + stall_s - time.monotonic())
            ready = sel.select(timeout)
            if not ready and reading and not stalled:
                stalled = reading
                os.kill(pid, signal.SIGKILL)
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    data[key.fd] += chunk
                    if key.fd == notes_fd:
                        last_note = time.monotonic()
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    return bytes(data[notes_fd]), bytes(data[err_fd]), stalled


if __name__ == "__main__":
    sys.exit(main())
