package fuzz

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
	"github.com/deckhand-dev/deckhand/test/typedinject"
)

// FuzzFastPathMatchesTypedPatch is the pod webhook's fast path (its own pod
// JSON reader and patch writer, internal/inject/podjson) against the ordinary way:
// decode the pod into a corev1.Pod, apply the same injection with typed
// code (test/typedinject), and let controller-runtime's
// admission.PatchResponseFromRaw diff the result with the request. Both
// patches, applied to the pod the API server sent, must give the same pod.
//
// The pod body is what the API server could send: UTF-8, no duplicate
// keys, metadata and spec objects; fields corev1 does not know are welcome
// (a newer API server sends them), and keys are matched case-sensitively,
// as the API server does.
func FuzzFastPathMatchesTypedPatch(f *testing.F) {
	pods := []string{
		// unknown fields at every level, existing volumes and pull secrets
		`{"metadata":{"name":"web-0","labels":{"app":"web"},"futureMeta":1},"spec":{"containers":[{"name":"app","image":"nginx","env":[{"name":"TZ","value":"UTC","futureEnv":true}],"volumeMounts":[{"name":"data","mountPath":"/data"},{"name":"logs","mountPath":"/var/log"}],"futureContainer":{"x":[1]}}],"volumes":[{"name":"data","emptyDir":{}},{"name":"logs","emptyDir":{}}],"imagePullSecrets":[{"name":"logcred"}],"futureSpec":"x"},"status":{"phase":"Pending"},"futureTop":null}`,
		// init containers, a native sidecar of the pod's own, annotations
		`{"metadata":{"generateName":"web-","labels":{"app":"web"},"annotations":{"a/b~c":"x"}},"spec":{"initContainers":[{"name":"init","image":"busybox","env":[{"name":"TZ","value":"CET"}]},{"name":"own-native","image":"n","restartPolicy":"Always"}],"containers":[{"name":"app","image":"nginx"}]}}`,
		// already injected: the record gives the pod's "log" to logging
		`{"metadata":{"name":"again","labels":{"app":"web"},"annotations":{"apps.deckhand.dev/sidecarsets":"logging","apps.deckhand.dev/sidecarset-hash":"{\"logging\":{\"hash\":\"old\",\"containers\":[\"log\"]}}","apps.deckhand.dev/sidecarset-hash-without-image":"{\"logging\":{\"hash\":\"old\"}}"}},"spec":{"containers":[{"name":"log","image":"fluent-bit:2"},{"name":"app","image":"x"}]}}`,
		// a container of a sidecar's name the pod brought itself
		`{"metadata":{"name":"clash","labels":{"app":"web"}},"spec":{"containers":[{"name":"after","image":"mine"},{"name":"app","image":"x"}]}}`,
		// empty and null lists
		`{"metadata":{"name":"nulls","labels":{"app":"web"},"annotations":null},"spec":{"containers":[],"volumes":null,"initContainers":null,"imagePullSecrets":[]}}`,
		`{"metadata":{"name":"skip","labels":{"app":"web"},"annotations":{"apps.deckhand.dev/sidecarset-skip-injection":"true"}},"spec":{"containers":[{"name":"app","image":"x"}]}}`,
		// a label and an annotation naming source containers, volume devices
		`{"metadata":{"name":"devices","labels":{"app":"web","main":"app"},"annotations":{"example.com/src":"init"}},"spec":{"initContainers":[{"name":"init","image":"i","env":[{"name":"MODE","value":"m"}]}],"containers":[{"name":"app","image":"x","env":[{"name":"LANG","value":"C"},{"name":"TZ","value":"UTC"}],"volumeDevices":[{"name":"raw","devicePath":"/dev/own"},{"name":"blk","devicePath":"/dev/blk"}]}]}}`,
		// app containers with resources for resourcesPolicy
		`{"metadata":{"name":"big","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"x","resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":{"cpu":"1"}}},{"name":"app-2","image":"y","resources":{"limits":{"cpu":"500m","memory":"2Gi"}}}]}}`,
		// annotations patchPodMetadata retains, overwrites and merges into
		`{"metadata":{"name":"annotated","labels":{"app":"web","example.com/l":"mine","example.com/w":"mine"},"annotations":{"example.com/r":"mine","example.com/j":"{\"a\":1,\"b\":{\"d\":2,\"f\":3}}","other.io/x":"y"}},"spec":{"containers":[{"name":"app","image":"x"}]}}`,
		// escapes, and keys that differ only in case
		`{"metadata":{"name":"u","labels":{"app":"web"}},"Spec":{"containers":[]},"spec":{"containers":[{"name":"app","image":"x","env":[{"name":"\u00e9\"\\","value":"\ud83d\ude00"},{"name":"TZ","value":"a\u2028b"}]}]}}`,
	}
	sets := []string{
		`{"metadata":{"name":"logging"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"fluent-bit:3","env":[{"name":"TZ","value":"none"}],"volumeMounts":[{"name":"buf","mountPath":"/data"}],"shareVolumePolicy":{"type":"enabled"},"transferEnv":[{"sourceContainerName":"app","envName":"TZ"},{"sourceContainerName":"init","envName":"TZ"}]}],"volumes":[{"name":"buf","emptyDir":{}},{"name":"data","emptyDir":{}}],"imagePullSecrets":[{"name":"logcred"},{"name":"other"}]}}`,
		`{"metadata":{"name":"mesh"},"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"Exists"}]},"namespaceSelector":{"matchLabels":{"env":"fuzz"}},"initContainers":[{"name":"proxy-init","image":"mesh/init:1"},{"name":"proxy","image":"mesh/proxy:1","restartPolicy":"Always","podInjectPolicy":"AfterAppContainer"}],"containers":[{"name":"after","image":"x:1","podInjectPolicy":"AfterAppContainer"},{"name":"first","image":"y:1"}]}}`,
		`{"metadata":{"name":"scoped"},"spec":{"namespace":"fz","selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"a:1"}],"volumes":[{"name":"buf","emptyDir":{}}]}}`,
		// HotUpgrade: two containers per sidecar, version variables after
		// the sidecar's own env and before transferred ones, annotations
		hotUpgradeSeedSet,
		// envNames, a source container named by a label, shared volume devices
		`{"metadata":{"name":"transfer"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"t","image":"t:1","env":[{"name":"TZ","value":"own"}],"volumeDevices":[{"name":"raw","devicePath":"/dev/own"}],"shareVolumeDevicePolicy":{"type":"enabled"},"transferEnv":[{"sourceContainerNameFrom":{"fieldRef":{"fieldPath":"metadata.labels['main']"}},"envNames":["TZ","LANG","NONE"]},{"sourceContainerNameFrom":{"fieldRef":{"fieldPath":"metadata.annotations['example.com/src']"}},"envName":"MODE"}]}]}}`,
		// resourcesPolicy over the app containers' resources
		`{"metadata":{"name":"sized"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"sized","image":"s:1","resourcesPolicy":{"targetContainerMode":"max","targetContainersNameRegex":"^app","resourceExpr":{"limits":{"cpu":"cpu * 0.5","memory":"max(memory * 0.25, quantity('64Mi'))"},"requests":{"cpu":"max(cpu * 0.1, quantity('10m'))"}}}}]}}`,
		// patchPodMetadata, every policy, over annotations the pod has
		`{"metadata":{"name":"meta"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"m","image":"m:1"}],"patchPodMetadata":[{"annotations":{"example.com/r":"retained","team.io/over":"over"},"labels":{"example.com/l":"retained","example.com/n":"new"}},{"patchPolicy":"Overwrite","labels":{"example.com/w":"written"}},{"patchPolicy":"Overwrite","annotations":{"team.io/over":"written","example.com/o":"\u003c\"x"}},{"patchPolicy":"MergePatchJson","annotations":{"example.com/j":"{\"b\":{\"c\":1.50,\"d\":null},\"e\":[1]}"}}]}}`,
	}
	for i, p := range pods {
		f.Add([]byte(p), []byte(sets[i%len(sets)]), []byte(sets[(i+1)%len(sets)]))
	}
	f.Fuzz(func(t *testing.T, podRaw, setRaw1, setRaw2 []byte) {
		if !apiServerLike(podRaw) {
			return
		}
		l := fuzzLister(t, setRaw1, setRaw2)
		if l == nil {
			return
		}
		fast := fastPathPod(t, l, podRaw)
		typed := typedPathPod(t, l, podRaw)
		if typed == nil {
			return
		}
		if !apiequality.Semantic.DeepEqual(fast, typed) {
			f, _ := json.Marshal(fast)
			g, _ := json.Marshal(typed)
			t.Fatalf("the fast path and the typed path disagree\npod:   %s\nfast:  %s\ntyped: %s", podRaw, f, g)
		}
	})
}

