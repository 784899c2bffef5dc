package sidecarset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestNextPodCondition pins when the pod condition changes (and so when a
// pod is written) and how SidecarSets share its message.
func TestNextPodCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	const typ = deckhandv1alpha1.SidecarSetsUpdatablePodCondition
	pod := func(injected string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{deckhandv1alpha1.SidecarSetInjectedAnnotation: injected}},
			Status:     corev1.PodStatus{Conditions: append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, conds...)},
		}
	}
	falseWith := func(msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: corev1.ConditionFalse, Reason: ReasonPodNotUpdatableInPlace, Message: msg, LastTransitionTime: t0}
	}
	trueCond := corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, Reason: ReasonPodUpdatableInPlace,
		Message: "every SidecarSet of the pod can update its sidecars in place", LastTransitionTime: t0}
	cases := map[string]struct {
		pod      *corev1.Pod
		name     string
		why      string
		write    bool
		want     corev1.PodCondition
		wantTime metav1.Time
	}{
		"updatable, never named: nothing written": {
			pod: pod("a"), name: "a",
		},
		"not updatable: False naming the SidecarSet": {
			pod: pod("a"), name: "a", why: "because", write: true,
			want: falseWith("SidecarSet a: because"), wantTime: metav1.NewTime(now),
		},
		"already says so: nothing written": {
			pod: pod("a", falseWith("SidecarSet a: because")), name: "a", why: "because",
		},
		"another reason: message changes, transition time kept": {
			pod: pod("a", falseWith("SidecarSet a: before")), name: "a", why: "after", write: true,
			want: falseWith("SidecarSet a: after"), wantTime: t0,
		},
		"a second SidecarSet adds its entry, sorted": {
			pod: pod("a,b", falseWith("SidecarSet b: two")), name: "a", why: "one", write: true,
			want: falseWith("SidecarSet a: one; SidecarSet b: two"), wantTime: t0,
		},
		"one SidecarSet clears its entry, the other's stays": {
			pod: pod("a,b", falseWith("SidecarSet a: one; SidecarSet b: two")), name: "a", write: true,
			want: falseWith("SidecarSet b: two"), wantTime: t0,
		},
		"the last entry cleared: True": {
			pod: pod("a", falseWith("SidecarSet a: one")), name: "a", write: true,
			want: trueCond, wantTime: metav1.NewTime(now),
		},
		"True stays True: nothing written": {
			pod: pod("a", trueCond), name: "a",
		},
		"entries of SidecarSets the pod does not record are dropped": {
			pod: pod("a", falseWith("SidecarSet gone: old; SidecarSet a: one")), name: "a", why: "one", write: true,
			want: falseWith("SidecarSet a: one"), wantTime: t0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, write := nextPodCondition(tc.pod, sidecarcontrol.ReadPodRecord(tc.pod.Annotations), tc.name, tc.why, now)
			if write != tc.write {
				t.Fatalf("write = %v, want %v", write, tc.write)
			}
			if !write {
				return
			}
			tc.want.LastTransitionTime = tc.wantTime
			if got != tc.want {
				t.Fatalf("condition = %+v, want %+v", got, tc.want)
			}
		})
	}
}
