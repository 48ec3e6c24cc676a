// Package oracle runs the upstream DRA structured allocator (structured.NewAllocator + Allocate
// of whichever k8s.io/dynamic-resource-allocation version the calling module pins) on scenarios read
// as JSON lines from stdin, and writes one JSON line per scenario to stdout. It is a test oracle for
// gpuclaim's allocator simulation; it is not shipped. See docs/dev/allocator-oracle.md for the protocol.
//
// This module declares no requirements of its own: each version module under ../v0.3x requires its
// DRA library version and replaces this one with the local folder, so the same code is compiled
// against each version. What the versions' Go APIs do not share (the fields of structured.Features,
// the features kube-scheduler passes at default gates) comes in through Features.
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
// "results": [AllocationResult], "error": "...", "implementation": "incubating"}.
package oracle

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

// Features is one library version's structured.Features with the JSON names the Python client
// uses (the fields differ between versions: DeviceBinding and DeviceStatus became
// DeviceBindingAndStatus in v0.35, v0.37 added five more). Each version module defines it.
type Features interface {
	Structured() structured.Features
}

type nodeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type request struct {
	ID               json.RawMessage              `json:"id"`
	Op               string                       `json:"op"`
	Features         json.RawMessage              `json:"features"`
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
	// Scheduler: the features this release's kube-scheduler passes at default gates (op "version").
	Scheduler any `json:"scheduler,omitempty"`
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

// allocatedState is what the scheduler's allocated-devices tracker builds from
// the claims' status.allocation (dynamicresources/allocateddevices.go:41,
// foreachAllocatedDevice): adminAccess results are not considered allocated;
// with ConsumableCapacity, results with a shareID are shared, not dedicated.
func allocatedState(req *request, fts structured.Features) (structured.AllocatedState, error) {
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

// features decodes the request's "features" strictly into this version's set; without one, the
// scheduler's defaults.
func features[F Features](req *request, scheduler F) (structured.Features, error) {
	if len(req.Features) == 0 || string(req.Features) == "null" {
		return scheduler.Structured(), nil
	}
	var fts F
	if err := strict(req.Features, &fts); err != nil {
		return structured.Features{}, fmt.Errorf("features: %w", err)
	}
	return fts.Structured(), nil
}

func allocate[F Features](req *request, scheduler F) (out reply) {
	fts, err := features(req, scheduler)
	if err != nil {
		return reply{Status: "bad-input", Error: err.Error()}
	}
	ctx := context.Background()
	timeout := 10 * time.Second // the scheduler's default DRA filter timeout (10s in 1.34-1.37)
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
	allocator, err := structured.NewAllocator(ctx, fts, state, classes, req.Slices, celCache(fts.ConsumableCapacity))
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

func handle[F Features](line []byte, scheduler F) (out reply) {
	var req request
	defer func() {
		if p := recover(); p != nil {
			out = reply{ID: req.ID, Status: "panic", Error: fmt.Sprintf("%v\n%s", p, debug.Stack())}
		}
	}()
	// Case-sensitive and strict, as the apiserver decodes: a misspelt field in a
	// generated object is an input error, not a silently different scenario.
	if err := strict(line, &req); err != nil {
		return reply{ID: req.ID, Status: "bad-input", Error: err.Error()}
	}
	switch req.Op {
	case "", "allocate":
		out = allocate(&req, scheduler)
	case "nodeSelector":
		out = nodeSelectorMatch(&req)
	case "version":
		out = reply{Status: "ok", Version: moduleVersion(), Scheduler: scheduler}
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

// strict decodes case-sensitively and refuses unknown fields, as the apiserver decodes.
func strict(data []byte, into any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(data, into)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// Main serves requests on stdin until it closes; scheduler is what this release's kube-scheduler
// passes to NewAllocator at default gates (used when a request names no features).
func Main[F Features](scheduler F) {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if encErr := enc.Encode(handle(line, scheduler)); encErr != nil {
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