// apiServerLike reports whether raw could come from the API server: UTF-8,
// an object with metadata and spec objects, and no duplicate keys in what a
// corev1.Pod decodes.
func apiServerLike(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return false
	}
	for _, k := range []string{"metadata", "spec"} {
		if v := top[k]; len(v) == 0 || v[0] != '{' {
			return false
		}
	}
	strict, err := kjson.UnmarshalStrict(raw, &corev1.Pod{}, kjson.DisallowDuplicateFields)
	return err == nil && len(strict) == 0
}

// fuzzLister builds a Lister of the valid SidecarSets among the raw ones (nil
// if none), as the informer cache would hold them.
func fuzzLister(t *testing.T, raws ...[]byte) *sidecarcontrol.Lister {
	ss := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	v := &sidecarsetwebhook.Validator{MetadataAllowlist: fuzzMetadataAllowlist, LabelAllowlist: fuzzMetadataAllowlist}
	for i, raw := range raws {
		s := &deckhandv1alpha1.SidecarSet{}
		if json.Unmarshal(raw, s) != nil {
			continue
		}
		if s.Name == "" {
			s.Name = fmt.Sprintf("fuzz-%d", i)
		}
		if _, exists, _ := ss.GetByKey(s.Name); exists {
			s.Name += fmt.Sprintf("-%d", i)
		}
		s.UID, s.Generation = types.UID(fmt.Sprintf("uid-%d", i)), 1
		sidecarsetwebhook.SetDefaults(s)
		if _, err := v.Validate(context.Background(), nil, s); err != nil {
			continue
		}
		if err := ss.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(ss.List()) == 0 {
		return nil
	}
	nsIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	_ = nsIdx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fuzzNamespace, Labels: map[string]string{"env": "fuzz"}}})
	return sidecarcontrol.NewLister(ss, nsIdx, sidecarcontrol.Options{
		PodMetadata: sidecarcontrol.PodMetadataAllowlists{Annotations: fuzzMetadataAllowlist, Labels: fuzzMetadataAllowlist},
	})
}

