"""Ranks on two hosts of the cluster test bed (testbed.py): what a case's placement decides, what
the files record about hosts and the network, the all-reduce within and between hosts, and a
shaped link that the scaling diagnosis must name (the converse of the straggler test).

  DLSCALE_BIN=build/cpu/dlscale DLSCALE_SOURCE_DIR=$PWD /usr/bin/python3 tests/cluster/test_hosts_and_network.py -v

Exit 77 where the bed cannot be made (not root, no ip, no namespaces). No test asserts a time:
the shaped link makes the all-reduce dominate by orders of magnitude, not by a margin.
"""

import csv
import io
import os
import re
import subprocess
import sys

import clustertest
from clustertest import SOURCE

REPORT = os.path.join(SOURCE, "results", "dlscale-report")
# A small network whose gradients (64 KiB) cross a 10 Mbit/s link in about 0.1 s per step,
# against well under a millisecond of compute.
NET = ["-w", "fcn5:features=64,width=96", "-d", "reference", "--batch", "4", "--threads", "1",
       "--peak", "skip", "--warmup", "1", "--iterations", "3", "--phases"]


def attrs(group):
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in group.attrs.items()}


class HostsAndNetwork(clustertest.OnTwoHosts):
    def report(self, *args):
        r = subprocess.run([sys.executable, REPORT, *args], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def test_placement_decides_whether_a_case_crosses_hosts(self):
        import h5py
        out = os.path.join(self.dir, "placement.h5")
        self.mpirun(["run", *NET, "--ranks", "2,4", "--placement", "packed,spread", "--out", out])
        with h5py.File(out, "r") as f:
            table = f["system/ranks"][()]
            hosts = [h.decode() for h in table["host"]]
            # The bed's hostfile gives each host two slots: ranks 0, 1 on the first host.
            self.assertEqual(hosts, [self.bed.hosts[0]] * 2 + [self.bed.hosts[1]] * 2)
            for r, network in enumerate(table["network"]):
                self.assertIn(self.bed.addresses[hosts[r]] + "/24", network.decode())
            transport = attrs(f["system/software"])["mpi_transport"]
            # As the bed's mpirun set them (Open MPI names the subnet's interface itself).
            self.assertIn("btl=tcp,self", transport)
            self.assertIn(f"oob_tcp_if_include={self.bed.subnet}", transport)
            cases = {(a["ranks"], a["placement"]): (a, f["cases"][k]) for k in f["cases"]
                     for a in [attrs(f["cases"][k])]}
            want = {(2, "packed"): ("0-1", 1), (2, "spread"): ("0,2", 2),
                    (4, "packed"): ("0-3", 2), (4, "spread"): ("0,2,1,3", 2)}
            self.assertEqual(set(cases), set(want))
            for key, (participants, n_hosts) in want.items():
                a, case = cases[key]
                self.assertEqual(a["status"], "ok", f"{key}: {a.get('message')}")
                self.assertEqual(a["participants"], participants, key)
                self.assertEqual(a["hosts"], n_hosts, key)
                note = attrs(case["projection"])["network_note"]
                between = list(case["projection"]["between_hosts"][()])
                ranks = list(case["projection"]["ranks"][()])
                if n_hosts == 1:
                    self.assertIn("no between-host figures measured", note, key)
                    self.assertEqual(set(between), {0}, key)
                else:
                    self.assertIn("between-host fit", note, key)
                    self.assertTrue(all(b == 1 for p, b in zip(ranks, between) if p > 2), (key, ranks, between))
                if key == (4, "packed"):  # two ranks on each host also measured their own links
                    self.assertIn("P <= 2: within-host fit (2 ranks on 1 host)", note)
                    self.assertIn("P > 2: between-host fit (4 ranks on 2 hosts)", note)
            # A case trains the same function on whichever ranks it runs: each rank's data and
            # seeds follow its place in the case, not its world rank.
            for p in (2, 4):
                packed, spread = (cases[(p, pl)][1]["loss"][()] for pl in ("packed", "spread"))
                self.assertTrue(all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(packed.ravel(), spread.ravel())),
                                (p, packed, spread))
            # Each case's own microbenchmark says where it ran.
            networks = {(attrs(g)["ranks"], attrs(g)["hosts"], attrs(g)["network"])
                        for g in f["allreduce"].values()}
            self.assertIn((2, 1, "within one host"), networks)
            self.assertIn((2, 2, "between hosts"), networks)
        # The summary tells the two P = 2 cases apart by their hosts.
        rows = list(csv.DictReader(io.StringIO(self.report("summary", "--format", "csv", out))))
        self.assertEqual(sorted((int(r["ranks"]), int(r["hosts"]), r["placement"]) for r in rows),
                         [(2, 1, "packed"), (2, 2, "spread"), (4, 2, "packed"), (4, 2, "spread")])

    def test_allreduce_measures_within_and_between_hosts(self):
        import h5py
        out = os.path.join(self.dir, "allreduce.h5")
        r = self.mpirun(["allreduce", "--sizes", "4096,65536", "--iterations", "3", "--warmup", "1", "--out", out])
        self.assertIn("4 ranks on 2 hosts", r.stdout)
        self.assertIn(f"2 ranks within host {self.bed.hosts[0]}", r.stdout)
        with h5py.File(out, "r") as f:
            groups = [attrs(g) | {"errors": list(g["errors"][()])} for g in f["allreduce"].values()]
        self.assertEqual(sorted((g["ranks"], g["hosts"], g["network"]) for g in groups),
                         [(2, 1, "within one host"), (4, 2, "between hosts")])
        for g in groups:
            self.assertEqual(g["errors"], [0, 0], g)

    def test_info_prints_each_host_and_its_network(self):
        r = self.mpirun(["info"], ranks_per_host=1)
        hosts = r.stdout[r.stdout.index("\nHosts\n"):]
        for h in self.bed.hosts:
            # The host's own eth0 (a veth, which reports 10000 Mb/s), not the machine's.
            self.assertRegex(hosts, rf"\n  {re.escape(h)} +1 rank +eth0 {re.escape(self.bed.addresses[h])}/24 up \d+Mb/s")
        self.assertRegex(r.stdout, r"mpi_transport +.*btl=tcp,self")

    def test_a_slow_link_shows_as_exposed_allreduce(self):
        # The second host's link at 10 Mbit/s: P = 2 spread crosses it, P = 1 does not. Weak
        # scaling keeps the work per rank, so the step's growth is the network's.
        out = os.path.join(self.dir, "shaped.h5")
        self.bed.shape(self.bed.hosts[1], "10mbit")
        self.addCleanup(self.bed.unshape, self.bed.hosts[1])
        self.mpirun(["run", *NET, "--ranks", "1,2", "--placement", "spread", "--out", out], ranks_per_host=1)
        rows = list(csv.DictReader(io.StringIO(self.report("diagnosis", "--format", "csv", out))))
        self.assertEqual(len(rows), 1, rows)
        row = rows[0]
        self.assertEqual(int(row["ranks"]), 2)
        lost = {k: float(row[f"{k}_lost_ms"]) for k in ("compute", "straggler", "allreduce", "other")}
        # The all-reduce holds nearly all of the gap: not compute inflation, not a straggler.
        self.assertEqual(max(lost, key=lost.get), "allreduce", lost)
        self.assertGreater(lost["allreduce"], 0.8 * float(row["gap_ms"]), row)
        self.assertLess(float(row["efficiency"]), 0.5, row)
        # The text table: the all-reduce column holds the loss, on the row of P=2 on 2 hosts.
        text = self.report("diagnosis", out)
        row = next(line for line in text.splitlines() if "2 (2 hosts)" in line)
        self.assertRegex(row, r"2 \(2 hosts\) +0\.\d\d +~?-?\d+ +~?-?\d+ +\d+ +~?-?\d+", text)
        self.assertRegex(text, r"series +P +E +compute +straggler +all-reduce +other", text)


if __name__ == "__main__":
    sys.exit(clustertest.main())
