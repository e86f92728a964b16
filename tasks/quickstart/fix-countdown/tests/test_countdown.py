"""Tests of countdown.py (run by test.sh; exit status 0 means every test passed)."""

import sys
import unittest

sys.path.append("/app")

from countdown import countdown


class CountdownTest(unittest.TestCase):
    def test_three(self):
        self.assertEqual(countdown(3), [3, 2, 1])

    def test_one(self):
        self.assertEqual(countdown(1), [1])

    def test_zero(self):
        self.assertEqual(countdown(0), [])


if __name__ == "__main__":
    unittest.main()
