"""Tests of powers.py (run by test.sh; exit status 0 means every test passed)."""

import sys
import unittest

sys.path.append("/app")

from powers import cube, power, square


class PowersTest(unittest.TestCase):
    def test_square(self):
        self.assertEqual(square(3), 9)
        self.assertEqual(square(5), 25)

    def test_cube(self):
        self.assertEqual(cube(2), 8)

    def test_power(self):
        self.assertEqual(power(2, 10), 1024)


if __name__ == "__main__":
    unittest.main()
