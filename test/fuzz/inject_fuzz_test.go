package fuzz

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
)

const fuzzNamespace = "fz"

// injectorFor returns the production pod injection handler over an
// in-memory cache holding sets (and namespace fz labelled env=fuzz).
func injectorFor(t testing.TB, sets ...*deckhandv1alpha1.SidecarSet) *inject.Handler {
	ss := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	for _, s := range sets {
		if err := ss.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	nsIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	_ = nsIdx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fuzzNamespace, Labels: map[string]string{"env": "fuzz"}}})
	return &inject.Handler{Lister: sidecarcontrol.NewLister(ss, nsIdx, sidecarcontrol.Options{})}
}

func podCreate(raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "fuzz", Operation: admissionv1.Create, Namespace: fuzzNamespace,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// applyResponse applies an admission response's JSON patch to raw.
func applyResponse(t *testing.T, raw []byte, resp admission.Response) []byte {
	t.Helper()
	if len(resp.Patches) > 0 {
		t.Fatalf("the injector answered with Patches (%d); it is expected to write Patch itself", len(resp.Patches))
	}
	if len(resp.Patch) == 0 {
		return raw
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("the injector's patch is not a JSON patch: %v\n%s", err, resp.Patch)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("the injector's patch does not apply to the pod it was computed for: %v\npod:   %s\npatch: %s", err, raw, resp.Patch)
	}
	return out
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// stripInjectable clears what injection may change, leaving the rest of a
// pod's spec, which injection must never touch (service account, host
// namespaces, pod security context, ...).
func stripInjectable(p *corev1.Pod) corev1.PodSpec {
	s := *p.Spec.DeepCopy()
	s.Containers, s.InitContainers, s.Volumes, s.ImagePullSecrets = nil, nil, nil, nil
	// The in-place update gate is added; the pod's own gates stay, in order.
	s.ReadinessGates = slices.DeleteFunc(s.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == inplacegate.ConditionType })
	return s
}

// FuzzSidecarInjection: any pod body and any valid SidecarSet. The injector
// never panics; its patch applies to the pod it saw and yields a pod;
// injecting into the result changes nothing more; app containers and the
// rest of the pod spec are unchanged; every injected container carries
// exactly the SidecarSet's securityContext (no privilege gained).
func FuzzSidecarInjection(f *testing.F) {
	pods, sets := InjectionSeedPods, InjectionSeedSidecarSets
	for i, p := range pods {
		f.Add([]byte(p), []byte(sets[i%len(sets)]))
	}
	v := &sidecarsetwebhook.Validator{}
	f.Fuzz(func(t *testing.T, podRaw, setRaw []byte) {
		s := &deckhandv1alpha1.SidecarSet{}
		if json.Unmarshal(setRaw, s) != nil {
			return
		}
		if s.Name == "" {
			s.Name = "fuzz"
		}
		sidecarsetwebhook.SetDefaults(s)
		if _, err := v.Validate(context.Background(), nil, s); err != nil {
			return // an invalid SidecarSet is refused and never reaches the cache
		}
		h := injectorFor(t, s)
		ctx := context.Background()

		// Raw bytes as they come: no panic, and a patch must apply. (A body
		// without a spec object once got a patch that could not apply: found
		// by this fuzzer, kept as a seed; it is now refused with a message.)
		resp := h.Handle(ctx, podCreate(podRaw))
		if resp.Allowed {
			applyResponse(t, podRaw, resp)
		} else if resp.Result == nil || resp.Result.Message == "" {
			t.Fatalf("refused without a message: %+v", resp.AdmissionResponse)
		}

		// A pod as the API server sends it: canonical JSON of a decoded pod.
		pod := &corev1.Pod{}
		if json.Unmarshal(podRaw, pod) != nil {
			return
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			return
		}
		resp = h.Handle(ctx, podCreate(raw))
		if !resp.Allowed {
			t.Fatalf("a well-formed pod was refused: %+v\npod: %s", resp.Result, raw)
		}
		once := applyResponse(t, raw, resp)
		injected := &corev1.Pod{}
		if err := json.Unmarshal(once, injected); err != nil {
			t.Fatalf("the injected pod does not decode: %v\n%s", err, once)
		}
		again := h.Handle(ctx, podCreate(once))
		if !again.Allowed {
			t.Fatalf("the injected pod was refused on a second pass: %+v", again.Result)
		}
		// Created again (a copy of an injected pod), the pod gets nothing
		// twice, and its record, which came with it, is dropped: a pod's
		// record is Deckhand's to write.
		if twice := applyResponse(t, once, again); !sameJSON(withoutRecord(t, once), withoutRecord(t, twice)) || hasRecord(t, twice) {
			t.Fatalf("creating an injected pod again is not the pod without its record:\nonce:  %s\ntwice: %s", once, twice)
		}

		// Nothing but the injected parts changed.
		if !apiequality.Semantic.DeepEqual(stripInjectable(pod), stripInjectable(injected)) {
			t.Fatalf("injection changed the pod spec beyond containers/volumes/pull secrets:\nbefore %s\nafter  %s", raw, once)
		}
		if n := slices.IndexFunc(injected.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == inplacegate.ConditionType }); n >= 0 &&
			slices.ContainsFunc(injected.Spec.ReadinessGates[n+1:], func(g corev1.PodReadinessGate) bool { return g.ConditionType == inplacegate.ConditionType }) {
			t.Fatalf("the injected pod lists the in-place update gate twice: %v", injected.Spec.ReadinessGates)
		}
		checkContainers(t, pod.Spec.Containers, injected.Spec.Containers, sidecarcontrol.InjectedContainers(&s.Spec))
		checkContainers(t, pod.Spec.InitContainers, injected.Spec.InitContainers, s.Spec.InitContainers)
	})
}

