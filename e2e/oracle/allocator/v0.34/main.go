// Command allocator-oracle for k8s.io/dynamic-resource-allocation v0.34.x (Kubernetes 1.34).
package main

import (
	"k8s.io/dynamic-resource-allocation/structured"

	"gpuclaim.test/e2e/oracle/allocator/oracle"
)

// features is v0.34's structured.Features under the protocol's JSON names.
type features struct {
	AdminAccess          bool `json:"adminAccess"`
	ConsumableCapacity   bool `json:"consumableCapacity"`
	DeviceBinding        bool `json:"deviceBinding"`
	DeviceStatus         bool `json:"deviceStatus"`
	DeviceTaints         bool `json:"deviceTaints"`
	PartitionableDevices bool `json:"partitionableDevices"`
	PrioritizedList      bool `json:"prioritizedList"`
}

func (f features) Structured() structured.Features {
	return structured.Features{
		AdminAccess:          f.AdminAccess,
		ConsumableCapacity:   f.ConsumableCapacity,
		DeviceBinding:        f.DeviceBinding,
		DeviceStatus:         f.DeviceStatus,
		DeviceTaints:         f.DeviceTaints,
		PartitionableDevices: f.PartitionableDevices,
		PrioritizedList:      f.PrioritizedList,
	}
}

// The 1.34 DynamicResources plugin at default gates (k8s.io/kubernetes@v1.34.4
// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:712): DRAAdminAccess,
// DRAPrioritizedList and DRAResourceClaimDeviceStatus are beta and on; only the experimental
// implementation supports DeviceStatus, so that is what runs.
func main() {
	oracle.Main(features{AdminAccess: true, PrioritizedList: true, DeviceStatus: true})
}
