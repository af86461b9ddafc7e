"""pargraph's benchmark suite: ``python -m benchmarks`` (see benchmarks/run.py)."""
