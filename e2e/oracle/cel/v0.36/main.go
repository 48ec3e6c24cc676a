// Command cel-oracle for k8s.io/dynamic-resource-allocation v0.36.4 (Kubernetes 1.36).
package main

import "gpuclaim.test/e2e/oracle/cel/oracle"

// DRAConsumableCapacity is beta and on (k8s.io/kubernetes@v1.36.4 pkg/features/kube_features.go:1354);
// DRAListTypeAttributes is alpha and off.
func main() { oracle.Main(oracle.Defaults{ConsumableCapacity: true}) }
