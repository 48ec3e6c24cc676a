"""Benchmarks: `python -m e2e.bench NAME [--quick]` prints one JSON object."""
