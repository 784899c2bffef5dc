package sidecarset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestPlanHotUpgrade pins the next step of a HotUpgrade sidecar for each
// state a pod can show, and what taking it writes.
func TestPlanHotUpgrade(t *testing.T) {
	const empty = "mesh-empty:1"
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", Generation: 7}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "mesh", Image: "mesh:2"},
			UpgradeStrategy: &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: empty}}},
	}}
	// pod: working container, spec images of mesh-1 and mesh-2, and the
	// images their statuses report ready ("" for not ready).
	pod := func(working, img1, img2, ready1, ready2 string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			"version.sidecarset.apps.deckhand.dev/mesh-1": "3", "version.sidecarset.apps.deckhand.dev/mesh-2": "0",
		}}}
		if working != "" {
			p.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation] = `{"mesh":"` + working + `"}`
		}
		p.Spec.Containers = []corev1.Container{{Name: "mesh-1", Image: img1}, {Name: "mesh-2", Image: img2}, {Name: "app", Image: "app"}}
		for _, c := range []struct{ name, image string }{{"mesh-1", ready1}, {"mesh-2", ready2}} {
			st := corev1.ContainerStatus{Name: c.name, Image: c.image, Ready: c.image != ""}
			if c.image == "" {
				st.Image = "whatever:0"
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
		}
		return p
	}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		want       hotAction
		work, idle string
		// after taking the step: the images and the working container
		img1, img2, working string
	}{
		{"done", pod("mesh-1", "mesh:2", empty, "mesh:2", empty), hotDone, "mesh-1", "mesh-2", "mesh:2", empty, "mesh-1"},
		{"no annotation: the first works", pod("", "mesh:1", empty, "mesh:1", empty), hotStart, "mesh-1", "mesh-2", "mesh:1", "mesh:2", ""},
		{"start in the idle container", pod("mesh-1", "mesh:1", empty, "mesh:1", empty), hotStart, "mesh-1", "mesh-2", "mesh:1", "mesh:2", "mesh-1"},
		{"start in the first when the second works", pod("mesh-2", empty, "mesh:1", empty, "mesh:1"), hotStart, "mesh-2", "mesh-1", "mesh:2", "mesh:1", "mesh-2"},
		{"wait: not ready", pod("mesh-1", "mesh:1", "mesh:2", "mesh:1", ""), hotWait, "mesh-1", "mesh-2", "mesh:1", "mesh:2", "mesh-1"},
		{"wait: still reports the empty image", pod("mesh-1", "mesh:1", "mesh:2", "mesh:1", empty), hotWait, "mesh-1", "mesh-2", "mesh:1", "mesh:2", "mesh-1"},
		{"switch once ready", pod("mesh-1", "mesh:1", "mesh:2", "mesh:1", "mesh:2"), hotSwitch, "mesh-1", "mesh-2", empty, "mesh:2", "mesh-2"},
		{"a newer image mid-upgrade goes to the idle container again", pod("mesh-1", "mesh:0", "mesh:1", "mesh:0", "mesh:1"), hotStart, "mesh-1", "mesh-2", "mesh:0", "mesh:2", "mesh-1"},
		{"rolled back before the switch: reset", pod("mesh-1", "mesh:2", "mesh:3", "mesh:2", "mesh:3"), hotReset, "mesh-1", "mesh-2", "mesh:2", empty, "mesh-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			steps := planHotUpgrade(s, tc.pod)
			if len(steps) != 1 {
				t.Fatalf("steps = %+v", steps)
			}
			if st := steps[0]; st.action != tc.want || st.work != tc.work || st.idle != tc.idle {
				t.Fatalf("step = %v (work %s, idle %s), want %v (work %s, idle %s)", st.action, st.work, st.idle, tc.want, tc.work, tc.idle)
			}
			if due := hotProgressOf(s, tc.pod).stepDue; due != (tc.want != hotDone && tc.want != hotWait) {
				t.Errorf("stepDue = %v", due)
			}
			p := tc.pod.DeepCopy()
			applyHotUpgrade(s, p, steps)
			if p.Spec.Containers[0].Image != tc.img1 || p.Spec.Containers[1].Image != tc.img2 {
				t.Errorf("after the step: images %s, %s, want %s, %s", p.Spec.Containers[0].Image, p.Spec.Containers[1].Image, tc.img1, tc.img2)
			}
			if tc.working != "" {
				if got := p.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation]; got != `{"mesh":"`+tc.working+`"}` {
					t.Errorf("after the step: working annotation %s, want %s", got, tc.working)
				}
			}
			v := func(prefix, c string) string { return p.Annotations[prefix+c] }
			switch tc.want {
			case hotStart:
				if v(deckhandv1alpha1.SidecarSetVersionAnnotationPrefix, tc.idle) != "7" || v(deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix, tc.work) != "7" ||
					v(deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix, tc.idle) != tc.pod.Annotations[deckhandv1alpha1.SidecarSetVersionAnnotationPrefix+tc.work] {
					t.Errorf("versions after the start: %v", p.Annotations)
				}
			case hotSwitch, hotReset:
				old := tc.work
				if tc.want == hotReset {
					old = tc.idle
				}
				for _, k := range []string{deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + old,
					deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + "mesh-1", deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + "mesh-2"} {
					if p.Annotations[k] != "0" {
						t.Errorf("after the %v: %s = %q, want 0", tc.want, k, p.Annotations[k])
					}
				}
			}
		})
	}
}
