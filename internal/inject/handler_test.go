package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
)

var generation int64

// testLister builds a Lister over in-memory indexers, as the informer cache would hold them.
func testLister(t testing.TB, namespaces map[string]map[string]string, sets ...*deckhandv1alpha1.SidecarSet) *sidecarcontrol.Lister {
	t.Helper()
	return testListerWith(t, sidecarcontrol.Options{}, namespaces, sets...)
}

// testListerWith is testLister built with opts.
func testListerWith(t testing.TB, opts sidecarcontrol.Options, namespaces map[string]map[string]string, sets ...*deckhandv1alpha1.SidecarSet) *sidecarcontrol.Lister {
	t.Helper()
	ss := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	for _, s := range sets {
		sidecarsetwebhook.SetDefaults(s)
		s.UID = types.UID("uid-" + s.Name)
		generation++ // the compiled-SidecarSet cache keys on UID and generation
		s.Generation = generation
		if err := ss.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	nsIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for name, l := range namespaces {
		_ = nsIdx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
	}
	return sidecarcontrol.NewLister(ss, nsIdx, opts)
}

func sc(name, image string, mut ...func(*deckhandv1alpha1.SidecarContainer)) deckhandv1alpha1.SidecarContainer {
	c := deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}}
	for _, m := range mut {
		m(&c)
	}
	return c
}

func set(name string, mut func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []deckhandv1alpha1.SidecarContainer{sc(name+"-c", name+":1")},
		},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

func podRequest(t testing.TB, ns string, pod *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: ns,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// admit runs the handler and applies its patch to the raw pod.
func admit(t testing.TB, l *sidecarcontrol.Lister, ns string, pod *corev1.Pod) (*corev1.Pod, admission.Response) {
	t.Helper()
	req := podRequest(t, ns, pod)
	resp := (&Handler{Lister: l}).Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("not allowed: %+v", resp.Result)
	}
	if len(resp.Patch) == 0 {
		return pod.DeepCopy(), resp
	}
	patchJSON := resp.Patch
	patch, err := jsonpatchapply.DecodePatch(patchJSON)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("applying %s: %v", patchJSON, err)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got, resp
}

func pod(labels map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "app"})
	}
	return p
}

