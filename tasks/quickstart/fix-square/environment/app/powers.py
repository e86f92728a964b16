"""Integer powers."""


def power(base, exponent):
    """base raised to a non-negative integer exponent."""
    result = 1
    for _ in range(exponent):
        result *= base
    return result


def square(x):
    return power(2, x)


def cube(x):
    return power(x, 3)
