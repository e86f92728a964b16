"""Word helpers."""


def words(text):
    return text.split()


def longest_word(text):
    """The longest word of text (the first one on ties)."""
    return min(words(text), key=len)
