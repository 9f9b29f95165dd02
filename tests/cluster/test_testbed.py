"""The cluster test bed itself (testbed.py): hosts, TCP between them, link down, kill_host,
and a teardown that leaves nothing, also when the owning process is SIGKILLed.

  /usr/bin/python3 tests/cluster/test_testbed.py -v      (exit 77 where the bed cannot be made)
"""

import os
import subprocess
import sys
import time
import unittest

import clustertest
from clustertest import netns_of, testbed

SERVER = ("import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
          "s.bind(('0.0.0.0', 7000)); s.listen(); print('listening', flush=True); "
          "c, a = s.accept(); c.sendall(socket.gethostname().encode()); c.close()")
CLIENT = ("import socket,sys; c=socket.create_connection((sys.argv[1], 7000), timeout=3); "
          "print(c.recv(100).decode())")


def leftovers(name, directory):
    found = []
    if netns_of(name):
        found.append(f"namespaces {netns_of(name)}")
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f if name in line.split()[4]]
    if mounts:
        found.append(f"mounts {mounts}")
    if os.path.exists(directory):
        found.append(f"directory {directory}")
    pids = testbed.pids_in(cwd_root=directory)
    if pids:
        found.append(f"processes {pids}")
    return found


class TestBed(unittest.TestCase):
    def test_hosts_have_own_names_and_talk_tcp_and_links_go_down(self):
        with testbed.Cluster(hosts=2) as c:
            a, b = c.hosts
            self.assertEqual(c.run(a, ["hostname"]).stdout.strip(), a)
            self.assertEqual(c.run(b, ["hostname"]).stdout.strip(), b)
            self.assertNotEqual(os.uname().nodename, a)
            server = c.popen(b, [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
            self.assertEqual(server.stdout.readline().strip(), "listening")
            r = c.run(a, [sys.executable, "-c", CLIENT, c.addresses[b]], timeout=30)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, b), r.stderr)
            server.wait(timeout=10)
            server.stdout.close()
            # The machine's own namespace does not see the bed's addresses.
            self.assertNotIn(c.subnet_prefix + ".", subprocess.run(["ip", "-br", "addr"], capture_output=True,
                                                                   text=True).stdout)
            c.link(b, False)
            r = c.run(a, [sys.executable, "-c", CLIENT, c.addresses[b]], timeout=30)
            self.assertNotEqual(r.returncode, 0, "connected over a link that is down")
            c.link(b, True)
            # kill_host ends every process in the host, and nothing elsewhere.
            sleepers = [c.popen(h, ["sleep", "600"]) for h in (a, b)]
            c.kill_host(b)
            self.assertEqual(sleepers[1].wait(timeout=10), -9)
            self.assertIsNone(sleepers[0].poll())
            sleepers[0].kill()
            sleepers[0].wait()
            name, directory = c.name, c.dir
        self.assertEqual(leftovers(name, directory), [])

    def test_owner_killed_watchdog_removes_everything(self):
        child = subprocess.Popen([sys.executable, "-c",
                                  "import sys, time; sys.path.insert(0, sys.argv[1]); import testbed; "
                                  "c = testbed.Cluster(hosts=2); c.popen(c.hosts[1], ['sleep', '600']); "
                                  "print(c.name, c.dir, flush=True); time.sleep(600)", clustertest.HERE],
                                 stdout=subprocess.PIPE, text=True)
        name, directory = child.stdout.readline().split()
        self.assertEqual(len(netns_of(name)), 3)
        child.kill()
        child.wait()
        child.stdout.close()
        deadline = time.monotonic() + 30
        while leftovers(name, directory) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(leftovers(name, directory), [])

    def test_down_all_removes_an_abandoned_instance(self):
        c = testbed.Cluster(hosts=1, watchdog=False)     # as `testbed.py up` makes it
        name, directory = c.name, c.dir
        r = subprocess.run([sys.executable, os.path.join(clustertest.HERE, "testbed.py"), "down", "--all"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"removed {name}", r.stderr)
        self.assertEqual(leftovers(name, directory), [])


if __name__ == "__main__":
    sys.exit(clustertest.main(needs_dlscale=False))