func cnames(cs []corev1.Container) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestInjectTable(t *testing.T) {
	web := map[string]string{"app": "web"}
	nsLabels := map[string]map[string]string{"prod": {"env": "prod"}, "dev": {"env": "dev"}}
	cases := map[string]struct {
		sets           []*deckhandv1alpha1.SidecarSet
		ns             string
		pod            *corev1.Pod
		wantContainers []string
		wantInit       []string
		wantVolumes    []string // checked when set
		wantInjected   string
		wantWarning    string // the admission warning, if any
	}{
		"no match": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)}, ns: "prod",
			pod: pod(map[string]string{"app": "db"}, "db"), wantContainers: []string{"db"},
		},
		"order across sets follows names": {
			sets: []*deckhandv1alpha1.SidecarSet{
				set("b", nil),
				set("a", func(s *deckhandv1alpha1.SidecarSet) {
					s.Spec.Containers = append(s.Spec.Containers, sc("a-after", "x", func(c *deckhandv1alpha1.SidecarContainer) {
						c.PodInjectPolicy = deckhandv1alpha1.AfterAppContainer
					}))
				}),
			},
			ns: "prod", pod: pod(web, "app"),
			wantContainers: []string{"a-c", "b-c", "app", "a-after"}, wantInjected: "a,b",
		},
		"init containers and native sidecars": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{
					sc("native", "x", func(c *deckhandv1alpha1.SidecarContainer) {
						c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
					}),
					sc("late", "x", func(c *deckhandv1alpha1.SidecarContainer) { c.PodInjectPolicy = deckhandv1alpha1.AfterAppContainer }),
				}
			})},
			ns: "prod", pod: func() *corev1.Pod {
				p := pod(web, "app")
				p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "m"}}
				return p
			}(),
			wantContainers: []string{"a-c", "app"}, wantInit: []string{"native", "migrate", "late"}, wantInjected: "a",
		},
		"init containers into a pod without any": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("first", "x")}
			})},
			ns: "prod", pod: pod(web, "app"),
			wantContainers: []string{"a-c", "app"}, wantInit: []string{"first"}, wantInjected: "a",
		},
		"a pod that lists the in-place update gate keeps it once": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)}, ns: "prod",
			pod: func() *corev1.Pod {
				p := pod(web, "app")
				p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: inplacegate.ConditionType}}
				return p
			}(),
			wantContainers: []string{"a-c", "app"}, wantInjected: "a",
		},
		"namespace limits": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Namespace = "dev" })},
			ns:   "prod", pod: pod(web, "app"), wantContainers: []string{"app"},
		},
		"namespace selector matches": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			ns: "prod", pod: pod(web, "app"), wantContainers: []string{"a-c", "app"}, wantInjected: "a",
		},
		"namespace selector does not match": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			ns: "dev", pod: pod(web, "app"), wantContainers: []string{"app"},
		},
		"unknown namespace never matches a namespace selector": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{}
			})},
			ns: "unknown", pod: pod(web, "app"), wantContainers: []string{"app"},
		},
		"kube-system is never touched": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)},
			ns:   "kube-system", pod: pod(web, "app"), wantContainers: []string{"app"},
		},
		"deckhand-system is never touched": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)},
			ns:   "deckhand-system", pod: pod(web, "app"), wantContainers: []string{"app"},
		},
		"paused injection": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Paused = true })},
			ns:   "prod", pod: pod(web, "app"), wantContainers: []string{"app"},
		},
		// The pod's own container wins, and the SidecarSet, which does not
		// own it, is neither injected nor recorded: recorded, it would count
		// the pod as its own and roll its image onto the app's container.
		"existing container of the same name is kept and the set not recorded": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)},
			ns:   "prod", pod: pod(web, "app", "a-c"), wantContainers: []string{"app", "a-c"},
			wantWarning: `SidecarSet a was not injected: the pod already has a container named "a-c"`,
		},
		"a set is injected whole or not at all": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.Containers = append(s.Spec.Containers, sc("app", "sidecar:1"))
				s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("a-init", "x")}
				s.Spec.Volumes = []corev1.Volume{{Name: "a-vol"}}
			}), set("b", nil)},
			ns: "prod", pod: pod(web, "app"), wantContainers: []string{"b-c", "app"}, wantVolumes: []string{}, wantInjected: "b",
			wantWarning: `SidecarSet a was not injected: the pod already has a container named "app"`,
		},
		"an init container of the pod's clashes too": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)},
			ns:   "prod", pod: func() *corev1.Pod {
				p := pod(web, "app")
				p.Spec.InitContainers = []corev1.Container{{Name: "a-c", Image: "m"}}
				return p
			}(),
			wantContainers: []string{"app"}, wantInit: []string{"a-c"},
			wantWarning: `SidecarSet a was not injected: the pod already has a container named "a-c"`,
		},
		"a container another set injects first wins": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil), set("b", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.Containers = append(s.Spec.Containers, sc("a-c", "other:1"))
			})},
			ns: "prod", pod: pod(web, "app"), wantContainers: []string{"a-c", "app"}, wantInjected: "a",
			wantWarning: `SidecarSet b was not injected: the pod already has a container named "a-c"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := testLister(t, nsLabels, tc.sets...)
			got, first := admit(t, l, tc.ns, tc.pod)
			var wantWarnings []string
			if tc.wantWarning != "" {
				wantWarnings = []string{tc.wantWarning}
			}
			if !reflect.DeepEqual(first.Warnings, wantWarnings) {
				t.Errorf("warnings = %q, want %q", first.Warnings, wantWarnings)
			}
			if !reflect.DeepEqual(cnames(got.Spec.Containers), tc.wantContainers) {
				t.Errorf("containers = %v, want %v", cnames(got.Spec.Containers), tc.wantContainers)
			}
			if tc.wantInit == nil {
				tc.wantInit = []string{}
			}
			if !reflect.DeepEqual(cnames(got.Spec.InitContainers), tc.wantInit) {
				t.Errorf("init containers = %v, want %v", cnames(got.Spec.InitContainers), tc.wantInit)
			}
			if tc.wantVolumes != nil {
				vols := []string{}
				for _, v := range got.Spec.Volumes {
					vols = append(vols, v.Name)
				}
				if !reflect.DeepEqual(vols, tc.wantVolumes) {
					t.Errorf("volumes = %v, want %v", vols, tc.wantVolumes)
				}
			}
			if a := got.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation]; a != tc.wantInjected {
				t.Errorf("injected annotation = %q, want %q", a, tc.wantInjected)
			}
			// An injected pod lists the in-place update gate, once.
			gates := 0
			for _, g := range got.Spec.ReadinessGates {
				if g.ConditionType == inplacegate.ConditionType {
					gates++
				}
			}
			if want := tc.wantInjected != "" || inplacegate.Gated(tc.pod); (gates == 1) != want || gates > 1 {
				t.Errorf("readiness gates = %v, want the in-place update gate once: %v", got.Spec.ReadinessGates, want)
			}
			// Admitting the result again (a copy of an injected pod) adds
			// nothing, and drops the record the copy came with.
			again, resp := admit(t, l, tc.ns, got)
			if !reflect.DeepEqual(again.Spec, got.Spec) || len(sidecarcontrol.ReadPodRecord(again.Annotations).Names()) != 0 {
				t.Errorf("second admission: %s", resp.Patch)
			}
		})
	}
}

// TestPatchMatchesFullDiff checks the hand-built patch against the generic
// one (controller-runtime's PatchResponseFromRaw: marshal the mutated pod and
// diff it with the raw request), and that unknown fields survive.
func TestPatchMatchesFullDiff(t *testing.T) {
	s := set("a", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].ShareVolumePolicy.Type = deckhandv1alpha1.ShareVolumePolicyEnabled
		s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "A"}}
		s.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}}
	})
	l := testLister(t, nil, s)
	p := pod(map[string]string{"app": "web"}, "app")
	p.Annotations = map[string]string{"keep": "me", "a/b~c": "x"}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	req := podRequest(t, "prod", p)
	// A field this Kubernetes version does not know must survive.
	var m map[string]any
	_ = json.Unmarshal(req.Object.Raw, &m)
	m["spec"].(map[string]any)["futureField"] = map[string]any{"x": 1.0}
	req.Object.Raw, _ = json.Marshal(m)

	resp := (&Handler{Lister: l}).Handle(context.Background(), req)
	patch, err := jsonpatchapply.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(out, &got)
	if got["spec"].(map[string]any)["futureField"] == nil {
		t.Errorf("unknown field dropped: %s", out)
	}
	// The generic diff of the same result yields the same document.
	generic := admission.PatchResponseFromRaw(req.Object.Raw, out)
	gp, _ := json.Marshal(generic.Patches)
	gpatch, _ := jsonpatchapply.DecodePatch(gp)
	out2, err := gpatch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonpatchapply.Equal(out, out2) {
		t.Errorf("patches disagree:\n%s\n%s", out, out2)
	}
	var pod corev1.Pod
	_ = json.Unmarshal(out, &pod)
	c := pod.Spec.Containers[0]
	if c.Name != "a-c" || len(c.Env) != 1 || c.Env[0].Value != "1" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data" {
		t.Errorf("sidecar = %+v", c)
	}
	if pod.Annotations["keep"] != "me" || pod.Annotations["a/b~c"] != "x" {
		t.Errorf("annotations = %v", pod.Annotations)
	}
	if len(pod.Spec.Volumes) != 1 || len(pod.Spec.ImagePullSecrets) != 1 {
		t.Errorf("volumes/secrets = %v %v", pod.Spec.Volumes, pod.Spec.ImagePullSecrets)
	}
	// The cached SidecarSet was not modified by the injection.
	if len(s.Spec.Containers[0].Env) != 0 || len(s.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("the cached SidecarSet was modified: %+v", s.Spec.Containers[0])
	}
}

// BenchmarkInject measures one pod admission (read the request's pod,
// match against the cache, write the JSON patch) for a
// 10-container pod that two of 50 SidecarSets select.
func BenchmarkInject(b *testing.B) {
	var sets []*deckhandv1alpha1.SidecarSet
	for i := 0; i < 48; i++ {
		sets = append(sets, set(fmt.Sprintf("other-%02d", i), func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("other-%d", i)}}
			if i%2 == 0 {
				s.Spec.Namespace = fmt.Sprintf("ns-%d", i)
			}
		}))
	}
	sets = append(sets,
		set("logging", func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ShareVolumePolicy.Type = deckhandv1alpha1.ShareVolumePolicyEnabled
			s.Spec.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app-0", EnvName: "LOG_LEVEL"}}
			s.Spec.Volumes = []corev1.Volume{{Name: "buffer", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}),
		set("mesh", func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("mesh-init", "mesh:1", func(c *deckhandv1alpha1.SidecarContainer) {
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			})}
		}),
	)
	l := testLister(b, map[string]map[string]string{"prod": {"env": "prod"}}, sets...)
	req := podRequest(b, "prod", testutil.LargePod())
	h := &Handler{Lister: l}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp := h.Handle(ctx, req)
		if len(resp.Patch) == 0 {
			b.Fatal("nothing injected")
		}
	}
}
