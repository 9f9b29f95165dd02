"""Damaged results files in dlscale_report's reader (schema.py) and command line (cli.py).

Run: /usr/bin/python3 -m unittest discover -s tests/python

A group of /cases, /allreduce or /peak that cannot be read, or lacks what such a group has, is
skipped and named (ResultsFile.damaged); the root, /system/ranks and the lists of groups are the
file's, and their damage refuses it (ReportError). Groups are damaged here by overwriting their
object header in place, as a file system or a writer could, or by giving them wrong contents;
the file a full disk leaves is made by an in-place writer whose file size is limited with
RLIMIT_FSIZE, which fails its writes as a full disk does (EFBIG for ENOSPC) without root.
tests/e2e/test_damaged_files.py runs every command on real files.
"""

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import h5py
import numpy as np

from test_report import make_case, write_results

import dlscale_report as dr  # noqa: E402  (test_report put results/ on sys.path)
from dlscale_report import cli, schema  # noqa: E402


def three_cases():
    rng = np.random.default_rng(3)
    return [make_case(0.01 + 0.001 * rng.random((2, 5)), workload=w) for w in ("a", "b", "c")]


def clobber(path, obj):
    """Overwrite the first bytes of object `obj`'s header in the file with 0xff: HDF5 cannot read
    it any more (a bad version number or checksum), whatever else the group holds."""
    with h5py.File(path, "r") as f:
        addr = h5py.h5o.get_info(f[obj].id).addr
    with open(path, "r+b") as f:
        f.seek(addr)
        f.write(b"\xff" * 16)


# An in-place writer on a full disk: it appends copies of case 0000, flushing after each, until a
# write past `limit` bytes fails; then it stops dead (os._exit), as a job killed at the error.
FULL_DISK_WRITER = r'''
import os, resource, signal, sys, h5py
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # EFBIG instead of the signal
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
f = h5py.File(sys.argv[1], "r+")
def clone(src, dst):
    for key, value in src.attrs.items():
        dst.attrs[key] = value
    for key, obj in src.items():
        if isinstance(obj, h5py.Dataset):
            dst.create_dataset(key, data=obj[()])
        else:
            clone(obj, dst.create_group(key, track_order=sys.argv[3] == "1"))
n = len(f["cases"])
try:
    while True:
        clone(f["cases/0000"], f.create_group("cases/%04d" % n, track_order=sys.argv[3] == "1"))
        f.flush()
        n += 1
except Exception:
    os._exit(0)
'''


class Files(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "run.h5")
        write_results(self.path, three_cases())

    def tearDown(self):
        self.tmp.cleanup()

    def edit(self, edit):
        with h5py.File(self.path, "r+") as f:
            edit(f)


# clobber() needs an object's address; h5py gives it with HDF5 1.10 (1.12 names objects by tokens).
@unittest.skipUnless(hasattr(h5py.h5o.ObjInfo, "addr"), "h5py gives no object addresses")
class UnreadableGroupTest(Files):
    def test_an_unreadable_case_is_skipped_and_named(self):
        clobber(self.path, "cases/0001")
        r = dr.load_results(self.path)
        self.assertEqual([c.name for c in r.cases], ["0000", "0002"])
        self.assertEqual([(d.kind, d.name) for d in r.damaged], [("case", "0001")])
        self.assertTrue(r.damaged[0].reason.startswith("unreadable: "), r.damaged[0].reason)
        self.assertNotIn("\n", r.damaged[0].reason)
        # check_file lists it among its problems, so a script does not take the file for sound.
        problems = dr.check_file(self.path)
        self.assertEqual(len(problems), 1)
        self.assertTrue(problems[0].startswith(f"{self.path}: case 0001: damaged, not read (unreadable: "),
                        problems[0])
        # Asked for by name, a damaged case is an error; an intact one still loads.
        with self.assertRaisesRegex(dr.ReportError, r"case 0001: unreadable: "):
            dr.load_case(self.path, 1)
        self.assertEqual(dr.load_case(self.path, "0002").name, "0002")

    def test_unreadable_root_parts_refuse_the_file(self):
        # /system/ranks and the list of cases belong to the whole file: no case can be trusted.
        for obj in ("system/ranks", "cases"):
            with self.subTest(obj=obj):
                write_results(self.path, three_cases())
                clobber(self.path, obj)
                with self.assertRaisesRegex(dr.ReportError, f"^{self.path}: malformed results file \\("):
                    dr.load_results(self.path)

    def test_unreadable_allreduce_and_peak_groups(self):
        allreduce = dict(attrs={"backend": "mpi", "ranks": np.int64(2)}, bytes=np.array([8, 16]),
                         time_s=np.zeros((2, 2, 3)), algbw_gbps=np.zeros(2), busbw_gbps=np.zeros(2),
                         errors=np.zeros(2, dtype=np.int64))
        write_results(self.path, three_cases(), allreduce=[allreduce, allreduce])
        self.edit(lambda f: f.create_group("peak/0000").create_dataset("rates", data=np.zeros(2)))
        clobber(self.path, "allreduce/0000")
        clobber(self.path, "peak/0000")
        r = dr.load_results(self.path)
        self.assertEqual([b.name for b in r.allreduce], ["0001"])
        self.assertEqual((len(r.cases), r.peaks), (3, []))
        self.assertEqual([(d.kind, d.name) for d in r.damaged], [("allreduce", "0000"), ("peak", "0000")])


