package kubectlplugin

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

var (
	setCreated = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	podCreated = metav1.NewTime(setCreated.Add(time.Hour))
)

// testSidecarSet selects app=web and injects one container, "log".
func testSidecarSet(name string, mutate ...func(*deckhandv1alpha1.SidecarSet)) deckhandv1alpha1.SidecarSet {
	s := deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: setCreated},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: "log:1"}}},
		},
	}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func testPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: map[string]string{"app": "web"}, CreationTimestamp: podCreated},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// injectedBy records s on the pod at revision hash, as the webhook does,
// and adds the containers s injects.
func injectedBy(s deckhandv1alpha1.SidecarSet, hash string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		rec := sidecarcontrol.ReadPodRecord(p.Annotations)
		if hash == "" {
			hash, _ = sidecarcontrol.Hashes(&s.Spec)
		}
		var names []string
		for i := range s.Spec.Containers {
			p.Spec.Containers = append(p.Spec.Containers, s.Spec.Containers[i].Container)
			names = append(names, s.Spec.Containers[i].Name)
		}
		rec.Set(s.Name, hash, "x", names)
		rec.Apply(p)
	}
}

func TestExplainSidecarSets(t *testing.T) {
	shop := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "shop"}}}
	log := testSidecarSet("log")
	cases := []struct {
		name      string
		pod       *corev1.Pod
		namespace *corev1.Namespace
		sets      []deckhandv1alpha1.SidecarSet
		// target is the SidecarSet whose verdict is checked.
		target            string
		selects, injected bool
		why               string
	}{
		{name: "injected at the current revision", pod: testPod(injectedBy(log, "")), sets: []deckhandv1alpha1.SidecarSet{log},
			target: "log", selects: true, injected: true, why: "(the current revision), containers log"},
		{name: "injected at an older revision, rollout paused", pod: testPod(injectedBy(log, "0ld")),
			sets:   []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = true })},
			target: "log", selects: true, injected: true, why: "injected at revision 0ld (not the current revision"},
		{name: "injected, labels changed since", pod: testPod(injectedBy(log, ""), func(p *corev1.Pod) { p.Labels["app"] = "api" }),
			sets: []deckhandv1alpha1.SidecarSet{log}, target: "log", injected: true, why: "no longer selects the pod"},
		{name: "selector label has another value", pod: testPod(func(p *corev1.Pod) { p.Labels["app"] = "api" }), sets: []deckhandv1alpha1.SidecarSet{log},
			target: "log", why: "selector does not match: app=web is required, the pod has app=api"},
		{name: "selector label missing", pod: testPod(), target: "log",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}
			})},
			why: "selector does not match: tier is required, the pod has no label tier"},
		{name: "other namespace", pod: testPod(), target: "log",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Namespace = "billing" })},
			why:  "other namespace: the SidecarSet is limited to namespace billing"},
		{name: "namespaceSelector does not match", pod: testPod(), namespace: shop, target: "log",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "billing"}}
			})},
			why: "namespaceSelector team=billing does not match namespace shop"},
		{name: "namespaceSelector matches", pod: testPod(injectedBy(log, "")), namespace: shop, target: "log", selects: true, injected: true,
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
			})},
			why: "(the current revision)"},
		{name: "namespace labels unreadable", pod: testPod(), target: "log",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
			})},
			why: "the labels of namespace shop could not be read"},
		{name: "protected namespace", pod: testPod(func(p *corev1.Pod) { p.Namespace = metav1.NamespaceSystem }), sets: []deckhandv1alpha1.SidecarSet{log},
			target: "log", why: "namespace kube-system is protected"},
		{name: "namespace opted out", pod: testPod(), sets: []deckhandv1alpha1.SidecarSet{log}, target: "log",
			namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{
				deckhandv1alpha1.SidecarSetInjectionLabel: deckhandv1alpha1.SidecarSetInjectionDisabled}}},
			why: "namespace shop opts out of every SidecarSet (label apps.deckhand.dev/sidecarset-injection=disabled)"},
		{name: "SidecarSet being deleted", pod: testPod(), target: "log",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) { s.DeletionTimestamp = &podCreated })},
			why:  "being deleted"},
		{name: "skip-injection annotation, opting out allowed", pod: testPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
		}), sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.AllowOptOut = true })},
			target: "log", selects: true, why: "the pod carries apps.deckhand.dev/sidecarset-skip-injection=true and the SidecarSet allows opting out"},
		{name: "skip-injection annotation on a mandatory SidecarSet", pod: testPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
		}), sets: []deckhandv1alpha1.SidecarSet{log}, target: "log", selects: true, why: "not injected although selected"},
		{name: "pod older than the SidecarSet", pod: testPod(func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(setCreated.Add(-time.Minute)) }),
			sets: []deckhandv1alpha1.SidecarSet{log}, target: "log", selects: true,
			why: "the pod was created (2025-12-31T23:59:00Z) before the SidecarSet (2026-01-01T00:00:00Z)"},
		{name: "injection paused", pod: testPod(), target: "log", selects: true, why: "injection is paused",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Paused = true })}},
		{name: "the pod's own container has the sidecar's name", pod: testPod(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log"})
		}), sets: []deckhandv1alpha1.SidecarSet{log}, target: "log", selects: true, why: `the pod already has a container named "log"`},
		{name: "an earlier SidecarSet injected a container of the same name", pod: testPod(injectedBy(testSidecarSet("a-first"), "")),
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("a-first"), log}, target: "log", selects: true,
			why: `SidecarSet a-first injected a container named "log" first`},
		{name: "selected, no rule explains it", pod: testPod(), target: "log", selects: true, why: "(the SidecarSet counts 3 such pod(s) in status.notInjectedPods)",
			sets: []deckhandv1alpha1.SidecarSet{testSidecarSet("log", func(s *deckhandv1alpha1.SidecarSet) { s.Status.NotInjectedPods = 3 })}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := explain(whyInput{Pod: tc.pod, Namespace: tc.namespace, SidecarSets: tc.sets})
			if len(rep.Verdicts) != len(tc.sets) {
				t.Fatalf("got %d verdicts, want one per SidecarSet (%d)", len(rep.Verdicts), len(tc.sets))
			}
			var v *verdict
			for i := range rep.Verdicts {
				if rep.Verdicts[i].SidecarSet == tc.target {
					v = &rep.Verdicts[i]
				}
			}
			if v == nil {
				t.Fatalf("no verdict for %s: %+v", tc.target, rep.Verdicts)
			}
			if v.Matches != tc.selects || v.Injected != tc.injected {
				t.Errorf("selects=%v injected=%v, want selects=%v injected=%v (%s)", v.Matches, v.Injected, tc.selects, tc.injected, v.Why)
			}
			if !strings.Contains(v.Why, tc.why) {
				t.Errorf("why = %q, want it to contain %q", v.Why, tc.why)
			}
		})
	}
}

