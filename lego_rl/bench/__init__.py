"""Benchmarks of the core (proxy, scheduler); see ``legorl bench``."""
