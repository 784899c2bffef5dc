package podset

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/rolloutpreview"
)

// TestPreview pins the syncs a PodSet preview lists for an image change
// (in place) and an env change (recreated), against the planner.
func TestPreview(t *testing.T) {
	template := func(image, env string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image, Env: []corev1.EnvVar{{Name: "MODE", Value: env}}}}}}
	}
	old := template("web:1", "a")
	// pods of the old template, as the controller creates them.
	pods := func(n int, opts ...podOpt) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			p := mkPod(string(rune('a'+i)), opts...)
			p.Labels = map[string]string{"app": "web", deckhandv1alpha1.PodSetRevisionLabel: Revision(&old)}
			p.Annotations = map[string]string{deckhandv1alpha1.PodSetInPlaceHashAnnotation: InPlaceHash(&old)}
			out = append(out, p)
		}
		return out
	}
	type row struct {
		name, action string
		step         int
	}
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	cases := map[string]struct {
		template corev1.PodTemplateSpec
		strategy deckhandv1alpha1.PodSetUpdateStrategy
		pods     []*corev1.Pod
		paused   bool
		failed   bool
		want     []row
		steps    int
		creates  []int
	}{
		"image change in place, one at a time": {template: template("web:2", "a"),
			strategy: deckhandv1alpha1.PodSetUpdateStrategy{MaxUnavailable: num(1), MaxSurge: num(0)}, pods: pods(3), steps: 3, creates: []int{0, 0, 0},
			want: []row{{"a", "UpdateInPlace", 1}, {"b", "UpdateInPlace", 2}, {"c", "UpdateInPlace", 3}}},
		// 25% of 2 is 0 unavailable and 1 surge: a pod is created first, the
		// old ones are patched one at a time, and the surplus goes last.
		"the default strategy at 2 replicas rolls on the surge": {template: template("web:2", "a"), pods: pods(2),
			strategy: deckhandv1alpha1.PodSetUpdateStrategy{MaxUnavailable: pct("25%"), MaxSurge: pct("25%")}, steps: 4, creates: []int{1, 0, 0, 0},
			want: []row{{"a", "UpdateInPlace", 2}, {"b", "UpdateInPlace", 3}}},
		"env change: recreated, surge first": {template: template("web:1", "b"),
			strategy: deckhandv1alpha1.PodSetUpdateStrategy{MaxUnavailable: num(0), MaxSurge: num(1)}, pods: pods(2), steps: 4, creates: []int{1, 0, 1, 0},
			want: []row{{"a", "Recreate", 2}, {"b", "Recreate", 4}}},
		"paused: nothing moves": {template: template("web:2", "a"), pods: pods(2), paused: true,
			want: []row{{"a", "None", 0}, {"b", "None", 0}}},
		"failed rollout: nothing moves": {template: template("web:2", "a"), pods: pods(2), failed: true,
			strategy: deckhandv1alpha1.PodSetUpdateStrategy{MaxUnavailable: num(2)},
			want:     []row{{"a", "None", 0}, {"b", "None", 0}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: deckhandv1alpha1.PodSetSpec{
				Replicas: ptr.To(int32(len(tc.pods))), Template: tc.template, UpdateStrategy: tc.strategy, Paused: tc.paused}}
			if tc.failed {
				ps.Status.StableRevision, ps.Status.FailedRevision = Revision(&old), Revision(&tc.template)
			}
			held := tc.paused || tc.failed
			got := Preview(PreviewInput{PodSet: ps, Pods: tc.pods, Now: now})
			var rows []row
			moved := map[string]bool{}
			for _, p := range got.Pods {
				rows = append(rows, row{p.Name, string(p.Action), p.Step})
				if p.Action != rolloutpreview.None {
					moved[p.Name] = true
				}
			}
			if tc.want != nil && !reflect.DeepEqual(rows, tc.want) {
				t.Errorf("pods:\n got %v\nwant %v", rows, tc.want)
			}
			if tc.creates != nil && (got.Steps != tc.steps || !reflect.DeepEqual(got.Creates, tc.creates)) {
				t.Errorf("steps %d creates %v, want %d %v", got.Steps, got.Creates, tc.steps, tc.creates)
			}
			if !held && len(moved) != len(tc.pods) {
				t.Errorf("not every pod reaches the template: %+v", got)
			}
			if held && (got.Held == "" || got.Steps != 0) {
				t.Errorf("held: %q, steps %d", got.Held, got.Steps)
			}
		})
	}
}
