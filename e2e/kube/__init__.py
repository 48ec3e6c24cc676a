"""A real Kubernetes 1.34 control plane built from Go modules (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler; fake GPU Nodes with real ResourceSlices; no kubelet), and the demo story on it.

    python -m e2e.kube build          # build or reuse the four binaries (build.py)
    python -m e2e.kube up [--nodes N] [--detach]
    python -m e2e.kube down
    python -m e2e.kube demo [-o json]

docs/dev/real-control-plane.md says how it is put together and what it costs.
"""
