// Command allocator-oracle runs the upstream DRA structured allocator
// (k8s.io/dynamic-resource-allocation v0.34.4, structured.NewAllocator + Allocate)
// on scenarios read as JSON lines from stdin, and writes one JSON line per scenario
// to stdout. It is a test oracle for gpuclaim's allocator simulation; it is not
// shipped. See docs/dev/allocator-oracle.md for the protocol.
//
// Request (one line):
//
//	{"id": any, "op": "allocate", "features": {...}, "node": {"name":..., "labels":{...}} | null,
//	 "slices": [ResourceSlice], "classes": [DeviceClass], "allocatedDevices": ["driver/pool/device"],
//	 "allocatedClaims": [ResourceClaim], "claims": [ResourceClaim], "timeoutMs": 10000}
//	{"id": any, "op": "nodeSelector", "selector": NodeSelector, "node": {...}}
//	{"id": any, "op": "version"}
//
// Reply (one line): {"id": ..., "status": "allocated"|"unsatisfiable"|"error"|"bad-input"|"panic"|"timeout",
// "results": [AllocationResult], "error": "...", "implementation": "experimental"}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
)

// features mirrors structured.Features with the JSON names the Python client uses.
// A missing "features" object means the 1.34 kube-scheduler's default gates.
type features struct {
	AdminAccess          bool `json:"adminAccess"`
	ConsumableCapacity   bool `json:"consumableCapacity"`
	DeviceBinding        bool `json:"deviceBinding"`
	DeviceStatus         bool `json:"deviceStatus"`
	DeviceTaints         bool `json:"deviceTaints"`
	PartitionableDevices bool `json:"partitionableDevices"`
	PrioritizedList      bool `json:"prioritizedList"`
}

// schedulerDefaults is what the 1.34 DynamicResources plugin passes at default
// gates (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:712):
// DRAAdminAccess, DRAPrioritizedList and DRAResourceClaimDeviceStatus are beta and on.
var schedulerDefaults = features{AdminAccess: true, PrioritizedList: true, DeviceStatus: true}

type nodeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type request struct {
	ID               json.RawMessage              `json:"id"`
	Op               string                       `json:"op"`
	Features         *features                    `json:"features"`
	Node             *nodeSpec                    `json:"node"`
	Slices           []*resourceapi.ResourceSlice `json:"slices"`
	Classes          []*resourceapi.DeviceClass   `json:"classes"`
	AllocatedDevices []string                     `json:"allocatedDevices"`
	AllocatedClaims  []*resourceapi.ResourceClaim `json:"allocatedClaims"`
	Claims           []*resourceapi.ResourceClaim `json:"claims"`
	TimeoutMs        int                          `json:"timeoutMs"`
	Repeat           int                          `json:"repeat"`
	Selector         *v1.NodeSelector             `json:"selector"`
}

type reply struct {
	ID             json.RawMessage                `json:"id"`
	Status         string                         `json:"status"`
	Results        []resourceapi.AllocationResult `json:"results,omitempty"`
	Error          string                         `json:"error,omitempty"`
	Implementation string                         `json:"implementation,omitempty"`
	Match          *bool                          `json:"match,omitempty"`
	Version        string                         `json:"version,omitempty"`
	// Outcomes: with "repeat": N > 1, every distinct outcome of N Allocate calls. The
	// experimental allocator gathers pools into a Go map (pools_experimental.go:55) and
	// visits them in map order, so with several pools the pick can differ between calls.
	Outcomes []outcome `json:"outcomes,omitempty"`
}

type outcome struct {
	Status  string                         `json:"status"`
	Results []resourceapi.AllocationResult `json:"results,omitempty"`
	Error   string                         `json:"error,omitempty"`
}

// classLister answers like the scheduler's informer lister: a missing class is
// the apiserver's NotFound error for resource.k8s.io deviceclass.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclass"}, name)
}

// celCache is shared across requests, as the scheduler shares its own across
// scheduling cycles; one per ConsumableCapacity setting because the compiler depends on it.
var celCaches = map[bool]*cel.Cache{}

func celCache(consumable bool) *cel.Cache {
	c, ok := celCaches[consumable]
	if !ok {
		// dynamicresources.go:220 uses 10 entries; a larger cache changes no result, only speed.
		c = cel.NewCache(1000, cel.Features{EnableConsumableCapacity: consumable})
		celCaches[consumable] = c
	}
	return c
}