// fuzzMetadataAllowlist allows the patchPodMetadata keys of the seeds but
// not every key, so that filtering is exercised too; it serves as the label
// allowlist as well.
var fuzzMetadataAllowlist = func() sidecarcontrol.MetadataAllowlist {
	a, err := sidecarcontrol.ParseMetadataAllowlist([]string{"example.com/*", "team.io/over"})
	if err != nil {
		panic(err)
	}
	return a
}()

// fastPathPod is the pod the production handler's patch makes of raw.
func fastPathPod(t *testing.T, l *sidecarcontrol.Lister, raw []byte) *corev1.Pod {
	resp := (&inject.Handler{Lister: l}).Handle(context.Background(), podCreate(raw))
	if !resp.Allowed {
		t.Fatalf("a pod the API server could send was refused: %+v\npod: %s", resp.Result, raw)
	}
	return decodePod(t, applyResponse(t, raw, resp))
}

// typedPathPod is the pod that typed decoding, typedinject.Inject and
// admission.PatchResponseFromRaw make of raw (nil if raw is no pod).
func typedPathPod(t *testing.T, l *sidecarcontrol.Lister, raw []byte) *corev1.Pod {
	pod := &corev1.Pod{}
	if kjson.UnmarshalCaseSensitivePreserveInts(raw, pod) != nil {
		return nil
	}
	typedinject.Inject(l, fuzzNamespace, pod)
	mutated, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	resp := admission.PatchResponseFromRaw(raw, mutated)
	if !resp.Allowed {
		t.Fatalf("controller-runtime could not diff the pods: %+v", resp.Result)
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("controller-runtime's patch does not decode: %v\n%s", err, ops)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("controller-runtime's patch does not apply: %v\npod:   %s\npatch: %s", err, raw, ops)
	}
	return decodePod(t, out)
}

