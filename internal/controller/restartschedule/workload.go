package restartschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/rollout"
)

// Workload kinds a RestartSchedule can restart.
const (
	kindDeployment  = "Deployment"
	kindStatefulSet = "StatefulSet"
	kindDaemonSet   = "DaemonSet"
	kindPodSet      = "PodSet"
)

// workloadKinds are the kinds the restart-schedule annotation generates
// RestartSchedules for.
var workloadKinds = []string{kindDeployment, kindStatefulSet, kindDaemonSet}

// targetKinds are the kinds a RestartSchedule restarts: the workload kinds
// and Deckhand's own PodSet.
var targetKinds = []string{kindDeployment, kindStatefulSet, kindDaemonSet, kindPodSet}

// workloadTypes are the Go types of each target kind: an object and a list.
var workloadTypes = map[string]struct {
	object func() client.Object
	list   func() client.ObjectList
}{
	kindDeployment:  {func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	kindStatefulSet: {func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }},
	kindDaemonSet:   {func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }},
	kindPodSet:      {func() client.Object { return &deckhandv1alpha1.PodSet{} }, func() client.ObjectList { return &deckhandv1alpha1.PodSetList{} }},
}

// newWorkload returns an empty object of the workload kind.
func newWorkload(kind string) (client.Object, error) {
	t, ok := workloadTypes[kind]
	if !ok {
		return nil, fmt.Errorf("unsupported workload kind %q", kind)
	}
	return t.object(), nil
}

// workloadKey is "Kind/name", the form used in history entries and indexes.
func workloadKey(kind, name string) string { return kind + "/" + name }

// kindOf returns the workload kind of a typed object.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return kindDeployment
	case *appsv1.StatefulSet:
		return kindStatefulSet
	case *appsv1.DaemonSet:
		return kindDaemonSet
	case *deckhandv1alpha1.PodSet:
		return kindPodSet
	}
	return ""
}

// template returns the workload's pod template.
func template(obj client.Object) *corev1.PodTemplateSpec {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template
	case *appsv1.StatefulSet:
		return &w.Spec.Template
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	case *deckhandv1alpha1.PodSet:
		return &w.Spec.Template
	}
	return nil
}

// restartedAt is the workload's current restarted-at template annotation.
func restartedAt(obj client.Object) string {
	if t := template(obj); t != nil {
		return t.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
	}
	return ""
}

// listTargets returns the workloads a RestartSchedule selects, sorted by
// kind then name so that runs restart them in a stable order.
func listTargets(ctx context.Context, c client.Reader, rs *deckhandv1alpha1.RestartSchedule) ([]deckhandv1alpha1.RestartWorkloadReference, error) {
	t := rs.Spec.Target
	if t.TargetRef != nil {
		return []deckhandv1alpha1.RestartWorkloadReference{*t.TargetRef}, nil
	}
	if t.Selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Selector)
	if err != nil {
		return nil, err
	}
	var refs []deckhandv1alpha1.RestartWorkloadReference
	opts := []client.ListOption{client.InNamespace(rs.Namespace), client.MatchingLabelsSelector{Selector: sel}}
	for _, kind := range targetKinds {
		list := workloadTypes[kind].list()
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			refs = append(refs, deckhandv1alpha1.RestartWorkloadReference{Kind: kind, Name: o.(client.Object).GetName()})
		}
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Kind != refs[j].Kind {
			return refs[i].Kind < refs[j].Kind
		}
		return refs[i].Name < refs[j].Name
	})
	return refs, nil
}

// skipReason says why a workload must not be restarted, or "".
func skipReason(obj client.Object) string {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		if w.Spec.Paused {
			return "Deployment is paused: a restart would not roll out until it is resumed"
		}
	case *appsv1.StatefulSet:
		if w.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
			return "StatefulSet uses the OnDelete update strategy: a restart would not replace its pods"
		}
	case *appsv1.DaemonSet:
		if w.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			return "DaemonSet uses the OnDelete update strategy: a restart would not replace its pods"
		}
	case *deckhandv1alpha1.PodSet:
		if w.Spec.Paused {
			return "PodSet is paused: a restart would not roll out until it is resumed"
		}
		if w.Spec.UpdateStrategy.Type == deckhandv1alpha1.OnDeletePodSetStrategyType {
			return "PodSet uses the OnDelete update strategy: a restart would not replace its pods"
		}
	}
	return ""
}

// restartPatch sets only the restarted-at pod-template annotation. A JSON
// merge patch touches nothing else, and sent with Deckhand's field manager
// it records Deckhand as the owner of that one field (as an Update entry,
// separate from any server-side apply entries, so that a later apply of the
// pod template by any manager that does not list the annotation leaves it
// alone).
func restartPatch(slot time.Time) client.Patch {
	body, _ := json.Marshal(map[string]any{
		"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{deckhandv1alpha1.RestartedAtAnnotation: formatSlot(slot)},
		}}},
	})
	return client.RawPatch(types.MergePatchType, body)
}

