"""The helpers the Python tests share (tests/common/dlscale_test.py) that decide which tests run:
load_shard, through which CTest runs a module in shards, must give every test to exactly one
shard, or a GPU run would pass without running some of them."""

import os
import types
import unittest
from unittest import mock

import dlscale_test


def module_with_tests():
    """A module of two test classes (7 tests) that takes load_shard as its load_tests."""
    module = types.ModuleType("sharded_module")
    module.First = type("First", (unittest.TestCase,), {f"test_{i}": lambda self: None for i in range(4)})
    module.Second = type("Second", (unittest.TestCase,), {f"test_{i}": lambda self: None for i in range(3)})
    module.load_tests = dlscale_test.load_shard
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


if __name__ == "__main__":
    unittest.main()
