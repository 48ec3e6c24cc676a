// Command allocator-oracle for k8s.io/dynamic-resource-allocation v0.36.x (Kubernetes 1.36).
package main

import (
	"k8s.io/dynamic-resource-allocation/structured"

	"gpuclaim.test/e2e/oracle/allocator/oracle"
)

// features is v0.36's structured.Features under the protocol's JSON names (v0.35's plus
// ListTypeAttributes).
type features struct {
	AdminAccess            bool `json:"adminAccess"`
	ConsumableCapacity     bool `json:"consumableCapacity"`
	DeviceBindingAndStatus bool `json:"deviceBindingAndStatus"`
	DeviceTaints           bool `json:"deviceTaints"`
	ListTypeAttributes     bool `json:"listTypeAttributes"`
	PartitionableDevices   bool `json:"partitionableDevices"`
	PrioritizedList        bool `json:"prioritizedList"`
}

func (f features) Structured() structured.Features {
	return structured.Features{
		AdminAccess:            f.AdminAccess,
		ConsumableCapacity:     f.ConsumableCapacity,
		DeviceBindingAndStatus: f.DeviceBindingAndStatus,
		DeviceTaints:           f.DeviceTaints,
		ListTypeAttributes:     f.ListTypeAttributes,
		PartitionableDevices:   f.PartitionableDevices,
		PrioritizedList:        f.PrioritizedList,
	}
}

// The 1.36 DynamicResources plugin at default gates (k8s.io/kubernetes@v1.36.4
// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:671, AllocatorFeatures):
// DRAPartitionableDevices, DRADeviceTaints, DRADeviceBindingConditions and DRAConsumableCapacity
// became beta and on. The incubating implementation runs (stable lacks the last two).
func main() {
	oracle.Main(features{
		AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
		DeviceBindingAndStatus: true, ConsumableCapacity: true,
	})
}
