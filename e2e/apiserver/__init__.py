"""`python -m e2e.apiserver`: the Kubernetes API double, started from the repository root.

The double itself is `gpuclaim.double.apiserver` (product code: `gpuclaim demo` runs it); this
entry point stays for the test and benchmark tooling that names it.
"""
