"""Tests of convert.py (run by test.sh; exit status 0 means every test passed)."""

import sys
import unittest

sys.path.append("/app")

from convert import celsius_to_fahrenheit, fahrenheit_to_celsius


class ConvertTest(unittest.TestCase):
    def test_freezing(self):
        self.assertEqual(celsius_to_fahrenheit(0), 32)

    def test_boiling(self):
        self.assertEqual(celsius_to_fahrenheit(100), 212)

    def test_back(self):
        self.assertEqual(fahrenheit_to_celsius(212), 100)


if __name__ == "__main__":
    unittest.main()
