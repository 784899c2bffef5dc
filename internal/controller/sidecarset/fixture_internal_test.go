package sidecarset

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// podWith builds the podState of a pod called name from flags: r ready, c
// on the latest revision, u updated, p with an update pending, x not
// upgradable in place, z upgradable through a resize, s out of the update
// selector's scope, n not injected, k not injected because of a container
// name clash, o without a controller owner, d resize due, f resize failed,
// g its in-place update gate closed.
// Without a flag, the opposite: an injected, controlled pod in scope, behind
// the latest revision in images only.
func podWith(name, flags string) *podState {
	has := func(flag rune) bool { return strings.ContainsRune(flags, flag) }
	st := &podState{
		pod:   &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}},
		ready: has('r'), inScope: !has('s'), pending: has('p'), controlled: !has('o'), gateClosed: has('g'),
	}
	switch {
	case has('k'):
		st.stage, st.clash = stageNameClash, "proxy"
	case has('n'):
		st.stage = stageNotInjected
	case has('c') && has('f'):
		st.stage, st.resize = stageResizeFailed, resizeWaiting
	case has('c') && has('u'):
		st.stage = stageUpdated
	case has('c'):
		st.stage = stageRollingOut
	case has('x'):
		st.stage = stageSpecBehind
	case has('z'):
		st.stage = stageResourcesBehind
	default:
		st.stage = stageImagesBehind
	}
	if has('d') {
		st.resize = resizeDue
	}
	return st
}

// podNames are the names of the pods of ps, in order.
func podNames(ps []*podState) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.pod.Name)
	}
	return out
}

// classifyInputFor is what a reconcile classifies s's pods with: s compiled
// by a Lister of its own, now and a deferred resize timeout of a minute.
func classifyInputFor(s *deckhandv1alpha1.SidecarSet) classifyInput {
	c := sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{}).Compiled(s)
	return classifyInput{set: s, compiled: c, now: time.Now(), deferredTimeout: time.Minute}
}

// classifyPod is the podState classify computes for p.
func classifyPod(in classifyInput, p *corev1.Pod) *podState {
	st := &podState{}
	classify(in, p, st)
	return st
}

// recordInjection writes the record of SidecarSet set injecting containers
// at revision hash (withoutImage: its hash without images) on p.
func recordInjection(p *corev1.Pod, set, hash, withoutImage string, containers ...string) {
	rec := sidecarcontrol.PodRecord{}
	rec.Set(set, hash, withoutImage, containers)
	rec.Apply(p)
}

// resizableSet is a SidecarSet s for the pods labelled app=a whose proxy
// container (image image) requests 200m CPU.
func resizableSet(image string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: image,
				Resources: corev1.ResourceRequirements{Requests: cpu("200m")}}}},
		},
	}
}

func cpu(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
}

// cacheFixture is a SidecarSet read from an API server (UID, generation)
// and a way to build its injected pods.
type cacheFixture struct {
	set *deckhandv1alpha1.SidecarSet
	in  classifyInput
}

func newCacheFixture(generation int64) cacheFixture {
	s := resizableSet(fmt.Sprintf("proxy:%d", generation))
	s.UID, s.Generation = "set-uid", generation
	return cacheFixture{set: s, in: classifyInputFor(s)}
}

// pod is an injected pod at the fixture's revision, Ready or not, at
// resourceVersion rv.
func (f cacheFixture) pod(uid, rv string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	image := f.set.Spec.Containers[0].Image
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "proxy", Image: image}}},
		Status: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: ready}, {Name: "proxy", Image: image, Ready: ready}},
		},
	}
	recordInjection(p, f.set.Name, f.in.compiled.Hash, f.in.compiled.HashWithoutImage, "proxy")
	return p
}

// initSet returns a SidecarSet with a plain init container (setup), a native
// sidecar (agent) and a container (proxy), all at image version 1.
func initSet() *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
		InitContainers: []deckhandv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "setup", Image: "setup:1"}},
			{Container: corev1.Container{Name: "agent", Image: "agent:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		},
		Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1"}}},
	}}
}

// initPod returns a running, ready pod injected with s, recording s's
// revision.
func initPod(s *deckhandv1alpha1.SidecarSet) *corev1.Pod {
	hash, withoutImage := sidecarcontrol.Hashes(&s.Spec)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{s.Spec.InitContainers[0].Container, s.Spec.InitContainers[1].Container},
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, s.Spec.Containers[0].Container},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "setup", Image: "setup:1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "agent", Image: "agent:1", Ready: true},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true}, {Name: "proxy", Image: "proxy:1", Ready: true}},
		},
	}
	recordInjection(p, s.Name, hash, withoutImage, "setup", "agent", "proxy")
	return p
}

// inPlaceRollout is a SidecarSet s rolling proxy:2 out in place, at most
// two pods unavailable, pods labelled first=yes first; a fake API server
// (live) holding gated, Ready pods injected at proxy:1 (initPod); and a
// Reconciler writing to it, whose cache the test chooses.
type inPlaceRollout struct {
	set  *deckhandv1alpha1.SidecarSet
	live client.Client
	r    *Reconciler
}

func newInPlaceRollout(now time.Time, podNames ...string) inPlaceRollout {
	old := initSet()
	s := old.DeepCopy()
	s.UID, s.Generation = "set-uid", 2
	s.Spec.Containers[0].Image = "proxy:2"
	s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	s.Spec.UpdateStrategy.PriorityStrategy = &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{
		{Weight: 100, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"first": "yes"}}},
	}}
	var pods []client.Object
	for _, name := range podNames {
		p := initPod(old)
		p.Name, p.UID, p.Labels = name, types.UID("uid-"+name), map[string]string{"app": "a"}
		inplacegate.Add(&p.Spec)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: inplacegate.ConditionType, Status: corev1.ConditionTrue})
		pods = append(pods, p)
	}
	live := podClient(pods...)
	r := &Reconciler{Client: live, APIReader: live, Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakePassiveClock(now),
		Lister: sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{})}
	r.memory.updates = expectations.New()
	return inPlaceRollout{set: s, live: live, r: r}
}

// pass is one rollout pass of f's Reconciler at now, reading pods from
// cache: it observes the pods, computes the status and updates pods.
func (f inPlaceRollout) pass(ctx context.Context, t *testing.T, cache client.Reader, now time.Time) {
	t.Helper()
	f.r.Pods = podcache.ListerFromReader(cache)
	sc := &scope{set: f.set, compiled: f.r.Lister.Compiled(f.set), now: now, memory: f.r.memory.of(f.set), held: map[types.UID]bool{}}
	if _, err := reconcileutil.Run(ctx, sc, reconcileutil.StopOnError(f.r.observePods, f.r.computeStatus, f.r.updatePods)); err != nil {
		t.Fatal(err)
	}
}

// label sets label key to value on the pods called names in f's API server.
func (f inPlaceRollout) label(ctx context.Context, t *testing.T, key, value string, names ...string) {
	t.Helper()
	for _, name := range names {
		p := &corev1.Pod{}
		if err := f.live.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, p); err != nil {
			t.Fatal(err)
		}
		p.Labels[key] = value
		if err := f.live.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// podClient is a fake API server holding pods.
func podClient(pods ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Pod{}).WithObjects(pods...).Build()
}

// snapshot is a fake API server holding the pods c holds now: a cache that
// shows none of c's later writes.
func snapshot(ctx context.Context, t *testing.T, c client.Client) client.Client {
	t.Helper()
	var list corev1.PodList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	pods := make([]client.Object, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	return podClient(pods...)
}
