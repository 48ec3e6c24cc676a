"""End to end: the Kubernetes API double, the scheduler double, benchmarks."""
