package sidecarset

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestPlanUpdates(t *testing.T) {
	p := podWith // an injected pod; the flags are podWith's
	cases := map[string]struct {
		pods           []*podState
		maxUnavailable int
		partition      int
		want           []string
	}{
		"budget of one":          {[]*podState{p("a", "r"), p("b", "r"), p("c", "r")}, 1, 0, []string{"a"}},
		"budget of two":          {[]*podState{p("a", "r"), p("b", "r"), p("c", "r")}, 2, 0, []string{"a", "b"}},
		"mid-update uses budget": {[]*podState{p("a", "rc"), p("b", "r"), p("c", "r")}, 2, 0, []string{"b"}},
		"pending uses budget":    {[]*podState{p("a", "rp"), p("b", "r")}, 1, 0, nil},
		// Its restart waits for the grace period: the pod is out of its
		// endpoints already, and the next one must wait its turn.
		"closed gate uses budget":  {[]*podState{p("a", "g"), p("b", "r"), p("c", "r")}, 1, 0, []string{"a"}},
		"not ready first, free":    {[]*podState{p("a", "r"), p("b", "r"), p("z", "")}, 1, 0, []string{"z", "a"}},
		"not ready app pod blocks": {[]*podState{p("a", "rcu"), p("b", "r"), p("q", "cu")}, 1, 0, nil},
		"partition holds back":     {[]*podState{p("a", "rcu"), p("b", "r"), p("c", "r"), p("d", "r")}, 3, 2, []string{"b"}},
		"partition reached":        {[]*podState{p("a", "rcu"), p("b", "rcu"), p("c", "r")}, 3, 1, nil},
		"not upgradable skipped":   {[]*podState{p("a", "rx"), p("b", "r")}, 1, 0, []string{"b"}},
		"selector scope":           {[]*podState{p("a", "rs"), p("b", "r")}, 2, 0, []string{"b"}},
		"not injected ignored":     {[]*podState{{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n"}}}, p("b", "r")}, 1, 0, []string{"b"}},
		"all done":                 {[]*podState{p("a", "rcu"), p("b", "rcu")}, 1, 0, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, s := range planUpdates(tc.pods, tc.maxUnavailable, tc.partition) {
				got = append(got, s.pod.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("planUpdates = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSidecarsRunLatest pins when an in-place update of a sidecar is done:
// the spec carries the SidecarSet's image and the status reports it (in any
// form a runtime writes it), ready.
func TestSidecarsRunLatest(t *testing.T) {
	const dig = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	set := func(image string) *deckhandv1alpha1.SidecarSet {
		return &deckhandv1alpha1.SidecarSet{Spec: deckhandv1alpha1.SidecarSetSpec{
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: image}}},
		}}
	}
	pod := func(specImage, statusImage, imageID string, ready bool) *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "proxy", Image: specImage}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Image: "docker.io/library/app:1", Ready: true},
				{Name: "proxy", Image: statusImage, ImageID: imageID, Ready: ready},
			}},
		}
	}
	cases := map[string]struct {
		set  *deckhandv1alpha1.SidecarSet
		pod  *corev1.Pod
		want bool
	}{
		"reported, ready":                 {set("proxy:2"), pod("proxy:2", "proxy:2", "", true), true},
		"reported fully qualified, ready": {set("proxy:2"), pod("proxy:2", "docker.io/library/proxy:2", "", true), true},
		"reported, not ready":             {set("proxy:2"), pod("proxy:2", "proxy:2", "", false), false},
		"old image still reported":        {set("proxy:2"), pod("proxy:2", "docker.io/library/proxy:1", "", true), false},
		"spec not patched yet":            {set("proxy:2"), pod("proxy:1", "proxy:1", "", true), false},
		"digest, containerd imageID":      {set("proxy@" + dig), pod("proxy@"+dig, "docker.io/library/proxy:2", "docker.io/library/proxy@"+dig, true), true},
		"digest, bare imageID":            {set("proxy@" + dig), pod("proxy@"+dig, "docker.io/library/proxy:2", dig, true), true},
		"digest, docker-pullable imageID": {set("proxy@" + dig), pod("proxy@"+dig, "proxy:2", "docker-pullable://proxy@"+dig, true), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sidecarsRunLatest(tc.set, tc.pod); got != tc.want {
				t.Errorf("sidecarsRunLatest = %v, want %v", got, tc.want)
			}
		})
	}
}

// A pod turning Ready after a container restart (an in-place update done)
// skips the batching delay; a new pod turning Ready, or any other change,
// keeps it.
func TestReadyAgainAfterRestart(t *testing.T) {
	pod := func(ready bool, restarts int32) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}, {Name: "proxy", RestartCount: restarts}},
		}}
	}
	for _, tc := range []struct {
		name     string
		old, new *corev1.Pod
		want     bool
	}{
		{"ready again after an in-place restart", pod(false, 1), pod(true, 1), true},
		{"a new pod turning ready", pod(false, 0), pod(true, 0), false},
		{"ready all along", pod(true, 1), pod(true, 1), false},
		{"going not ready", pod(true, 1), pod(false, 2), false},
		{"still not ready", pod(false, 1), pod(false, 1), false},
	} {
		if got := readyAgainAfterRestart(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: readyAgainAfterRestart = %v, want %v", tc.name, got, tc.want)
		}
	}
}
