"""kube-scheduler 1.34's ResourceSlice tracker (k8s.io/dynamic-resource-allocation v0.34 resourceslice/tracker) as
a test oracle: the slices with every v1alpha3 DeviceTaintRule's taint added where its selector (driver, pool,
device, deviceClassName, CEL selectors) matches, as the 1.34 scheduler hands them to its allocator.

Only 1.34: from 1.35 on a rule selects by driver, pool and device alone, which tests restate directly
(tests/dra/test_taint_prediction_oracle.py).
"""

from e2e.oracle.jsonlines import OracleError

from .client import TrackerOracle, binary

__all__ = ["OracleError", "TrackerOracle", "binary"]