func (f features) toStructured() structured.Features {
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

// allocatedState is what the scheduler's allocated-devices tracker builds from
// the claims' status.allocation (dynamicresources/allocateddevices.go:41,
// foreachAllocatedDevice): adminAccess results are not considered allocated;
// with ConsumableCapacity, results with a shareID are shared, not dedicated.
func allocatedState(req *request, fts features) (structured.AllocatedState, error) {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, text := range req.AllocatedDevices {
		parts := strings.Split(text, "/")
		if len(parts) != 3 {
			return state, fmt.Errorf("allocatedDevices: %q is not driver/pool/device", text)
		}
		state.AllocatedDevices.Insert(structured.MakeDeviceID(parts[0], parts[1], parts[2]))
	}
	for _, claim := range req.AllocatedClaims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if fts.ConsumableCapacity && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state, nil
}

func makeNode(spec *nodeSpec) *v1.Node {
	if spec == nil {
		return nil
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: spec.Labels}}
}

// implementationOf names the internal package of the allocator NewAllocator chose
// (stable, incubating or experimental), read from the concrete type.
func implementationOf(a structured.Allocator) string {
	t := reflect.TypeOf(a)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	path := t.PkgPath()
	return path[strings.LastIndex(path, "/")+1:]
}

func allocate(req *request) (out reply) {
	fts := schedulerDefaults
	if req.Features != nil {
		fts = *req.Features
	}
	ctx := context.Background()
	timeout := 10 * time.Second // the scheduler's default DRA filter timeout (1.34: 10s)
	if req.TimeoutMs > 0 {
		timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	state, err := allocatedState(req, fts)
	if err != nil {
		return reply{Status: "bad-input", Error: err.Error()}
	}
	classes := classLister{}
	for _, c := range req.Classes {
		classes[c.Name] = c
	}
	allocator, err := structured.NewAllocator(ctx, fts.toStructured(), state, classes, req.Slices, celCache(fts.ConsumableCapacity))
	if err != nil {
		return reply{Status: "error", Error: err.Error()}
	}
	out.Implementation = implementationOf(allocator)
	first := runOnce(ctx, allocator, req)
	out.Status, out.Results, out.Error = first.Status, first.Results, first.Error
	if req.Repeat > 1 {
		seen := map[string]bool{}
		for i := 0; i < req.Repeat; i++ {
			o := first
			if i > 0 {
				o = runOnce(ctx, allocator, req)
			}
			key, _ := json.Marshal(o)
			if !seen[string(key)] {
				seen[string(key)] = true
				out.Outcomes = append(out.Outcomes, o)
			}
		}
	}
	return out
}

func runOnce(ctx context.Context, allocator structured.Allocator, req *request) outcome {
	// Allocate must not modify its inputs; each call gets the same objects.
	results, err := allocator.Allocate(ctx, makeNode(req.Node), req.Claims)
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		return outcome{Status: "timeout", Error: err.Error()}
	case err != nil:
		return outcome{Status: "error", Error: err.Error()}
	case results == nil && len(req.Claims) > 0:
		return outcome{Status: "unsatisfiable"}
	default:
		return outcome{Status: "allocated", Results: results}
	}
}

// nodeSelectorMatch is the scheduler Filter's check that an allocated claim's
// status.allocation.nodeSelector admits the node (dynamicresources.go:591, :947).
func nodeSelectorMatch(req *request) reply {
	if req.Selector == nil || req.Node == nil {
		return reply{Status: "bad-input", Error: "nodeSelector needs selector and node"}
	}
	selector, err := nodeaffinity.NewNodeSelector(req.Selector)
	if err != nil {
		return reply{Status: "error", Error: err.Error()}
	}
	match := selector.Match(makeNode(req.Node))
	return reply{Status: "ok", Match: &match}
}

func handle(line []byte) (out reply) {
	var req request
	defer func() {
		if p := recover(); p != nil {
			out = reply{ID: req.ID, Status: "panic", Error: fmt.Sprintf("%v\n%s", p, debug.Stack())}
		}
	}()
	// Case-sensitive and strict, as the apiserver decodes: a misspelt field in a
	// generated object is an input error, not a silently different scenario.
	strictErrs, err := sigsjson.UnmarshalStrict(line, &req)
	if err != nil {
		return reply{Status: "bad-input", Error: err.Error()}
	}
	if len(strictErrs) > 0 {
		return reply{ID: req.ID, Status: "bad-input", Error: errors.Join(strictErrs...).Error()}
	}
	switch req.Op {
	case "", "allocate":
		out = allocate(&req)
	case "nodeSelector":
		out = nodeSelectorMatch(&req)
	case "version":
		out = reply{Status: "ok", Version: moduleVersion()}
	default:
		out = reply{Status: "bad-input", Error: fmt.Sprintf("op: unsupported value %q", req.Op)}
	}
	out.ID = req.ID
	return out
}

func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/dynamic-resource-allocation" {
			return dep.Path + "@" + dep.Version
		}
	}
	return "unknown"
}

func main() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if encErr := enc.Encode(handle(line)); encErr != nil {
				fmt.Fprintln(os.Stderr, "allocator-oracle: encode:", encErr)
				os.Exit(1)
			}
			if flushErr := out.Flush(); flushErr != nil {
				os.Exit(1)
			}
		}
		if err != nil {
			return
		}
	}
}
