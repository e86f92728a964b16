"""Tests of words.py (run by test.sh; exit status 0 means every test passed)."""

import sys
import unittest

sys.path.append("/app")

from words import longest_word, words


class WordsTest(unittest.TestCase):
    def test_longest(self):
        self.assertEqual(longest_word("a bb ccc"), "ccc")

    def test_first_on_ties(self):
        self.assertEqual(longest_word("hello big world"), "hello")

    def test_words(self):
        self.assertEqual(words("a  b"), ["a", "b"])


if __name__ == "__main__":
    unittest.main()
