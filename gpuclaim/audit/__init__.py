"""`gpuclaim audit`: migration readiness (docs/audit.md). ``report`` builds the report from a cluster's objects
(pure); ``sources`` reads them live or from a dump."""
