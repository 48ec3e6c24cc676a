// Command allocator-oracle for k8s.io/dynamic-resource-allocation v0.35.x (Kubernetes 1.35).
package main

import (
	"k8s.io/dynamic-resource-allocation/structured"

	"gpuclaim.test/e2e/oracle/allocator/oracle"
)

// features is v0.35's structured.Features under the protocol's JSON names: DeviceBinding and
// DeviceStatus of v0.34 are one flag now.
type features struct {
	AdminAccess            bool `json:"adminAccess"`
	ConsumableCapacity     bool `json:"consumableCapacity"`
	DeviceBindingAndStatus bool `json:"deviceBindingAndStatus"`
	DeviceTaints           bool `json:"deviceTaints"`
	PartitionableDevices   bool `json:"partitionableDevices"`
	PrioritizedList        bool `json:"prioritizedList"`
}

func (f features) Structured() structured.Features {
	return structured.Features{
		AdminAccess:            f.AdminAccess,
		ConsumableCapacity:     f.ConsumableCapacity,
		DeviceBindingAndStatus: f.DeviceBindingAndStatus,
		DeviceTaints:           f.DeviceTaints,
		PartitionableDevices:   f.PartitionableDevices,
		PrioritizedList:        f.PrioritizedList,
	}
}

// The 1.35 DynamicResources plugin at default gates (k8s.io/kubernetes@v1.35.4
// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:577, AllocatorFeatures):
// DRAAdminAccess and DRAPrioritizedList are beta and on; DeviceBindingAndStatus needs the alpha
// DRADeviceBindingConditions, so it is off and the incubating implementation runs.
func main() {
	oracle.Main(features{AdminAccess: true, PrioritizedList: true})
}
