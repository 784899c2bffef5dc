package inplacegate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gatedPod is a Ready pod that lists the gate, with conds.
func gatedPod(conds ...corev1.PodCondition) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{Conditions: append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, conds...)}}
	Add(&p.Spec)
	return p
}

func TestMayRestart(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const grace = 5 * time.Second
	gate := func(status corev1.ConditionStatus, ago time.Duration) corev1.PodCondition {
		return corev1.PodCondition{Type: ConditionType, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-ago))}
	}
	// notReady is a pod not Ready for ago, with conds.
	notReady := func(ago time.Duration, conds ...corev1.PodCondition) *corev1.Pod {
		p := gatedPod(conds...)
		p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now.Add(-ago))
		return p
	}
	cases := map[string]struct {
		pod         *corev1.Pod
		ok, close   bool
		wait        time.Duration
		open, gates bool
	}{
		"no gate: a pod created before it": {pod: &corev1.Pod{}, ok: true, open: true},
		"gate without condition":           {pod: gatedPod(), close: true, wait: grace, gates: true},
		"gate True":                        {pod: gatedPod(gate(corev1.ConditionTrue, time.Hour)), close: true, wait: grace, open: true, gates: true},
		"gate True, pod not Ready: out of its endpoints already": {pod: notReady(time.Hour, gate(corev1.ConditionTrue, time.Hour)),
			ok: true, close: true, open: true, gates: true},
		// The kubelet has not taken the pod out of its endpoints yet,
		// however long ago the gate closed.
		"gate False this second, pod still Ready": {pod: gatedPod(gate(corev1.ConditionFalse, 0)), wait: grace, gates: true},
		"gate False long ago, pod still Ready":    {pod: gatedPod(gate(corev1.ConditionFalse, time.Hour)), wait: grace, gates: true},
		// The grace period counts from the later of the two transitions. A
		// lastTransitionTime stored to the second stands for any instant
		// of it: the grace period counts from its end.
		"gate False long ago, not Ready this second":                 {pod: notReady(0, gate(corev1.ConditionFalse, time.Hour)), wait: grace + time.Second, gates: true},
		"gate False long ago, not Ready for 2s":                      {pod: notReady(2*time.Second, gate(corev1.ConditionFalse, time.Hour)), wait: 4 * time.Second, gates: true},
		"gate False long ago, not Ready 1.5s, in memory":             {pod: notReady(1500*time.Millisecond, gate(corev1.ConditionFalse, time.Hour)), wait: 3500 * time.Millisecond, gates: true},
		"gate False long ago, not Ready for the grace period and 1s": {pod: notReady(grace+time.Second, gate(corev1.ConditionFalse, time.Hour)), ok: true, gates: true},
		"gate False long ago, not Ready 5.5s, in memory":             {pod: notReady(5500*time.Millisecond, gate(corev1.ConditionFalse, time.Hour)), ok: true, gates: true},
		// A pod not Ready before its gate closed: from the gate's write.
		"not Ready long ago, gate False this second":                 {pod: notReady(time.Hour, gate(corev1.ConditionFalse, 0)), wait: grace + time.Second, gates: true},
		"not Ready long ago, gate False for 2s":                      {pod: notReady(time.Hour, gate(corev1.ConditionFalse, 2*time.Second)), wait: 4 * time.Second, gates: true},
		"not Ready long ago, gate False for the grace period":        {pod: notReady(time.Hour, gate(corev1.ConditionFalse, grace)), wait: time.Second, gates: true},
		"not Ready long ago, gate False for the grace period and 1s": {pod: notReady(time.Hour, gate(corev1.ConditionFalse, grace+time.Second)), ok: true, gates: true},
		"not Ready long ago, gate False 1.5s ago, in memory":         {pod: notReady(time.Hour, gate(corev1.ConditionFalse, 1500*time.Millisecond)), wait: 3500 * time.Millisecond, gates: true},
		"not Ready long ago, gate False long ago":                    {pod: notReady(time.Hour, gate(corev1.ConditionFalse, time.Hour)), ok: true, gates: true},
		"gate False long ago, no Ready condition": {pod: func() *corev1.Pod {
			p := gatedPod(gate(corev1.ConditionFalse, time.Hour))
			p.Status.Conditions = p.Status.Conditions[1:]
			return p
		}(), ok: true, gates: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ok, closeFirst, wait := MayRestart(tc.pod, grace, now)
			if ok != tc.ok || closeFirst != tc.close || wait != tc.wait {
				t.Errorf("MayRestart = %v, %v, %v; want %v, %v, %v", ok, closeFirst, wait, tc.ok, tc.close, tc.wait)
			}
			if got := Open(tc.pod); got != tc.open {
				t.Errorf("Open = %v, want %v", got, tc.open)
			}
			if got := Gated(tc.pod); got != tc.gates {
				t.Errorf("Gated = %v, want %v", got, tc.gates)
			}
		})
	}
}

func TestReleasable(t *testing.T) {
	closedBy := func(by string) corev1.PodCondition {
		return corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionFalse, Message: by + closedMessage}
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"no gate":                       {pod: &corev1.Pod{}},
		"open":                          {pod: gatedPod(corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionTrue})},
		"new pod, no condition yet":     {pod: gatedPod(), want: true},
		"closed by the same PodSet":     {pod: gatedPod(closedBy("PodSet web")), want: true},
		"closed by a SidecarSet":        {pod: gatedPod(closedBy("SidecarSet log"))},
		"closed by another PodSet name": {pod: gatedPod(closedBy("PodSet web2"))},
	}
	for name, tc := range cases {
		if got := releasable(tc.pod, "PodSet web"); got != tc.want {
			t.Errorf("%s: releasable = %v, want %v", name, got, tc.want)
		}
	}
}

func TestAddOnce(t *testing.T) {
	spec := corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}}
	Add(&spec)
	Add(&spec)
	want := []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: ConditionType}}
	if len(spec.ReadinessGates) != 2 || spec.ReadinessGates[0] != want[0] || spec.ReadinessGates[1] != want[1] {
		t.Fatalf("readiness gates = %v, want %v", spec.ReadinessGates, want)
	}
}

func TestReadyAwaited(t *testing.T) {
	open := corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionTrue}
	closed := corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionFalse}
	// pod is a gated pod with container app running app:1, ready as
	// containerReady says, Ready as podReady says, with gate.
	pod := func(gate *corev1.PodCondition, containerReady, podReady bool) *corev1.Pod {
		var conds []corev1.PodCondition
		if gate != nil {
			conds = append(conds, *gate)
		}
		p := gatedPod(conds...)
		if !podReady {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: containerReady}}
		return p
	}
	ungated := pod(nil, true, false)
	ungated.Spec.ReadinessGates = nil
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"open, containers ready, pod not Ready yet": {pod: pod(&open, true, false), want: true},
		"open, containers ready, pod Ready":         {pod: pod(&open, true, true)},
		"open, a container not ready":               {pod: pod(&open, false, false)},
		"closed":                                    {pod: pod(&closed, true, false)},
		"no condition yet":                          {pod: pod(nil, true, false)},
		"no gate":                                   {pod: ungated},
	}
	for name, tc := range cases {
		if got := ReadyAwaited(tc.pod); got != tc.want {
			t.Errorf("%s: ReadyAwaited = %v, want %v", name, got, tc.want)
		}
	}
}
