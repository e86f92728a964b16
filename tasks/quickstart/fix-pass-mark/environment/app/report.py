"""A one-line summary of a list of scores."""

from grades import passed


def summary(scores):
    count = sum(1 for score in scores if passed(score))
    return f"{count}/{len(scores)} passed"
