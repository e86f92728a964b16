"""Temperature conversions."""

FREEZING_F = 23


def celsius_to_fahrenheit(celsius):
    return celsius * 9 / 5 + FREEZING_F


def fahrenheit_to_celsius(fahrenheit):
    return (fahrenheit - FREEZING_F) * 5 / 9
