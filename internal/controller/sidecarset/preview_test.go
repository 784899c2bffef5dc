package sidecarset

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// previewSet returns a SidecarSet selecting app=web in namespace shop with
// one sidecar running image.
func previewSet(image string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "logs"},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:  "shop",
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "logs", Image: image}}},
		},
	}
}

// previewPod returns a ready pod of a ReplicaSet that s injected (at its
// current spec), running s's sidecar image.
func previewPod(s *deckhandv1alpha1.SidecarSet, name string) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name),
			Labels:          map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "logs", Image: s.Spec.Containers[0].Image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true},
				{Name: "logs", Image: s.Spec.Containers[0].Image, Ready: true}}},
	}
	var rec sidecarcontrol.PodRecord
	hash, withoutImage := sidecarcontrol.Hashes(&s.Spec)
	rec.Set(s.Name, hash, withoutImage, []string{"logs"})
	rec.Apply(p)
	return p
}

func notReady(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	return p
}

// TestPreview pins what a rollout preview says, pass by pass, for an image
// change: the controller's planner run until nothing is left to do.
func TestPreview(t *testing.T) {
	old := previewSet("logs:1")
	type row struct {
		pod, action string
		step        int
	}
	pods := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, previewPod(old, fmt.Sprintf("web-%d", i)))
		}
		return out
	}
	intOrStr := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	cases := map[string]struct {
		strategy deckhandv1alpha1.SidecarSetUpdateStrategy
		pods     []*corev1.Pod
		want     []row
		steps    int
		held     bool
		why      map[string]string
		pdbs     []policyv1.PodDisruptionBudget
	}{
		"a PodDisruptionBudget that allows nothing holds the ready pods": {
			strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: intOrStr(2)}, pods: pods(2),
			pdbs: []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}}},
			want: []row{{"web-0", "None", 0}, {"web-1", "None", 0}},
			why:  map[string]string{"web-0": "PodDisruptionBudget web allows no disruption now"}},
		"two at a time": {strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: intOrStr(2)}, pods: pods(5), steps: 3,
			want: []row{{"web-0", "UpdateInPlace", 1}, {"web-1", "UpdateInPlace", 1}, {"web-2", "UpdateInPlace", 2},
				{"web-3", "UpdateInPlace", 2}, {"web-4", "UpdateInPlace", 3}}},
		"partition keeps the last": {strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: intOrStr(1), Partition: intOrStr(2)},
			pods: pods(3), steps: 1, want: []row{{"web-0", "UpdateInPlace", 1}, {"web-1", "None", 0}, {"web-2", "None", 0}},
			why: map[string]string{"web-1": "kept at its revision by updateStrategy.partition"}},
		"a pod not ready goes first at no cost, and holds the budget once updated": {
			strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: intOrStr(1)},
			pods:     append(pods(2), notReady(previewPod(old, "web-9"))), steps: 1,
			want: []row{{"web-9", "UpdateInPlace", 1}, {"web-0", "UpdateInPlace", 1}, {"web-1", "None", 0}},
			why:  map[string]string{"web-1": "waiting: maxUnavailable is used up by updated pods that are not ready"}},
		"paused: held, the passes are what runs once resumed": {
			strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: intOrStr(1), Paused: true}, pods: pods(2), steps: 2, held: true,
			want: []row{{"web-0", "UpdateInPlace", 1}, {"web-1", "UpdateInPlace", 2}}},
		"other pods are not listed": {strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: intOrStr(1)},
			pods: append(pods(1), func() *corev1.Pod { p := previewPod(old, "db-0"); p.Labels["app"] = "db"; return p }(),
				func() *corev1.Pod { p := previewPod(old, "web-0"); p.Namespace = "other"; return p }()),
			steps: 1, want: []row{{"web-0", "UpdateInPlace", 1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next := previewSet("logs:2")
			next.Spec.UpdateStrategy = tc.strategy
			lister := sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{})
			got := Preview(PreviewInput{Set: next, Lister: lister, Pods: tc.pods, Now: time.Now(),
				DisruptionBudgets: map[string][]policyv1.PodDisruptionBudget{"shop": tc.pdbs}})
			var rows []row
			for _, p := range got.Pods {
				rows = append(rows, row{p.Name, string(p.Action), p.Step})
				if want, ok := tc.why[p.Name]; ok && p.Why != want {
					t.Errorf("%s: why %q, want %q", p.Name, p.Why, want)
				}
			}
			if !reflect.DeepEqual(rows, tc.want) {
				t.Errorf("pods:\n got %v\nwant %v", rows, tc.want)
			}
			if got.Steps != tc.steps {
				t.Errorf("steps %d, want %d", got.Steps, tc.steps)
			}
			if (got.Held != "") != tc.held {
				t.Errorf("held %q, want held %v", got.Held, tc.held)
			}
			if hash, _ := sidecarcontrol.Hashes(&next.Spec); got.Revision != hash {
				t.Errorf("revision %q, want %q", got.Revision, hash)
			}
		})
	}
}