func decodePod(t *testing.T, raw []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		t.Fatalf("the patched pod does not decode: %v\n%s", err, raw)
	}
	return pod
}

// TestFastPathSeedsInject makes sure the differential is not vacuous: the
// seeds inject sidecars, transfer env, share mounts and record revisions.
func TestFastPathSeedsInject(t *testing.T) {
	l := fuzzLister(t, []byte(`{"metadata":{"name":"logging"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"fluent-bit:3","shareVolumePolicy":{"type":"enabled"},"transferEnv":[{"sourceContainerName":"app","envName":"TZ"}]}],"volumes":[{"name":"buf","emptyDir":{}}]}}`))
	raw := []byte(`{"metadata":{"name":"web-0","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx","env":[{"name":"TZ","value":"UTC"}],"volumeMounts":[{"name":"data","mountPath":"/data"}]}],"volumes":[{"name":"data","emptyDir":{}}]}}`)
	fast, typed := fastPathPod(t, l, raw), typedPathPod(t, l, raw)
	if !apiequality.Semantic.DeepEqual(fast, typed) {
		t.Fatalf("the paths disagree:\nfast  %+v\ntyped %+v", fast, typed)
	}
	c := fast.Spec.Containers
	if len(c) != 2 || c[0].Name != "log" || len(c[0].Env) != 1 || c[0].Env[0].Value != "UTC" || len(c[0].VolumeMounts) != 1 ||
		len(fast.Spec.Volumes) != 2 || !sidecarcontrol.ReadPodRecord(fast.Annotations).Has("logging") {
		t.Fatalf("unexpected injection: %+v", fast)
	}
}

// hotUpgradeSeedSet has a HotUpgrade sidecar that transfers env and shares
// volumes, beside a cold one.
const hotUpgradeSeedSet = `{"metadata":{"name":"hot","generation":4},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"mesh","image":"mesh:2","env":[{"name":"A","value":"1"}],"shareVolumePolicy":{"type":"enabled"},"transferEnv":[{"sourceContainerName":"app","envName":"TZ"}],"upgradeStrategy":{"upgradeType":"HotUpgrade","hotUpgradeEmptyImage":"mesh-empty:1"}},{"name":"log","image":"log:1","podInjectPolicy":"AfterAppContainer"}]}}`