func TestDescribeOwner(t *testing.T) {
	ps := &deckhandv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "ps-uid"},
		Status:     deckhandv1alpha1.PodSetStatus{UpdateRevision: "new", CurrentRevision: "cur"},
	}
	controlledBy := func(apiVersion, kind, name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: "ps-uid", Controller: new(true)}}
		}
	}
	atRevision := func(rev string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels[deckhandv1alpha1.PodSetRevisionLabel] = rev }
	}
	psRef := controlledBy(deckhandv1alpha1.GroupVersion.String(), "PodSet", "web")
	cases := []struct {
		name   string
		pod    *corev1.Pod
		podSet *deckhandv1alpha1.PodSet
		want   string
	}{
		{name: "no controller", pod: testPod(), want: "none (no controller)"},
		{name: "another controller", pod: testPod(controlledBy("apps/v1", "ReplicaSet", "web-5d")), want: "ReplicaSet web-5d (not a PodSet)"},
		{name: "PodSet gone", pod: testPod(psRef, atRevision("new")), want: "PodSet web (the PodSet no longer exists)"},
		{name: "update revision", pod: testPod(psRef, atRevision("new")), podSet: ps, want: "PodSet web, at revision new (the update revision)"},
		{name: "current revision", pod: testPod(psRef, atRevision("cur")), podSet: ps, want: "PodSet web, at revision cur (the current revision; the update revision is new)"},
		{name: "old revision", pod: testPod(psRef, atRevision("old")), podSet: ps, want: "PodSet web, at revision old (an old revision; the update revision is new)"},
		{name: "no revision label", pod: testPod(psRef), podSet: ps, want: "PodSet web, the pod carries no revision label"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeOwner(tc.pod, tc.podSet); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
