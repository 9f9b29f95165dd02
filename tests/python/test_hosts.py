"""Ranks across hosts (issue 32): placement and hosts in every table of dlscale-report.

Run: /usr/bin/python3 -m unittest discover -s tests/python

The files hold four world ranks on two hosts (ranks 0, 1 on nodeA, 2, 3 on nodeB), a weak
scaling series placed packed (P=1, 2 on one host, P=4 on two) and one placed spread (P=2 and 4
on two hosts), each with phases, as the writer of issue 32 records them: case attributes
placement and hosts, participants in case-rank order, /allreduce hosts and network, and a
projection with the within- and between-host fits. Old-style files lack those attributes.
"""

import os
import shutil
import tempfile
import unittest

import numpy as np

from test_analysis import read_csv, run
from test_report import make_case, table_lines, write_results

import dlscale_report as dr  # noqa: E402  (test_report put results/ on sys.path)
from dlscale_report.diagnosis import diagnose, diagnosis_lines, diagnosis_rows  # noqa: E402
from dlscale_report.scaling import scaling_table  # noqa: E402
from dlscale_report.summary import case_row, format_table, summary_table  # noqa: E402

HOSTS = ["nodeA", "nodeA", "nodeB", "nodeB"]
NOTE = ("P <= 2: within-host fit (2 ranks on 1 host); "
        "P > 2: between-host fit (4 ranks on 2 hosts)")


def constant(ranks, seconds, n=7):
    """iter_time_s of `ranks` ranks, every step `seconds` (exact medians)."""
    return np.full((ranks, n), seconds)


def case(ranks, seconds, placement=None, hosts=None, participants=None, projection=None, **kw):
    extra = {}
    if placement is not None:
        extra["placement"] = placement
    if hosts is not None:
        extra["hosts"] = np.int64(hosts)
    if participants is not None:
        extra["participants"] = participants
    return make_case(constant(ranks, seconds), phases=True, projection=projection, extra_attrs=extra, **kw)


PROJECTION = dict(
    attrs={"model": "ring", "alpha_s": 2e-6, "beta_s_per_byte": 1e-9, "fit_ranks": np.int64(4),
           "compute_s": 0.009, "grad_bytes": 4000.0, "scaling": "weak", "hosts": np.int64(2),
           "ranks_per_host": np.int64(2), "within_alpha_s": 1e-6, "within_beta_s_per_byte": 5e-10,
           "between_alpha_s": 2e-6, "between_beta_s_per_byte": 1e-9, "network_note": NOTE},
    ranks=[1, 2, 3, 4, 8], step_s=[0.010, 0.0105, 0.013, 0.014, 0.016],
    efficiency=[1.0, 0.95, 0.77, 0.71, 0.62], between_hosts=[0, 0, 1, 1, 1])


def packed(projection=None):
    """Packed: P=1 and 2 on nodeA, P=4 on both hosts; efficiency 0.95 at P=2, 0.71 at P=4."""
    return [case(1, 0.010, "packed", 1, "0"), case(2, 0.0105, "packed", 1, "0-1"),
            case(4, 0.014, "packed", 2, "0-3", projection=projection)]


def spread():
    """Spread: P=1 on nodeA, P=2 on both hosts (world ranks 0, 2), P=4 on both."""
    return [case(1, 0.010, "spread", 1, "0"), case(2, 0.013, "spread", 2, "0,2"),
            case(4, 0.014, "spread", 2, "0,2,1,3")]


ALLREDUCE = dict(bytes=np.array([1024, 4096], dtype=np.int64),
                 time_s=np.full((4, 2, 3), 1e-4), algbw_gbps=np.array([0.01, 0.04]),
                 busbw_gbps=np.array([0.015, 0.06]), errors=np.array([0, 0], dtype=np.int64))


class HostsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_hosts_test_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, cases, hosts=HOSTS, **kw):
        path = self.path(name)
        write_results(path, cases, schema="dlscale/4", hosts=hosts, **kw)
        return path

    # ------------------------------------------------------------ reading

    def test_recorded_placement_and_hosts(self):
        f = dr.load_results(self.write("new.h5", packed() + spread()))
        self.assertEqual([(c.get("ranks"), c.hosts, c.placement) for c in f.cases],
                         [(1, 1, "packed"), (2, 1, "packed"), (4, 2, "packed"),
                          (1, 1, "spread"), (2, 2, "spread"), (4, 2, "spread")])

    def test_old_file_is_packed_with_hosts_from_the_rank_table(self):
        # No placement or hosts attributes: packed, and the hosts of participants 0..P-1 (or as
        # listed) in /system/ranks.
        old = [case(1, 0.010), case(2, 0.0105), case(4, 0.014, participants="0-3"),
               case(2, 0.013, participants="0,2")]
        f = dr.load_results(self.write("old.h5", old))
        self.assertEqual([(c.hosts, c.placement) for c in f.cases],
                         [(1, "packed"), (1, "packed"), (2, "packed"), (2, "packed")])
        # On one host (the default rank table: every rank on node0) every case is on 1 host.
        f = dr.load_results(self.write("one.h5", old, hosts=None))
        self.assertEqual({(c.hosts, c.placement) for c in f.cases}, {(1, "packed")})

    def test_old_single_host_summary_keeps_its_columns(self):
        path = self.write("one.h5", [case(1, 0.010), case(2, 0.0105)], hosts=None)
        rows = [case_row(c) for c in dr.load_study([path]).cases]
        text = format_table(rows)
        header = table_lines(text)[0].split()
        self.assertNotIn("hosts", text)
        self.assertNotIn("placement", text)
        self.assertEqual(header[:2], ["case", "P"])
        # What both cases share is said once above the table.
        self.assertIn("every row: workload mlp, driver native,", text)
        # The CSV always has them: 1 host, packed.
        out = run("summary", path, "--format", "csv")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual({(r["hosts"], r["placement"]) for r in read_csv(out.stdout)}, {("1", "packed")})
        # Nor does the diagnosis name hosts.
        lines = diagnosis_lines(diagnose(dr.load_study([path]).cases))
        self.assertEqual(len(lines), 1)
        self.assertIn(": at P=2, efficiency 0.95: ", lines[0])
        self.assertNotIn("host", lines[0])

    # ------------------------------------------------------------ summary

    def test_summary_text_and_csv(self):
        path = self.write("new.h5", packed() + spread())
        out = run("summary", path)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(" P  hosts  placement ", table_lines(out.stdout)[0])
        table = summary_table([case_row(c) for c in dr.load_study([path]).cases])
        headers = [c.header for c in table.columns]
        i = headers.index("P")
        self.assertEqual(headers[i:i + 3], ["P", "hosts", "placement"])
        cells = [[c.cell(r) for c in table.columns[i:i + 3]] for r in table.rows]
        self.assertEqual(cells[5], ["4", "2", "spread"])          # case 0005: spread P=4 on 2 hosts
        self.assertIn("placement: packed", "".join(table.notes))
        out = run("summary", path, "--format", "csv")
        rows = read_csv(out.stdout)
        cols = list(rows[0])
        self.assertEqual(cols[cols.index("ranks"):cols.index("ranks") + 3], ["ranks", "hosts", "placement"])
        self.assertEqual([(r["ranks"], r["hosts"], r["placement"]) for r in rows],
                         [("1", "1", "packed"), ("2", "1", "packed"), ("4", "2", "packed"),
                          ("1", "1", "spread"), ("2", "2", "spread"), ("4", "2", "spread")])
        out = run("summary", path, "--format", "json")
        self.assertIn('"hosts": 2, "placement": "spread"', out.stdout)

    # ------------------------------------------------------------ scaling

    def test_series_never_mix_placements_and_points_name_hosts(self):
        path = self.write("new.h5", packed() + spread())
        series, notes = dr.build_series(dr.load_study([path]).cases, "weak")
        self.assertEqual(notes, [])                       # P=1 packed and spread are not duplicates
        self.assertEqual(len(series), 2)
        self.assertTrue(series[0].label.endswith(" packed"), series[0].label)
        self.assertTrue(series[1].label.endswith(" spread"), series[1].label)
        self.assertEqual([(r["ranks"], r["hosts"], r["placement"]) for r in series[1].rows],
                         [(1, 1, "spread"), (2, 2, "spread"), (4, 2, "spread")])
        self.assertAlmostEqual(series[1].rows[1]["efficiency"], 0.010 / 0.013, delta=1e-12)
        text = scaling_table(series, "weak").text()
        self.assertIn("4 (2 hosts)", text)
        self.assertIn("2 (1 host)", text)
        out = run("scaling", path, "--format", "csv")
        rows = read_csv(out.stdout)
        self.assertEqual([(r["series"].rsplit(" ", 1)[1], r["ranks"], r["hosts"]) for r in rows],
                         [("packed", "1", "1"), ("packed", "2", "1"), ("packed", "4", "2"),
                          ("spread", "1", "1"), ("spread", "2", "2"), ("spread", "4", "2")])

    def test_single_placement_on_one_host_keeps_labels(self):
        path = self.write("one.h5", [case(1, 0.010), case(2, 0.0105)], hosts=None)
        series, _ = dr.build_series(dr.load_study([path]).cases, "weak")
        self.assertEqual(series[0].label, "mlp native cpu fp32 b=32 t=4")
        text = scaling_table(series, "weak").text()
        self.assertNotIn("host", text)

    def test_projection_names_its_network_figures(self):
        path = self.write("proj.h5", packed(projection=PROJECTION))
        series, _ = dr.build_series(dr.load_study([path]).cases, "weak")
        s = series[0]
        self.assertIsNotNone(s.projection)
        self.assertEqual([r["projection_between_hosts"] for r in s.rows], [0, 0, 1])
        self.assertTrue(any(f"network figures: {NOTE}" in n for n in s.notes), s.notes)
        self.assertEqual(s.projection.attrs["ranks_per_host"], 2)
        self.assertEqual(s.projection.between_hosts.tolist(), [0, 0, 1, 1, 1])
        line = diagnosis_lines(diagnose(dr.load_study([path]).cases))[-1]
        self.assertIn("projected efficiency 0.62 at P=8 (fitted at P=4", line)
        self.assertIn(f"network figures: {NOTE})", line)

    # ------------------------------------------------------------ diagnosis

    def test_diagnosis_names_hosts_and_the_crossing(self):
        path = self.write("new.h5", packed() + spread())
        lines = diagnosis_lines(diagnose(dr.load_study([path]).cases))
        packed_lines = [line for line in lines if "packed (weak)" in line]
        spread_lines = [line for line in lines if "spread (weak)" in line]
        self.assertEqual(len(packed_lines), 2)
        self.assertIn(": at P=2, efficiency 0.95: ", packed_lines[0])
        self.assertNotIn("crossed", packed_lines[0])
        self.assertIn(": at P=4 on 2 hosts, efficiency 0.71: ", packed_lines[1])
        self.assertIn("; efficiency falls from 0.95 at P=2 (1 host) to 0.71 at P=4 (2 hosts): "
                      "the step crossed the network", packed_lines[1])
        # Spread leaves the host at P=2 already; P=4 stays on two hosts, nothing more to say.
        self.assertIn(": at P=2 on 2 hosts, efficiency 0.77: ", spread_lines[0])
        self.assertIn("efficiency falls from 1.00 at P=1 (1 host) to 0.77 at P=2 (2 hosts): "
                      "the step crossed the network", spread_lines[0])
        self.assertNotIn("crossed", spread_lines[1])
        rows = diagnosis_rows(diagnose(dr.load_study([path]).cases))
        self.assertEqual([(r["ranks"], r["hosts"], r["baseline_hosts"]) for r in rows],
                         [(2, 1, 1), (4, 2, 1), (2, 2, 1), (4, 2, 1)])
        out = run("diagnosis", path)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("4 (2 hosts)", out.stdout)
        # The table's notes say where each series crossed the network, once per series.
        text = " ".join(out.stdout.split())
        self.assertIn("packed (weak): efficiency falls from 0.95 at P=2 (1 host) to 0.71 at P=4 (2 hosts): "
                      "the step crossed the network", text)
        self.assertIn("spread (weak): efficiency falls from 1.00 at P=1 (1 host) to 0.77 at P=2 (2 hosts): "
                      "the step crossed the network", text)

    def test_no_crossing_sentence_when_efficiency_holds(self):
        path = self.write("flat.h5", [case(1, 0.010, "packed", 1, "0"), case(2, 0.010, "packed", 1, "0-1"),
                                      case(4, 0.010, "packed", 2, "0-3")])
        lines = diagnosis_lines(diagnose(dr.load_study([path]).cases))
        self.assertIn("at P=4 on 2 hosts, efficiency 1.00", lines[1])
        self.assertNotIn("crossed", "".join(lines))

    # ------------------------------------------------------------ compare

    def test_compare_matches_hosts_and_placement(self):
        a = self.write("a.h5", [case(4, 0.014, "packed", 2, "0-3"), case(2, 0.010, "packed", 1, "0-1")])
        b = self.write("b.h5", [case(4, 0.012, "packed", 1, "0-3"), case(2, 0.011, "packed", 1, "0-1")],
                       hosts=["nodeC"] * 4)
        out = run("compare", a, b, "--format", "csv")
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = read_csv(out.stdout)
        self.assertEqual([(r["ranks"], r["hosts"], r["placement"]) for r in rows], [("2", "1", "packed")])
        text = run("compare", a, b).stdout
        self.assertIn("only in A: ", text)
        self.assertIn("P=4 on 2 hosts", text)
        self.assertIn("only in B: ", text)

    # ------------------------------------------------------------ all-reduce

    def test_allreduce_hosts_and_network(self):
        between = dict(ALLREDUCE, attrs={"backend": "mpi", "ranks": np.int64(4), "dtype": "float32",
                                         "case": "", "alpha_s": 1e-6, "beta_s_per_byte": 1e-9,
                                         "hosts": np.int64(2), "network": "between hosts"})
        old = dict(ALLREDUCE, time_s=np.full((2, 2, 3), 5e-5),
                   attrs={"backend": "mpi", "ranks": np.int64(2), "dtype": "float32", "case": "",
                          "alpha_s": 1e-6, "beta_s_per_byte": 1e-9})
        path = self.write("ar.h5", packed(), allreduce=[between, old])
        f = dr.load_results(path)
        self.assertEqual([(ar.hosts, ar.network) for ar in f.allreduce],
                         [(2, "between hosts"), (1, "within one host")])
        out = run("allreduce", path, "--format", "csv")
        rows = read_csv(out.stdout)
        self.assertEqual({(r["group"], r["hosts"], r["network"]) for r in rows},
                         {("0000", "2", "between hosts"), ("0001", "1", "within one host")})
        text = run("allreduce", path).stdout
        self.assertIn("network", table_lines(text)[0])
        self.assertIn("between hosts", text)
        self.assertIn("within one host", text)
        # An old benchmark of 4 ranks on this rank table spanned both hosts.
        f = dr.load_results(self.write("ar_old.h5", packed(), allreduce=[dict(old, time_s=ALLREDUCE["time_s"],
                                                                               attrs=dict(old["attrs"], ranks=np.int64(4)))]))
        self.assertEqual((f.allreduce[0].hosts, f.allreduce[0].network), (2, "between hosts"))

    def test_html_report_and_plots(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib")
        path = self.write("new.h5", packed(projection=PROJECTION) + spread())
        out = run("report", path, "-o", self.path("html"))
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(os.path.join(self.path("html"), "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("the step crossed the network", page)
        self.assertIn("4 (2 hosts)", page)
        self.assertIn("<th class=\"txt\">placement</th>", page)


if __name__ == "__main__":
    unittest.main()
