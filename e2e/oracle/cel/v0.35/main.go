// Command cel-oracle for k8s.io/dynamic-resource-allocation v0.35.4 (Kubernetes 1.35).
package main

import "gpuclaim.test/e2e/oracle/cel/oracle"

// DRAConsumableCapacity is alpha and off (k8s.io/kubernetes@v1.35.4 pkg/features/kube_features.go:1232).
func main() { oracle.Main(oracle.Defaults{ConsumableCapacity: false}) }
