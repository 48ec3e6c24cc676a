// Package oracle answers, for DRA device selectors, what one Kubernetes release itself answers: it
// compiles an expression as kube-apiserver validates a new (or stored) selector and evaluates it on a
// device as kube-scheduler does, using k8s.io/dynamic-resource-allocation/cel unmodified, at whichever
// version the calling module (../v0.3x) pins. This module declares no requirements of its own.
//
// The apiserver's new-expression environment is the library's own: environment.NewExpressions at
// DefaultCompatibilityVersion(), which k8s.io/component-base of that release puts at its minor - 1.
//
// Protocol: one JSON request per line on stdin, one JSON response per line on stdout, in order.
//
//	{"id": 1, "op": "match", "expr": "...", "env": "new"|"stored", "device": {...}}
//	{"id": 2, "op": "eval",  "expr": "...", "device": {...}}
//	{"id": 3, "op": "version"}
//
// "match" is the admission + scheduling pipeline: the length limit, CompileCELExpression with the
// NewExpressions environment and the cost limit (skipped for env "stored"), then the scheduler's
// compile (StoredExpressions, cel.Cache) and DeviceMatches. The response says at which stage it
// failed ("compile" or "runtime") with upstream's error text, or the bool it matched.
//
// "eval" compiles in the scheduler's StoredExpressions environment without the bool rule and
// returns the value, rendered with its CEL type, so that non-bool expressions can be compared.
//
// The device is a resource.k8s.io/v1 Device's basic fields: {"driver": ..., "attributes":
// {"name": {"int": 1}|{"bool": true}|{"string": "s"}|{"version": "1.2.3"}}, "capacity": {"name":
// {"value": "80Gi"}}, "allowMultipleAllocations": bool}.
package oracle

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sort"
	"strconv"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	resourceapi "k8s.io/api/resource/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type device struct {
	Driver                   string                                                   `json:"driver"`
	AllowMultipleAllocations *bool                                                    `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

type request struct {
	ID     int64   `json:"id"`
	Op     string  `json:"op"`
	Expr   string  `json:"expr"`
	Env    string  `json:"env"`
	Device *device `json:"device"`
	// ConsumableCapacity mirrors the DRAConsumableCapacity gate; absent: the release's default.
	ConsumableCapacity *bool `json:"consumableCapacity"`
}

type response struct {
	ID      int64  `json:"id"`
	Stage   string `json:"stage,omitempty"` // "", "compile" or "runtime"
	Error   string `json:"error,omitempty"`
	Kind    string `json:"kind,omitempty"` // field error kind of a compile error: Invalid, TooLong, Forbidden, InternalError
	Matched *bool  `json:"matched,omitempty"`
	Value   any    `json:"value,omitempty"`
	MaxCost string `json:"maxCost,omitempty"` // the NewExpressions estimate, as a decimal string (uint64)
	Version string `json:"version,omitempty"` // op "version": the DRA library's module version
	// op "version": the NewExpressions environment's compatibility version and the default gate
	Compatibility      string `json:"compatibility,omitempty"`
	ConsumableCapacity *bool  `json:"consumableCapacity,omitempty"`
}

// Defaults are the release's default gates that change the CEL environments.
type Defaults struct {
	ConsumableCapacity bool // DRAConsumableCapacity: alpha and off in 1.34 and 1.35, beta and on from 1.36
}

var defaults Defaults

func consumable(req request) bool {
	if req.ConsumableCapacity != nil {
		return *req.ConsumableCapacity
	}
	return defaults.ConsumableCapacity
}

var caches = map[bool]*dracel.Cache{}

func schedulerCache(consumable bool) *dracel.Cache {
	c, ok := caches[consumable]
	if !ok {
		c = dracel.NewCache(1024, dracel.Features{EnableConsumableCapacity: consumable})
		caches[consumable] = c
	}
	return c
}

func toDRA(d *device) dracel.Device {
	if d == nil {
		d = &device{}
	}
	return dracel.Device{
		Driver:                   d.Driver,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
	}
}

// match runs the apiserver's validation (validateCELSelector in k8s.io/kubernetes
// pkg/apis/resource/validation) and then the scheduler's evaluation.
func match(req request) (resp response) {
	features := dracel.Features{EnableConsumableCapacity: consumable(req)}
	if req.Env != "stored" {
		if len(req.Expr) > resourceapi.CELSelectorExpressionMaxLength {
			return response{Stage: "compile", Kind: "TooLong",
				Error: fmt.Sprintf("Too long: may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength)}
		}
		envType := environment.NewExpressions
		result := dracel.GetCompiler(features).CompileCELExpression(req.Expr, dracel.Options{EnvType: &envType})
		resp.MaxCost = strconv.FormatUint(result.MaxCost, 10)
		if result.Error != nil {
			resp.Stage, resp.Error, resp.Kind = "compile", result.Error.Detail, celErrorKind(result.Error)
			return resp
		}
		if result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
			resp.Stage, resp.Error, resp.Kind = "compile", "too complex, exceeds cost limit", "Forbidden"
			return resp
		}
	}
	compiled := schedulerCache(consumable(req)).GetOrCompile(req.Expr)
	if compiled.Error != nil {
		resp.Stage, resp.Error, resp.Kind = "compile", compiled.Error.Detail, celErrorKind(compiled.Error)
		return resp
	}
	matched, _, err := compiled.DeviceMatches(context.Background(), toDRA(req.Device))
	if err != nil {
		resp.Stage, resp.Error = "runtime", err.Error()
		return resp
	}
	resp.Matched = &matched
	return resp
}

func celErrorKind(err *apiservercel.Error) string {
	switch err.Type {
	case apiservercel.ErrorTypeInvalid:
		return "Invalid"
	case apiservercel.ErrorTypeRequired:
		return "Required"
	default:
		return "InternalError"
	}
}

// storedEnv is the scheduler's environment, taken from a compilation of a trivial selector.
func storedEnv(consumable bool) *cel.Env {
	envType := environment.StoredExpressions
	return dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: consumable}).
		CompileCELExpression("true", dracel.Options{EnvType: &envType, DisableCostEstimation: true}).Environment
}

// defaulting is DeviceMatches' view of device.attributes / device.capacity: an unknown domain
// reads as an empty map.
type defaulting struct {
	traits.Mapper
	empty ref.Val
}

func (m defaulting) Find(key ref.Val) (ref.Val, bool) {
	if v, ok := m.Mapper.Find(key); ok {
		return v, true
	}
	return m.empty, true
}

func (m defaulting) Get(key ref.Val) ref.Val {
	v, _ := m.Find(key)
	return v
}

// eval evaluates any expression on the device, with the variables DeviceMatches builds.
func eval(req request) (resp response) {
	env := storedEnv(consumable(req))
	ast, issues := env.Compile(req.Expr)
	if issues != nil && issues.Err() != nil {
		return response{Stage: "compile", Error: "compilation failed: " + issues.String(), Kind: "Invalid"}
	}
	prog, err := env.Program(ast, cel.CostLimit(resourceapi.CELSelectorExpressionMaxCost),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return response{Stage: "compile", Error: "program instantiation failed: " + err.Error(), Kind: "InternalError"}
	}
	d := toDRA(req.Device)
	attributes := map[string]map[string]any{}
	for name, attr := range d.Attributes {
		domain, id := split(string(name), d.Driver)
		var v any
		switch {
		case attr.IntValue != nil:
			v = *attr.IntValue
		case attr.BoolValue != nil:
			v = *attr.BoolValue
		case attr.StringValue != nil:
			v = *attr.StringValue
		case attr.VersionValue != nil:
			sv, err := semver.Parse(*attr.VersionValue)
			if err != nil {
				return response{Stage: "runtime", Error: fmt.Sprintf("attribute %s: parse semantic version: %v", name, err)}
			}
			v = apiservercel.Semver{Version: sv}
		default:
			return response{Stage: "runtime", Error: fmt.Sprintf("attribute %s: unsupported attribute value", name)}
		}
		if attributes[domain] == nil {
			attributes[domain] = map[string]any{}
		}
		attributes[domain][id] = v
	}
	capacity := map[string]map[string]apiservercel.Quantity{}
	for name, c := range d.Capacity {
		domain, id := split(string(name), d.Driver)
		if capacity[domain] == nil {
			capacity[domain] = map[string]apiservercel.Quantity{}
		}
		value := c.Value
		capacity[domain][id] = apiservercel.Quantity{Quantity: &value}
	}
	adapter := env.CELTypeAdapter()
	empty := adapter.NativeToValue(map[string]any{})
	attrAny, capAny := map[string]any{}, map[string]any{}
	for k, v := range attributes {
		attrAny[k] = v
	}
	for k, v := range capacity {
		capAny[k] = v
	}
	multi := false
	if d.AllowMultipleAllocations != nil {
		multi = *d.AllowMultipleAllocations
	}
	vars := map[string]any{"device": map[string]any{
		"driver":                   d.Driver,
		"allowMultipleAllocations": multi,
		"attributes":               defaulting{adapter.NativeToValue(attrAny).(traits.Mapper), empty},
		"capacity":                 defaulting{adapter.NativeToValue(capAny).(traits.Mapper), empty},
	}}
	out, _, err := prog.ContextEval(context.Background(), vars)
	if err != nil {
		return response{Stage: "runtime", Error: err.Error()}
	}
	return response{Value: render(out)}
}

func split(name, driver string) (string, string) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name[:i], name[i+1:]
		}
	}
	return driver, name
}

// render gives a value with its CEL type: {"type": "int", "value": ...}; doubles, ints and uints
// as strings so that JSON never rounds them.
func render(v ref.Val) any {
	typeName := v.Type().TypeName()
	switch x := v.(type) {
	case types.Bool:
		return map[string]any{"type": "bool", "value": bool(x)}
	case types.Int:
		return map[string]any{"type": "int", "value": strconv.FormatInt(int64(x), 10)}
	case types.Uint:
		return map[string]any{"type": "uint", "value": strconv.FormatUint(uint64(x), 10)}
	case types.Double:
		f := float64(x)
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if math.IsInf(f, 1) {
			s = "+Inf"
		}
		return map[string]any{"type": "double", "value": s}
	case types.String:
		return map[string]any{"type": "string", "value": string(x)}
	case types.Bytes:
		return map[string]any{"type": "bytes", "value": base64.StdEncoding.EncodeToString([]byte(x))}
	case types.Null:
		return map[string]any{"type": "null_type"}
	case *types.Optional:
		if !x.HasValue() {
			return map[string]any{"type": "optional_type"}
		}
		return map[string]any{"type": "optional_type", "value": render(x.GetValue())}
	case *types.Type:
		return map[string]any{"type": "type", "value": x.TypeName()}
	case apiservercel.Quantity:
		return map[string]any{"type": typeName, "value": x.Quantity.String()}
	case apiservercel.Semver:
		return map[string]any{"type": typeName, "value": x.Version.String()}
	case traits.Mapper:
		var entries [][2]any
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			entries = append(entries, [2]any{render(k), render(x.Get(k))})
		}
		sort.SliceStable(entries, func(i, j int) bool {
			a, _ := json.Marshal(entries[i][0])
			b, _ := json.Marshal(entries[j][0])
			return string(a) < string(b)
		})
		return map[string]any{"type": "map", "value": entries}
	case traits.Lister:
		items := []any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			items = append(items, render(it.Next()))
		}
		return map[string]any{"type": "list", "value": items}
	}
	return map[string]any{"type": typeName, "value": fmt.Sprint(v.Value())}
}

func serve(req request) (resp response) {
	defer func() {
		if p := recover(); p != nil {
			resp = response{Stage: "panic", Error: fmt.Sprint(p)}
		}
		resp.ID = req.ID
	}()
	switch req.Op {
	case "match":
		return match(req)
	case "eval":
		return eval(req)
	case "version":
		on := defaults.ConsumableCapacity
		return response{Version: moduleVersion(), Compatibility: environment.DefaultCompatibilityVersion().String(),
			ConsumableCapacity: &on}
	}
	return response{Stage: "protocol", Error: "unknown op " + strconv.Quote(req.Op)}
}

func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/dynamic-resource-allocation" {
				return dep.Path + "@" + dep.Version
			}
		}
	}
	return "unknown"
}

// Main serves requests on stdin until it closes, with the release's default gates.
func Main(d Defaults) {
	defaults = d
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			_ = enc.Encode(response{Stage: "protocol", Error: err.Error()})
		} else {
			_ = enc.Encode(serve(req))
		}
		_ = out.Flush()
	}
	_ = out.Flush()
}