class IncompleteGroupTest(Files):
    def test_each_case_is_judged_on_its_own(self):
        def edit(f):
            del f["cases/0000/loss"]
            f["cases/0001"].attrs["ranks"] = "two"
        self.edit(edit)
        r = dr.load_results(self.path)
        self.assertEqual([c.name for c in r.cases], ["0002"])
        self.assertEqual([str(d) for d in r.damaged], ["case 0000 (lacks loss)",
                                                       "case 0001 (attribute 'ranks' is str 'two', not int)"])
        self.assertEqual(schema.describe_damaged(r.damaged),
                         "case 0000 (lacks loss); case 0001 (attribute 'ranks' is str 'two', not int)")

    def test_one_reason_names_its_groups_once(self):
        damaged = [schema.DamagedGroup("case", n, "lacks loss") for n in ("0003", "0004")]
        damaged.append(schema.DamagedGroup("allreduce", "0000", "lacks dataset(s) time_s"))
        self.assertEqual(schema.describe_damaged(damaged),
                         "case 0003, case 0004 (lacks loss); allreduce 0000 (lacks dataset(s) time_s)")

    def test_a_case_that_is_no_group(self):
        self.edit(lambda f: (f.__delitem__("cases/0002"), f.__setitem__("cases/0002", np.zeros(2))))
        r = dr.load_results(self.path)
        self.assertEqual([str(d) for d in r.damaged], ["case 0002 (not a group)"])
        self.assertEqual(len(r.cases), 2)

    def test_the_files_own_parts_still_refuse_it(self):
        self.edit(lambda f: f.__delitem__("system/ranks"))
        with self.assertRaisesRegex(dr.ReportError, "no /system/ranks table"):
            dr.load_results(self.path)
        write_results(self.path, three_cases())
        self.edit(lambda f: (f.__delitem__("cases"), f.__setitem__("cases", np.zeros(2))))
        with self.assertRaisesRegex(dr.ReportError, "/cases is not a group"):
            dr.load_results(self.path)


class MemberListTest(Files):
    def test_numbered_groups_are_looked_up_never_iterated(self):
        # Iterating over the links of a group a full disk left half written can crash HDF5 1.10
        # (SIGSEGV); dlscale's numbered groups are found by name instead.
        def refuse(*args):
            raise AssertionError("a group was iterated over")
        with mock.patch.object(h5py.Group, "__iter__", refuse), mock.patch.object(h5py.Group, "keys", refuse):
            r = dr.load_results(self.path)
        self.assertEqual([c.name for c in r.cases], ["0000", "0001", "0002"])

    def test_groups_numbered_otherwise_are_listed(self):
        # A file another tool wrote: names that are no count from 0000 are listed by iterating.
        self.edit(lambda f: (f.move("cases/0001", "cases/0005"), f.move("cases/0002", "cases/extra")))
        r = dr.load_results(self.path)
        self.assertEqual([c.name for c in r.cases], ["0000", "0005", "extra"])
        self.assertEqual(r.damaged, [])


