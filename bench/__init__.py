"""Benchmarks that print and record figures (`make bench`); they are not timed tests."""
