package podset

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/podcache"
)

// now is the time the pure-logic tests are set at.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// podOpt changes a pod mkPod builds.
type podOpt func(*corev1.Pod)

// mkPod builds a pod for the pure-logic tests: Running and Ready on node-a
// since an hour before now, then changed by opts.
func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:   corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	ready(now.Add(-time.Hour))(p)
	for _, o := range opts {
		o(p)
	}
	return p
}

func ready(since time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}
	}
}
func notReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
}
func unscheduled(p *corev1.Pod) {
	p.Spec.NodeName = ""
	p.Status.Phase = corev1.PodPending
	notReady(p)
}
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func node(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func cost(c string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{deckhandv1alpha1.PodDeletionCostAnnotation: c}
	}
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: n}}
	}
}
func created(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func tmpl(image string, mut ...func(*corev1.PodTemplateSpec)) *corev1.PodTemplateSpec {
	t := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Image: image},
			{Name: "side", Image: "busybox:1"},
		}},
	}
	for _, m := range mut {
		m(t)
	}
	return t
}

// view builds a podView: updated / available / inPlaceOK flags from a spec
// string such as "old,avail,inplace".
func view(name string, updated, available, inPlaceOK bool, opts ...podOpt) podView {
	p := mkPod(name, opts...)
	if !available {
		notReady(p)
	}
	return podView{pod: p, updated: updated, available: available, inPlaceOK: inPlaceOK}
}

// webScope is the sync scope of PodSet shop/web: replicas of one nginx
// container, selecting app=web, on revision r1 (in-place hash h1).
func webScope(replicas int32) *scope {
	ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"}}
	ps.Spec.Replicas = ptr.To(replicas)
	ps.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	ps.Spec.Template.Labels = map[string]string{"app": "web"}
	ps.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx"}}
	return &scope{ps: ps, key: "shop/web", selector: labels.SelectorFromSet(ps.Spec.Template.Labels), revision: "r1", inPlace: "h1"}
}

// clientReconciler is a Reconciler that reads and writes through c alone,
// started an hour ago (writes of a process before it are settled).
func clientReconciler(c client.Client) *Reconciler {
	return &Reconciler{Client: c, APIReader: c, PodWriter: c, Recorder: events.NewFakeRecorder(100),
		Expectations: expectations.New(), Clock: clock.RealClock{}, pods: podcache.ListerFromReader(c),
		trust: newCacheTrust(time.Now().Add(-time.Hour))}
}
