"""The reliability suite: chaos under admission load, then sustained load with RSS sampling (`python -m
e2e.reliability [--long]`; see .readme/demo.md for the figures)."""
