"""Tests of stats.py (run by test.sh; exit status 0 means every test passed)."""

import sys
import unittest

sys.path.append("/app")

from stats import average, spread


class AverageTest(unittest.TestCase):
    def test_two_values(self):
        self.assertEqual(average([2, 4]), 3.0)

    def test_one_value(self):
        self.assertEqual(average([5]), 5)

    def test_fraction(self):
        self.assertEqual(average([1, 2, 3, 4]), 2.5)

    def test_spread_unchanged(self):
        self.assertEqual(spread([3, 1, 7]), 6)


if __name__ == "__main__":
    unittest.main()
