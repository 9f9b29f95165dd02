"""dlscale under mpirun across two hosts of the cluster test bed (testbed.py): 2 hosts x 2 ranks.

  DLSCALE_BIN=build/cpu/dlscale DLSCALE_SOURCE_DIR=$PWD /usr/bin/python3 tests/cluster/test_multihost.py -v

Exit 77 where the bed cannot be made (not root, no ip, no namespaces).
"""

import os
import sys

import clustertest
from clustertest import SMALL


def across_hosts(test, groups, ranks):
    """The one /allreduce group of all `ranks` ranks, which spans both hosts."""
    full = [g for g in groups if g.attrs["ranks"] == ranks]
    test.assertEqual(len(full), 1, [dict(g.attrs) for g in groups])
    if "hosts" in full[0].attrs:     # recorded by newer builds
        test.assertEqual(full[0].attrs["hosts"], 2)
        test.assertEqual(full[0].attrs["network"], "between hosts")
    return full[0]


class MultiHost(clustertest.OnTwoHosts):
    def test_run_on_two_hosts_two_ranks_each(self):
        import h5py
        out = os.path.join(self.dir, "run.h5")
        self.mpirun(["run", *SMALL, "-d", "reference", "--threads", "1", "--peak", "skip", "--out", out])
        with h5py.File(out, "r") as f:
            self.assertEqual(f.attrs["world_size"], 4)
            table = f["system/ranks"][()]
            self.assertEqual(list(table["rank"]), [0, 1, 2, 3])
            hosts = [h.decode() for h in table["host"]]
            self.assertEqual(hosts, [self.bed.hosts[0]] * 2 + [self.bed.hosts[1]] * 2)
            self.assertEqual(list(table["local_rank"]), [0, 1, 0, 1])
            env = dict(f["system/environment"].attrs)
            self.assertEqual(env.get("OMPI_COMM_WORLD_SIZE"), "4", env)
            self.assertEqual(env.get("OMPI_COMM_WORLD_LOCAL_SIZE"), "2", env)
            cases = list(f["cases"])
            self.assertEqual(len(cases), 1)
            case = f["cases"][cases[0]]
            self.assertEqual(case.attrs["status"], "ok", case.attrs.get("message"))
            self.assertEqual(case.attrs["ranks"], 4)
            self.assertEqual(case["iter_time_s"].shape, (4, 3))
            # Across hosts the ring's segments stay under Open MPI's TCP eager limit (65536 by
            # default), 64 bytes left for its headers.
            self.assertEqual(case.attrs["allreduce_segment_bytes"], 65536 - 64)

    def test_host_hierarchy_reduces_within_hosts_first(self):
        # 2 hosts x 2 ranks: the default (auto) takes the host-level all-reduce, flat is one ring of
        # four; both train alike (the loss of every timed step within float rounding), whole and in
        # buckets, and with 16-bit gradients on top.
        import h5py
        import numpy as np
        out = os.path.join(self.dir, "hierarchy.h5")
        self.mpirun(["run", *SMALL, "-d", "reference", "--threads", "1", "--peak", "skip", "--bucket-mb", "0,0.02",
                     "--allreduce-hierarchy", "auto,flat", "--grad-compression", "none,bf16", "--out", out])
        with h5py.File(out, "r") as f:
            cases = {(float(c.attrs["bucket_mb"]), str(c.attrs["grad_compression"]),
                      str(c.attrs["allreduce_hierarchy"])): c for c in (f["cases"][n] for n in f["cases"])}
            self.assertEqual(len(cases), 8, sorted(cases))
            for (bucket, compression, hierarchy), c in cases.items():
                self.assertEqual(c.attrs["status"], "ok", c.attrs.get("message"))
                self.assertEqual(c.attrs["hosts"], 2)
                if hierarchy == "flat":
                    continue
                self.assertEqual(hierarchy, "host")
                flat = cases[(bucket, compression, "flat")]["loss"][()]
                tolerance = 1e-5 if compression == "none" else 1e-2
                np.testing.assert_allclose(c["loss"][()], flat, rtol=tolerance,
                                           err_msg=f"bucket {bucket} MB, {compression}")

    def test_ring_segments_follow_mpis_eager_limit(self):
        # The segment size is read from MPI, not fixed: a larger eager limit, larger segments;
        # a tiny one, the floor. Sums across hosts stay exact either way.
        import h5py
        for limit, segment in ((262144, 262144 - 64), (4096, 16384)):
            with self.subTest(limit=limit):
                out = os.path.join(self.dir, f"eager{limit}.h5")
                self.mpirun(["allreduce", "--backend", "mpi", "--sizes", "1000000", "--iterations", "2",
                             "--warmup", "1", "--out", out], env={"OMPI_MCA_btl_tcp_eager_limit": str(limit)})
                with h5py.File(out, "r") as f:
                    groups = [f["allreduce"][g] for g in f["allreduce"]]
                    for g in groups:
                        self.assertEqual(list(g["errors"][()]), [0] * len(g["bytes"]), dict(g.attrs))
                    self.assertEqual(across_hosts(self, groups, 4).attrs["segment_bytes"], segment)

    def test_allreduce_across_hosts_is_exact(self):
        import h5py
        out = os.path.join(self.dir, "allreduce.h5")
        self.mpirun(["allreduce", "--backend", "mpi", "--min-bytes", "4", "--max-bytes", "262144",
                     "--sizes", "12,1000000", "--iterations", "3", "--warmup", "1", "--out", out])
        with h5py.File(out, "r") as f:
            hosts = sorted({h.decode() for h in f["system/ranks"][()]["host"]})
            self.assertEqual(hosts, self.bed.hosts)
            # The run across all 4 ranks; newer builds add a group per node-local run
            # (attrs hosts = 1, network "within one host"): every group must be exact.
            groups = [f["allreduce"][g] for g in f["allreduce"]]
            for g in groups:
                self.assertEqual(list(g["errors"][()]), [0] * len(g["bytes"]), dict(g.attrs))
            g = across_hosts(self, groups, 4)
            sizes = list(g["bytes"][()])
            self.assertIn(1000000, sizes)
            self.assertIn(262144, sizes)
            self.assertEqual(g["time_s"].shape, (4, len(sizes), 3))

    def test_allreduce_over_a_shaped_link_is_exact(self):
        # A slow link changes the times, never the sums.
        import h5py
        self.bed.shape(self.bed.hosts[1], "100mbit")
        self.addCleanup(self.bed.unshape, self.bed.hosts[1])
        tc = self.bed.run(self.bed.hosts[1], ["tc", "qdisc", "show", "dev", "eth0"])
        self.assertIn("tbf", tc.stdout)
        out = os.path.join(self.dir, "shaped.h5")
        self.mpirun(["allreduce", "--backend", "mpi", "--min-bytes", "1024", "--max-bytes", "1048576",
                     "--iterations", "2", "--warmup", "1", "--out", out], ranks_per_host=1)
        with h5py.File(out, "r") as f:
            groups = [f["allreduce"][g] for g in f["allreduce"]]
            for g in groups:
                self.assertEqual(list(g["errors"][()]), [0] * len(g["bytes"]), dict(g.attrs))
            across_hosts(self, groups, 2)


if __name__ == "__main__":
    sys.exit(clustertest.main())
