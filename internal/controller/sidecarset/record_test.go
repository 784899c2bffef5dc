package sidecarset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// A pod counts as injected only when its record names the SidecarSet and
// the pod has every container the record says it injected; a pod not
// injected is opted out only where the SidecarSet allows it.
func TestClassifyInjected(t *testing.T) {
	mk := func(allowOptOut bool) *deckhandv1alpha1.SidecarSet {
		return &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "s-uid", Generation: 1}, Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			InitContainers:    []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "init:1"}}},
			Containers:        []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1"}}},
			InjectionStrategy: deckhandv1alpha1.SidecarSetInjectionStrategy{AllowOptOut: allowOptOut},
		}}
	}
	pod := func(recorded bool, skip bool, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
		for _, n := range containers {
			c := corev1.Container{Name: n, Image: n + ":1"}
			if n == "init" {
				p.Spec.InitContainers = append(p.Spec.InitContainers, c)
			} else {
				p.Spec.Containers = append(p.Spec.Containers, c)
			}
		}
		if recorded {
			rec := sidecarcontrol.PodRecord{}
			rec.Set("s", "h", "w", []string{"init", "proxy"})
			rec.Apply(p)
		}
		if skip {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[deckhandv1alpha1.SidecarSetSkipInjectionAnnotation] = "true"
		}
		return p
	}
	cases := map[string]struct {
		pod                          *corev1.Pod
		allowOptOut                  bool
		injected, optedOut, recreate bool
	}{
		"recorded, with its sidecars": {pod: pod(true, false, "init", "proxy", "app"), injected: true},
		// The record lies; the container the pod has under one of the
		// SidecarSet's names is a clash, which recreateting would not resolve.
		"recorded, sidecar missing":             {pod: pod(true, false, "init", "app")},
		"recorded, init container missing":      {pod: pod(true, false, "proxy", "app")},
		"not recorded":                          {pod: pod(false, false, "app"), recreate: true},
		"skip annotation, mandatory SidecarSet": {pod: pod(false, true, "app"), recreate: true},
		"skip annotation, opting out allowed":   {pod: pod(false, true, "app"), allowOptOut: true, optedOut: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := mk(tc.allowOptOut)
			c := sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{}).Compiled(s)
			st := &podState{}
			classify(classifyInput{set: s, compiled: c, now: time.Now(), deferredTimeout: time.Minute}, tc.pod, st)
			if st.injected() != tc.injected || (st.stage == stageOptedOut) != tc.optedOut {
				t.Errorf("stage %d: injected %v optedOut %v, want %v %v", st.stage, st.injected(), st.stage == stageOptedOut, tc.injected, tc.optedOut)
			}
			if !tc.injected && st.needsRecreate() != tc.recreate {
				t.Errorf("needsRecreate %v, want %v", st.needsRecreate(), tc.recreate)
			}
		})
	}
}
