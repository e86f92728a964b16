"""Pass or fail."""

PASS_MARK = 50


def passed(score):
    """True when the score reaches the pass mark."""
    return score > PASS_MARK