// TestFastPathHotUpgradeSeedInjects makes sure the differential covers hot
// upgrades: the seed injects both containers of the HotUpgrade sidecar and
// the annotations, the same way on both paths.
func TestFastPathHotUpgradeSeedInjects(t *testing.T) {
	l := fuzzLister(t, []byte(hotUpgradeSeedSet))
	raw := []byte(`{"metadata":{"name":"web-0","labels":{"app":"web"},"annotations":{"apps.deckhand.dev/sidecarset-working-hotupgrade-container":"{\"other\":\"other-2\"}"}},"spec":{"containers":[{"name":"app","image":"nginx","env":[{"name":"TZ","value":"UTC"}],"volumeMounts":[{"name":"data","mountPath":"/data"}]}],"volumes":[{"name":"data","emptyDir":{}}]}}`)
	fast, typed := fastPathPod(t, l, raw), typedPathPod(t, l, raw)
	if !apiequality.Semantic.DeepEqual(fast, typed) {
		f, _ := json.Marshal(fast)
		g, _ := json.Marshal(typed)
		t.Fatalf("the paths disagree:\nfast  %s\ntyped %s", f, g)
	}
	c := fast.Spec.Containers
	if len(c) != 4 || c[0].Name != "mesh-1" || c[0].Image != "mesh:2" || c[1].Name != "mesh-2" || c[1].Image != "mesh-empty:1" ||
		len(c[1].Env) != 4 || c[1].Env[3].Value != "UTC" || len(c[1].VolumeMounts) != 1 {
		t.Fatalf("unexpected injection: %+v", c)
	}
	if got := fast.Annotations["apps.deckhand.dev/sidecarset-working-hotupgrade-container"]; got != `{"mesh":"mesh-1","other":"other-2"}` {
		t.Errorf("working annotation %s", got)
	}
	if got := fast.Annotations["version.sidecarset.apps.deckhand.dev/mesh-1"]; got != "1" {
		t.Errorf("version of mesh-1 %q, want the generation", got)
	}

	// Two SidecarSets with HotUpgrade sidecars on one pod without a record,
	// and one on a pod that has one already: the working containers merge.
	second := []byte(`{"metadata":{"name":"hot2"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"dns","image":"dns:1","upgradeStrategy":{"upgradeType":"HotUpgrade","hotUpgradeEmptyImage":"dns-empty:1"}}]}}`)
	for _, l := range []*sidecarcontrol.Lister{fuzzLister(t, []byte(hotUpgradeSeedSet), second), fuzzLister(t, second)} {
		for _, raw := range [][]byte{[]byte(`{"metadata":{"name":"web-1","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`), raw} {
			fast, typed := fastPathPod(t, l, raw), typedPathPod(t, l, raw)
			if !apiequality.Semantic.DeepEqual(fast, typed) {
				f, _ := json.Marshal(fast)
				g, _ := json.Marshal(typed)
				t.Fatalf("the paths disagree:\nfast  %s\ntyped %s", f, g)
			}
		}
	}
}

// TestFastPathSeedsPatchMetadata makes sure the differential covers
// patchPodMetadata: the seed retains, overwrites, merges and filters.
func TestFastPathSeedsPatchMetadata(t *testing.T) {
	l := fuzzLister(t, []byte(`{"metadata":{"name":"meta"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"m","image":"m:1"}],"patchPodMetadata":[{"annotations":{"example.com/r":"theirs","example.com/new":"n"}},{"patchPolicy":"Overwrite","annotations":{"team.io/over":"written"}},{"patchPolicy":"MergePatchJson","annotations":{"example.com/j":"{\"b\":{\"d\":null},\"e\":1}"}}]}}`))
	if l == nil {
		t.Fatal("the seed SidecarSet is invalid")
	}
	raw := []byte(`{"metadata":{"name":"web-0","labels":{"app":"web"},"annotations":{"example.com/r":"mine","team.io/over":"old","example.com/j":"{\"a\":1,\"b\":{\"d\":2,\"f\":3}}"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`)
	fast, typed := fastPathPod(t, l, raw), typedPathPod(t, l, raw)
	if !apiequality.Semantic.DeepEqual(fast, typed) {
		t.Fatalf("the paths disagree:\nfast  %+v\ntyped %+v", fast.Annotations, typed.Annotations)
	}
	want := map[string]string{"example.com/r": "mine", "example.com/new": "n", "team.io/over": "written", "example.com/j": `{"a":1,"b":{"f":3},"e":1}`}
	for k, v := range want {
		if fast.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, fast.Annotations[k], v)
		}
	}
}