// checkContainers: every app container is still there, unchanged and in
// order; every other container is one of the SidecarSet's with exactly its
// securityContext.
func checkContainers(t *testing.T, before, after []corev1.Container, sidecars []deckhandv1alpha1.SidecarContainer) {
	t.Helper()
	var apps []corev1.Container
	for _, c := range after {
		isApp := false
		for _, b := range before {
			if b.Name == c.Name {
				isApp = true
			}
		}
		if isApp {
			apps = append(apps, c)
			continue
		}
		var sc *deckhandv1alpha1.SidecarContainer
		for i := range sidecars {
			if sidecars[i].Name == c.Name {
				sc = &sidecars[i]
			}
		}
		if sc == nil {
			t.Fatalf("container %q appeared that is neither the pod's nor the SidecarSet's", c.Name)
		}
		if !apiequality.Semantic.DeepEqual(sc.SecurityContext, c.SecurityContext) {
			t.Fatalf("injected container %q has securityContext %+v, the SidecarSet states %+v", c.Name, c.SecurityContext, sc.SecurityContext)
		}
		if c.Image != sc.Image || !apiequality.Semantic.DeepEqual(c.Command, sc.Command) {
			t.Fatalf("injected container %q differs from the SidecarSet's: image %q command %v", c.Name, c.Image, c.Command)
		}
	}
	if !apiequality.Semantic.DeepEqual(before, apps) {
		t.Fatalf("app containers changed:\nbefore %+v\nafter  %+v", before, apps)
	}
}

// TestInjectionSeedInjects makes sure the property above is not vacuous: a
// seed pod really gets the sidecar, with the SidecarSet's securityContext.
func TestInjectionSeedInjects(t *testing.T) {
	s := &deckhandv1alpha1.SidecarSet{}
	if err := json.Unmarshal([]byte(`{"metadata":{"name":"logging"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"fluent-bit:3","securityContext":{"runAsUser":65534}}]}}`), s); err != nil {
		t.Fatal(err)
	}
	sidecarsetwebhook.SetDefaults(s)
	raw := []byte(`{"metadata":{"name":"web-0","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`)
	resp := injectorFor(t, s).Handle(context.Background(), podCreate(raw))
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Fatalf("no injection: %+v", resp.AdmissionResponse)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(applyResponse(t, raw, resp), pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[0].Name != "log" ||
		pod.Spec.Containers[0].SecurityContext == nil || *pod.Spec.Containers[0].SecurityContext.RunAsUser != 65534 {
		t.Fatalf("unexpected containers %+v", pod.Spec.Containers)
	}
}

// withoutRecord is the pod JSON raw without its injection record and with
// an empty annotations map dropped.
func withoutRecord(t *testing.T, raw []byte) []byte {
	t.Helper()
	var pod map[string]any
	if err := json.Unmarshal(raw, &pod); err != nil {
		t.Fatal(err)
	}
	if meta, ok := pod["metadata"].(map[string]any); ok {
		if a, ok := meta["annotations"].(map[string]any); ok {
			for _, k := range recordKeys {
				delete(a, k)
			}
			if len(a) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	out, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var recordKeys = []string{deckhandv1alpha1.SidecarSetInjectedAnnotation, deckhandv1alpha1.SidecarSetHashAnnotation, deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation}

// hasRecord reports whether the pod JSON raw carries any record annotation.
func hasRecord(t *testing.T, raw []byte) bool {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		t.Fatal(err)
	}
	for _, k := range recordKeys {
		if _, ok := pod.Annotations[k]; ok {
			return true
		}
	}
	return false
}
