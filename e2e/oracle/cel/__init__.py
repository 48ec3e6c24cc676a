"""The upstream CEL oracle: k8s.io/dynamic-resource-allocation/cel v0.34-v0.37 as each release's kube-apiserver and
kube-scheduler run it (Go code in ``oracle/``, one module per version in ``v0.3x/``), and its Python client
(``client``)."""
