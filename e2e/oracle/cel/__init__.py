"""The upstream CEL oracle: k8s.io/dynamic-resource-allocation/cel v0.34.4 as kube-apiserver and kube-scheduler
run it (``main.go``), and its Python client (``client``)."""