// formatSlot is the annotation value of a slot.
func formatSlot(slot time.Time) string { return slot.UTC().Format(time.RFC3339) }

// The outcomes of a rollout check, as the reconciler compares them.
const (
	rolloutComplete = rollout.Complete
	rolloutFailed   = rollout.Failed
)

// rolloutStatus applies `kubectl rollout status` rules to a workload. minGen
// is the generation the restart produced: until the workload's controller
// has observed it, the rollout has not even started (this also guards
// against a stale cache that has not yet seen the patch).
func rolloutStatus(obj client.Object, minGen int64) (rollout.State, string) {
	if obj.GetGeneration() < minGen {
		return rollout.InProgress, "waiting for the restart to reach the cache"
	}
	return rollout.Status(obj)
}

// workloadPods reads a target workload and the pods it controls, from the
// namespace's pods grouped by podsByWorkload; nil when the workload does not
// exist.
func (r *Reconciler) workloadPods(ctx context.Context, ns string, ref deckhandv1alpha1.RestartWorkloadReference, byWorkload map[string][]*corev1.Pod) (*needWorkload, error) {
	obj, err := newWorkload(ref.Kind)
	if err != nil {
		return nil, err
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	sel, desired := selectorOf(obj)
	if sel == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("%s: spec.selector: %w", workloadKey(ref.Kind, ref.Name), err)
	}
	w := &needWorkload{key: workloadKey(ref.Kind, ref.Name), desired: desired}
	for _, p := range byWorkload[w.key] {
		if selector.Matches(labels.Set(p.Labels)) && controlledBy(obj, p) {
			w.pods = append(w.pods, p)
		}
	}
	return w, nil
}

// podsByWorkload lists the namespace's pods once and groups them by the
// workload that controls them (podWorkload): one pass over the namespace
// per evaluation, where a list per target workload went over all of its
// pods each time (100 StatefulSets of 100 pods: a million pods looked at an evaluation).
func (r *Reconciler) podsByWorkload(ctx context.Context, ns string) (map[string][]*corev1.Pod, error) {
	lister, err := r.pods.lister(ctx, r.Client)
	if err != nil {
		return nil, err
	}
	pods, err := lister.Select(ctx, ns, labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if key := podWorkload(p); key != "" {
			out[key] = append(out[key], p)
		}
	}
	return out, nil
}

// podSource lists the target workloads' pods as the pod informer holds
// them, read-only: through the client every evaluation copied every pod it
// listed, 10,000 copies a 15-second evaluation for a memory trigger over
// 10,000 pods. The lister is built at the first evaluation of a trigger, so
// that a manager whose schedules have none starts no pod informer.
type podSource struct {
	// cache is the manager's; nil lists through the reconciler's client
	// (unit tests without a manager).
	cache ctrlcache.Cache
	// watch starts the reconciler's pod watch (podTurnSource) with the
	// lister.
	watch func() error

	mu   sync.Mutex
	pods *podcache.Lister
}

func (s *podSource) lister(ctx context.Context, c client.Reader) (*podcache.Lister, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods != nil {
		return s.pods, nil
	}
	if s.cache == nil {
		return podcache.ListerFromReader(c), nil
	}
	l, err := podcache.NewLister(ctx, s.cache)
	if err != nil {
		return nil, fmt.Errorf("reading the pod cache: %w", err)
	}
	if s.watch != nil {
		if err := s.watch(); err != nil {
			return nil, fmt.Errorf("watching pods: %w", err)
		}
	}
	s.pods = l
	return l, nil
}

// selectorOf is the workload's pod selector and how many pods it wants.
func selectorOf(obj client.Object) (*metav1.LabelSelector, int) {
	replicas := func(r *int32) int {
		if r == nil {
			return 1
		}
		return int(*r)
	}
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return w.Spec.Selector, replicas(w.Spec.Replicas)
	case *appsv1.StatefulSet:
		return w.Spec.Selector, replicas(w.Spec.Replicas)
	case *appsv1.DaemonSet:
		return w.Spec.Selector, int(w.Status.DesiredNumberScheduled)
	case *deckhandv1alpha1.PodSet:
		return w.Spec.Selector, replicas(w.Spec.Replicas)
	}
	return nil, 0
}

// controlledBy reports whether the workload controls pod: a pod that only
// matches its selector is not the workload's to replace. A Deployment's
// pods are controlled by its ReplicaSets, named after it and the pod's
// template hash.
func controlledBy(obj client.Object, pod *corev1.Pod) bool {
	ref := controllerOf(pod)
	if ref == nil {
		return false
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		return ref.Kind == "ReplicaSet" && hash != "" && ref.Name == d.Name+"-"+hash
	}
	return ref.UID == obj.GetUID()
}
