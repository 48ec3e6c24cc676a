"""The reliability suite: chaos under admission load, then sustained load with RSS sampling (`python -m
e2e.reliability [--long]`; see docs/benchmarks.md for the figures)."""
