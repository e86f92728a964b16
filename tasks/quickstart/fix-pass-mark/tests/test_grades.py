"""Tests of grades.py (run by test.sh; exit status 0 means every test passed)."""

import sys
import unittest

sys.path.append("/app")

from grades import passed
from report import summary


class GradesTest(unittest.TestCase):
    def test_exactly_the_mark(self):
        self.assertTrue(passed(50))

    def test_below(self):
        self.assertFalse(passed(49))

    def test_above(self):
        self.assertTrue(passed(100))

    def test_summary(self):
        self.assertEqual(summary([50, 49, 80]), "2/3 passed")


if __name__ == "__main__":
    unittest.main()
