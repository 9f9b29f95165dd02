"""The helpers the Python tests share (tests/common/dlscale_test.py) that decide which tests run
and how: load_tests, through which CTest runs a module in shards, must give every test to exactly
one shard, or a GPU run would pass without running some of them; and a class's tests that run
side by side must each run once, overlap in time, and be reported whole (passes, failures,
errors, skips and subtests), with the class's fixtures run once around them."""

import io
import os
import threading
import time
import types
import unittest
from unittest import mock

import dlscale_test


def module_with_tests():
    """A module of two test classes (7 tests) that takes load_tests as its load_tests."""
    module = types.ModuleType("sharded_module")
    module.First = type("First", (unittest.TestCase,), {f"test_{i}": lambda self: None for i in range(4)})
    module.Second = type("Second", (unittest.TestCase,), {f"test_{i}": lambda self: None for i in range(3)})
    module.load_tests = dlscale_test.load_tests
    return module


def ids(suite):
    return [test.id() for test in suite]


class LoadShard(unittest.TestCase):
    def load(self, loader=None, **environment):
        """The module's tests as unittest loads them with `environment`'s sharding variables."""
        with mock.patch.dict(os.environ, environment):
            for name in {"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX"} - environment.keys():
                os.environ.pop(name, None)
            return (loader or unittest.TestLoader()).loadTestsFromModule(module_with_tests())

    def test_without_the_variables_every_test_runs(self):
        self.assertEqual(len(ids(self.load())), 7)

    def test_the_shards_partition_the_tests(self):
        everything = ids(self.load())
        for shards in (1, 2, 3, 7, 9):
            seen = []
            for index in range(shards):
                part = ids(self.load(GTEST_TOTAL_SHARDS=str(shards), GTEST_SHARD_INDEX=str(index)))
                self.assertLessEqual(len(part), -(-7 // shards), (shards, index))
                seen += part
            self.assertEqual(sorted(seen), sorted(everything), shards)

    def test_an_index_outside_the_shards_fails_the_load(self):
        # unittest turns an exception of load_tests into a failing test and a loader error.
        loader = unittest.TestLoader()
        suite = self.load(loader, GTEST_TOTAL_SHARDS="4", GTEST_SHARD_INDEX="4")
        self.assertEqual(len(ids(suite)), 1)
        self.assertIn("GTEST_SHARD_INDEX=4 with GTEST_TOTAL_SHARDS=4", "".join(loader.errors))
        with open(os.devnull, "w") as quiet:
            self.assertFalse(unittest.TextTestRunner(stream=quiet).run(suite).wasSuccessful())



class SideBySide(unittest.TestCase):
    """A class with side_by_side = 3: its six tests wait for each other at a barrier of 3, which
    only tests running at the same time pass."""

    def run_module(self, **environment):
        events = []
        barrier = threading.Barrier(3, timeout=30)

        class Together(unittest.TestCase):
            side_by_side = 3

            @classmethod
            def setUpClass(cls):
                events.append("setUpClass")

            @classmethod
            def tearDownClass(cls):
                events.append("tearDownClass")

            def meet(self):
                barrier.wait()
                time.sleep(0.01)

        for i in range(3):
            setattr(Together, f"test_pass_{i}", lambda self: self.meet())
        Together.test_fail = lambda self: (self.meet(), self.fail("failed on purpose"))
        Together.test_error = lambda self: (self.meet(), 1 / 0)
        Together.test_skip_and_subtest = lambda self: self.skip_and_subtest()

        def skip_and_subtest(self):
            self.meet()
            with self.subTest(part=1):
                self.assertEqual(1, 2)
            self.skipTest("skipped on purpose")
        Together.skip_and_subtest = skip_and_subtest
        module = types.ModuleType("side_by_side_module")
        module.Together = Together
        module.load_tests = dlscale_test.load_tests
        with mock.patch.dict(os.environ, environment):
            for name in {"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX"} - environment.keys():
                os.environ.pop(name, None)
            suite = unittest.TestLoader().loadTestsFromModule(module)
        stream = io.StringIO()
        result = unittest.TextTestRunner(stream=stream, verbosity=2).run(suite)
        return result, events, stream.getvalue()

    def test_every_test_runs_once_alongside_the_others_and_is_reported_whole(self):
        result, events, log = self.run_module()
        self.assertEqual(result.testsRun, 6)
        self.assertEqual(events, ["setUpClass", "tearDownClass"])
        failed = sorted(test.id().rsplit(".", 1)[1] for test, _ in result.failures)
        self.assertEqual(failed, ["test_fail", "test_skip_and_subtest (part=1)"])  # the subtest's failure counts
        self.assertEqual([test.id().rsplit(".", 1)[1] for test, _ in result.errors], ["test_error"])
        self.assertEqual([test.id().rsplit(".", 1)[1] for test, _ in result.skipped], ["test_skip_and_subtest"])
        # One line per test, whole: its name, then its outcome.
        for i in range(3):
            self.assertRegex(log, rf"test_pass_{i} \(.*\) \.\.\. ok\n")
        self.assertRegex(log, r"test_error \(.*\) \.\.\. ERROR\n")

    def test_a_shard_keeps_its_share_side_by_side(self):
        # Two shards of three tests each: a barrier of 3 passes within each shard.
        outcomes = []
        for index in range(2):
            result, events, _ = self.run_module(GTEST_TOTAL_SHARDS="2", GTEST_SHARD_INDEX=str(index))
            self.assertEqual(events, ["setUpClass", "tearDownClass"])
            outcomes.append(result.testsRun)
        self.assertEqual(outcomes, [3, 3])


if __name__ == "__main__":
    unittest.main()