class FullDiskTest(unittest.TestCase):
    """The reported failure: an in-place writer on a full disk leaves its last case group pointing
    past the end of the file; h5py raises for that group (e.g. RuntimeError "Error iterating over
    attributes (addr overflow ...)"), and before this change every command printed a traceback."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def fill(self, limit, track_order):
        """A three-case file, then the in-place writer until the file would pass size + limit."""
        path = os.path.join(self.tmp.name, f"full_{limit}_{int(track_order)}.h5")
        config = h5py.get_config()
        saved, config.track_order = config.track_order, track_order
        try:
            write_results(path, three_cases())
        finally:
            config.track_order = saved
        size = os.path.getsize(path) + limit
        subprocess.run([sys.executable, "-c", FULL_DISK_WRITER, path, str(size), str(int(track_order))],
                       check=True, timeout=600)
        return path

    def test_intact_cases_are_read_and_the_damaged_named(self):
        # Both layouts: h5py's default (symbol-table groups, as older writers made) and groups that
        # track creation order (as dlscale makes them). Which groups break depends on where the
        # disk ran out: the new case's header, or the index of /cases itself, which loses every
        # case. Every outcome must be a clean one, and no case may be lost without being named.
        outcomes = []
        for track_order in (False, True):
            for limit in (3000, 10000, 20000, 50000):
                with self.subTest(track_order=track_order, limit=limit):
                    path = self.fill(limit, track_order)
                    try:
                        r = dr.load_results(path)
                    except dr.ReportError as e:
                        self.assertTrue(str(e).startswith(f"{path}: "), e)
                        outcomes.append("refused")
                        continue
                    names = sorted([c.name for c in r.cases] + [d.name for d in r.damaged])
                    self.assertEqual(names, [f"{i:04d}" for i in range(len(names))])
                    self.assertGreater(len(names), 3)     # the writer added cases before the disk filled
                    self.assertTrue(all(d.kind == "case" and d.reason.startswith("unreadable")
                                        for d in r.damaged), r.damaged)
                    outcomes.append((len(r.cases), len(r.damaged)))
        # The reported failure, handled: the cases before it read, the broken one(s) named.
        self.assertTrue(any(o != "refused" and o[0] >= 3 and o[1] >= 1 for o in outcomes), outcomes)


class CommandLineTest(Files):
    """Exit codes and stderr of the commands, in process (tests/e2e runs them as processes)."""

    def main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.run(list(argv))
        return code, out.getvalue(), err.getvalue()

    def test_damaged_case_warns_and_check_fails(self):
        self.edit(lambda f: f.__delitem__("cases/0001/iter_time_s"))
        code, out, err = self.main("summary", "--format", "csv", self.path)
        self.assertEqual(code, 0)
        self.assertEqual(err, f"dlscale-report: warning: {self.path}: damaged, skipped: case 0001 "
                              "(lacks iter_time_s); 2 case(s) read\n")
        self.assertEqual([line.split(",")[1] for line in out.splitlines()[1:]], ["0000", "0002"])
        code, out, err = self.main("check", self.path)
        self.assertEqual(code, 2)
        self.assertEqual(out, "")                 # the intact cases are consistent
        self.assertEqual(err, f"dlscale-report: error: {self.path}: damaged, not checked: case 0001 "
                              "(lacks iter_time_s)\n")

    def test_an_unexpected_error_is_one_line(self):
        # The last resort: a bug (here a made-up one) is named in one line, never a traceback.
        with mock.patch("dlscale_report.study.load_results", side_effect=ZeroDivisionError("boom")):
            code, out, err = self.main("scaling", self.path)
        self.assertEqual(code, 2)
        self.assertEqual(err, f"dlscale-report: error: {self.path}: unexpected ZeroDivisionError (boom); "
                              "please report it with the file\n")


if __name__ == "__main__":
    unittest.main()
