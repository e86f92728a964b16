"""Counting down for launch sequences."""


def countdown(n):
    """The numbers from n down to 1, e.g. countdown(3) == [3, 2, 1]."""
    return list(range(n, 1, -1))