// TestFastPathSeedsTransfer makes sure the differential covers envNames,
// sourceContainerNameFrom and shareVolumeDevicePolicy. The sidecar's own TZ
// wins over the app's transferred one.
func TestFastPathSeedsTransfer(t *testing.T) {
	l := fuzzLister(t, []byte(`{"metadata":{"name":"transfer"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"t","image":"t:1","env":[{"name":"TZ","value":"own"}],"volumeDevices":[{"name":"raw","devicePath":"/dev/own"}],"shareVolumeDevicePolicy":{"type":"enabled"},"transferEnv":[{"sourceContainerNameFrom":{"fieldRef":{"fieldPath":"metadata.labels['main']"}},"envNames":["TZ","LANG","NONE"]},{"sourceContainerNameFrom":{"fieldRef":{"fieldPath":"metadata.annotations['example.com/src']"}},"envName":"MODE"}]}]}}`))
	if l == nil {
		t.Fatal("the seed SidecarSet is invalid")
	}
	raw := []byte(`{"metadata":{"name":"devices","labels":{"app":"web","main":"app"},"annotations":{"example.com/src":"init"}},"spec":{"initContainers":[{"name":"init","image":"i","env":[{"name":"MODE","value":"m"}]}],"containers":[{"name":"app","image":"x","env":[{"name":"LANG","value":"C"},{"name":"TZ","value":"UTC"}],"volumeDevices":[{"name":"raw","devicePath":"/dev/own"},{"name":"blk","devicePath":"/dev/blk"}]}]}}`)
	fast, typed := fastPathPod(t, l, raw), typedPathPod(t, l, raw)
	if !apiequality.Semantic.DeepEqual(fast, typed) {
		f, _ := json.Marshal(fast.Spec.Containers)
		g, _ := json.Marshal(typed.Spec.Containers)
		t.Fatalf("the paths disagree:\nfast  %s\ntyped %s", f, g)
	}
	c := fast.Spec.Containers[0]
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	if fmt.Sprint(env) != "[TZ=own LANG=C MODE=m]" || len(c.VolumeDevices) != 2 || c.VolumeDevices[1].DevicePath != "/dev/blk" {
		t.Fatalf("unexpected sidecar: env %v devices %+v", env, c.VolumeDevices)
	}
}

// TestFastPathSeedsResources makes sure the differential covers
// resourcesPolicy: the sidecar gets computed requests and limits.
func TestFastPathSeedsResources(t *testing.T) {
	l := fuzzLister(t, []byte(`{"metadata":{"name":"sized"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"sized","image":"s:1","resourcesPolicy":{"targetContainerMode":"max","targetContainersNameRegex":"^app","resourceExpr":{"limits":{"cpu":"cpu * 0.5","memory":"max(memory * 0.25, quantity('64Mi'))"},"requests":{"cpu":"max(cpu * 0.1, quantity('10m'))"}}}}]}}`))
	if l == nil {
		t.Fatal("the seed SidecarSet is invalid")
	}
	raw := []byte(`{"metadata":{"name":"big","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"x","resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":{"cpu":"1"}}},{"name":"app-2","image":"y","resources":{"limits":{"cpu":"500m","memory":"2Gi"}}}]}}`)
	fast, typed := fastPathPod(t, l, raw), typedPathPod(t, l, raw)
	if !apiequality.Semantic.DeepEqual(fast, typed) {
		f, _ := json.Marshal(fast.Spec.Containers)
		g, _ := json.Marshal(typed.Spec.Containers)
		t.Fatalf("the paths disagree:\nfast  %s\ntyped %s", f, g)
	}
	r := fast.Spec.Containers[0].Resources
	if r.Limits.Cpu().String() != "1" || r.Limits.Memory().String() != "512Mi" || r.Requests.Cpu().String() != "100m" {
		t.Fatalf("unexpected sidecar resources %+v", r)
	}
}
