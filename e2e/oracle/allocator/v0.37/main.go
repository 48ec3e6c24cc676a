// Command allocator-oracle for k8s.io/dynamic-resource-allocation v0.37.x (Kubernetes 1.37).
package main

import (
	"k8s.io/dynamic-resource-allocation/structured"

	"gpuclaim.test/e2e/oracle/allocator/oracle"
)

// features is v0.37's structured.Features under the protocol's JSON names (v0.36's plus five).
type features struct {
	AdminAccess             bool `json:"adminAccess"`
	CompatibilityGroups     bool `json:"compatibilityGroups"`
	ConsumableCapacity      bool `json:"consumableCapacity"`
	DerivedAttributes       bool `json:"derivedAttributes"`
	DeviceBindingAndStatus  bool `json:"deviceBindingAndStatus"`
	DeviceTaints            bool `json:"deviceTaints"`
	FractionalCapacityRange bool `json:"fractionalCapacityRange"`
	ListTypeAttributes      bool `json:"listTypeAttributes"`
	OptionalNodeOperations  bool `json:"optionalNodeOperations"`
	PartitionableDevices    bool `json:"partitionableDevices"`
	PrioritizedList         bool `json:"prioritizedList"`
}

func (f features) Structured() structured.Features {
	return structured.Features{
		AdminAccess:             f.AdminAccess,
		CompatibilityGroups:     f.CompatibilityGroups,
		ConsumableCapacity:      f.ConsumableCapacity,
		DerivedAttributes:       f.DerivedAttributes,
		DeviceBindingAndStatus:  f.DeviceBindingAndStatus,
		DeviceTaints:            f.DeviceTaints,
		FractionalCapacityRange: f.FractionalCapacityRange,
		ListTypeAttributes:      f.ListTypeAttributes,
		OptionalNodeOperations:  f.OptionalNodeOperations,
		PartitionableDevices:    f.PartitionableDevices,
		PrioritizedList:         f.PrioritizedList,
	}
}

// The 1.37 DynamicResources plugin at default gates (k8s.io/kubernetes@v1.37.2
// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:835, AllocatorFeatures):
// as 1.36. DRAFractionalCapacityRange is beta but off at the default min-compatibility version
// (1.36); the 1.37 alpha gates are off. The incubating implementation runs.
func main() {
	oracle.Main(features{
		AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
		DeviceBindingAndStatus: true, ConsumableCapacity: true,
	})
}
