// Command cel-oracle for k8s.io/dynamic-resource-allocation v0.34.4 (Kubernetes 1.34).
package main

import "gpuclaim.test/e2e/oracle/cel/oracle"

// DRAConsumableCapacity is alpha and off (k8s.io/kubernetes@v1.34.4 pkg/features/kube_features.go:1207).
func main() { oracle.Main(oracle.Defaults{ConsumableCapacity: false}) }
