"""Benchmarks (run with ``nox -s bench``); never timed unit tests."""
