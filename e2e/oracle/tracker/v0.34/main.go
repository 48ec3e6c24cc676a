// Command tracker-oracle runs kube-scheduler 1.34's ResourceSlice tracker
// (k8s.io/dynamic-resource-allocation v0.34.x resourceslice/tracker) on the objects of one JSON line
// and answers with the slices as the tracker hands them to the allocator: each device's taints
// followed by those of every DeviceTaintRule (v1alpha3) that selects it, by driver, pool, device,
// deviceClassName and CEL selectors. A test oracle for gpuclaim.dra.taints on 1.34; not shipped.
//
// Request (one line): {"id": any, "slices": [ResourceSlice], "rules": [v1alpha3 DeviceTaintRule],
// "classes": [DeviceClass]}. Reply: {"id": ..., "status": "ok"|"bad-input"|"error",
// "slices": [ResourceSlice] (the patched ones, by name), "missing": ["slice name"], "error": "..."}.
// "missing" names slices the tracker did not hand on (applyPatches failed for them: a rule's
// selector does not compile).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	resourcealphaapi "k8s.io/api/resource/v1alpha3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	sigsjson "sigs.k8s.io/json"
)

type request struct {
	ID      json.RawMessage                     `json:"id"`
	Slices  []*resourceapi.ResourceSlice        `json:"slices"`
	Rules   []*resourcealphaapi.DeviceTaintRule `json:"rules"`
	Classes []*resourceapi.DeviceClass          `json:"classes"`
}

type reply struct {
	ID      json.RawMessage              `json:"id"`
	Status  string                       `json:"status"`
	Slices  []*resourceapi.ResourceSlice `json:"slices,omitempty"`
	Missing []string                     `json:"missing,omitempty"`
	Error   string                       `json:"error,omitempty"`
}

// patch feeds the objects to a fake clientset, starts the tracker on its informers as the 1.34
// scheduler does with DRADeviceTaints on (K34/pkg/scheduler/scheduler.go), waits until it has
// processed every object, and lists its patched slices.
func patch(req *request) reply {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var objs []runtime.Object
	for _, s := range req.Slices {
		objs = append(objs, s)
	}
	for _, r := range req.Rules {
		objs = append(objs, r)
	}
	for _, c := range req.Classes {
		objs = append(objs, c)
	}
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	classes := factory.Resource().V1().DeviceClasses().Informer()
	slices := factory.Resource().V1().ResourceSlices().Informer()
	rules := factory.Resource().V1alpha3().DeviceTaintRules().Informer()
	t, err := tracker.StartTracker(ctx, tracker.Options{
		EnableDeviceTaints: true,
		SliceInformer:      factory.Resource().V1().ResourceSlices(),
		TaintInformer:      factory.Resource().V1alpha3().DeviceTaintRules(),
		ClassInformer:      factory.Resource().V1().DeviceClasses(),
	})
	if err != nil {
		return reply{Status: "error", Error: err.Error()}
	}
	defer t.Stop()
	// One informer after the other: classes, slices, then rules. The tracker's handlers of different
	// informers run concurrently and each writes the patched slice it computed, so a slice's own add
	// could overwrite what a rule's add computed a moment later; in a cluster the next event heals it,
	// here the answer must be the settled state.
	for _, inf := range []cache.SharedIndexInformer{classes, slices, rules} {
		go inf.Run(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return reply{Status: "error", Error: "an informer did not sync"}
		}
		if inf == slices { // and the tracker has handled every slice's add before any rule arrives
			handled := func() bool {
				patched, _ := t.ListPatchedResourceSlices()
				return len(patched) == len(req.Slices)
			}
			if !cache.WaitForCacheSync(ctx.Done(), handled) {
				return reply{Status: "error", Error: "the tracker did not take every slice"}
			}
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), t.HasSynced) {
		return reply{Status: "error", Error: "the tracker did not sync"}
	}
	patched, err := t.ListPatchedResourceSlices()
	if err != nil {
		return reply{Status: "error", Error: err.Error()}
	}
	sort.Slice(patched, func(i, j int) bool { return patched[i].Name < patched[j].Name })
	seen := map[string]bool{}
	for _, s := range patched {
		seen[s.Name] = true
	}
	out := reply{Status: "ok", Slices: patched}
	for _, s := range req.Slices {
		if !seen[s.Name] {
			out.Missing = append(out.Missing, s.Name)
		}
	}
	return out
}

func handle(line []byte) reply {
	var req request
	strictErrs, err := sigsjson.UnmarshalStrict(line, &req)
	if err == nil {
		err = errors.Join(strictErrs...)
	}
	if err != nil {
		return reply{ID: req.ID, Status: "bad-input", Error: err.Error()}
	}
	out := patch(&req)
	out.ID = req.ID
	return out
}

func main() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if encErr := enc.Encode(handle(line)); encErr != nil {
				fmt.Fprintln(os.Stderr, "tracker-oracle: encode:", encErr)
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
