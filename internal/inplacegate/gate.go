package inplacegate

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// ConditionType is the pod condition the gate reads. A pod that lists it in
// spec.readinessGates is Ready only while it is True (the kubelet's rule),
// so writing it False makes the EndpointSlice controller mark the pod's
// endpoints not ready while its containers still serve.
const ConditionType corev1.PodConditionType = "apps.deckhand.dev/in-place-update-ready"

// DefaultGracePeriodSeconds is how long an in-place update waits between
// the pod's turning not Ready under its closed gate and patching the
// images (MayRestart) when the update strategy does not say. The EndpointSlice controller took 31 to 253 ms to mark a
// gated pod's endpoint not ready on the local cluster, on two cores shared
// with other suites (the e2e tests TestInPlaceUpdateLeavesEndpointsFirst and
// TestSidecarInPlaceUpdateLeavesEndpointsFirst log the figure of each run;
// docs/podset.md keeps some); a kube-proxy or load balancer then needs its
// own time to stop sending, which a real cluster's grace period has to
// cover.
const DefaultGracePeriodSeconds = 1

// Reasons of the gate condition.
const (
	// ReasonUpdating: an in-place update is about to restart, or is
	// restarting, containers of the pod.
	ReasonUpdating = "InPlaceUpdating"
	// ReasonReady: no in-place update is under way.
	ReasonReady = "InPlaceUpdateReady"
)

// Add lists the gate in spec's readiness gates, once.
func Add(spec *corev1.PodSpec) {
	if hasGate(spec) {
		return
	}
	spec.ReadinessGates = append(spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: ConditionType})
}

// Gated reports whether pod lists the gate. A pod created before the gate
// existed does not, and is updated in place without it.
func Gated(pod *corev1.Pod) bool {
	return hasGate(&pod.Spec)
}

func hasGate(spec *corev1.PodSpec) bool {
	for _, g := range spec.ReadinessGates {
		if g.ConditionType == ConditionType {
			return true
		}
	}
	return false
}

// Condition returns pod's gate condition, nil if it has none.
func Condition(pod *corev1.Pod) *corev1.PodCondition {
	return condition(pod, ConditionType)
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// Status is the status of pod's gate condition, empty when it has none:
// the value a controller that closed the gate waits to see in its cache.
func Status(pod *corev1.Pod) corev1.ConditionStatus {
	if c := Condition(pod); c != nil {
		return c.Status
	}
	return ""
}

// MayRestart decides whether an in-place update may restart pod's
// containers now. A pod without the gate may at once. close tells that the
// gate is not False yet and must be written first: then a pod that is not
// Ready anyway (out of its endpoints already) may restart as soon as it is
// written, and a Ready one waits. A pod whose gate is False may restart
// once the kubelet has turned its Ready condition False (the
// EndpointSlice controller takes a pod out on that, not on the gate write,
// and a loaded kubelet writes it later) and the grace period has passed
// since, counted from Ready's lastTransitionTime or from the gate's,
// whichever is later (the time the endpoints and the proxies take to drop
// the pod). Until then it says how long is left; while the pod is still
// Ready, the grace period or readyPoll, the longer, as a fallback to the
// pod's own update event. A kubelet that never reports the pod not Ready
// keeps it waiting: the update never restarts a pod that may still be
// serving. Everything it reads is on the pod, so a manager that restarts
// in the middle decides the same.
func MayRestart(pod *corev1.Pod, grace time.Duration, now time.Time) (ok, close bool, wait time.Duration) {
	if !Gated(pod) {
		return true, false, 0
	}
	c := Condition(pod)
	if c == nil || c.Status != corev1.ConditionFalse {
		if !podutil.IsPodReady(pod) {
			return true, true, 0
		}
		return false, true, grace
	}
	if podutil.IsPodReady(pod) {
		return false, false, max(grace, readyPoll)
	}
	since := closedSince(c.LastTransitionTime)
	if r := condition(pod, corev1.PodReady); r != nil {
		if out := closedSince(r.LastTransitionTime); out.After(since) {
			since = out
		}
	}
	if wait = since.Add(grace).Sub(now); wait > 0 {
		return false, false, wait
	}
	return true, false, 0
}

// readyPoll is how soon a pod whose gate is closed and that is still Ready
// is looked at again, at the least.
const readyPoll = time.Second

// closedSince is when a condition that changed at t changed, as late as t
// allows: the API server stores lastTransitionTime to the second, so a
// time with no fraction stands for any instant of that second, and the
// grace period counts from its end, never shorter than asked.
func closedSince(t metav1.Time) time.Time {
	if t.Nanosecond() == 0 {
		return t.Add(time.Second)
	}
	return t.Time
}

// Closed reports whether pod's gate condition is False: an in-place update
// has taken, or is taking, the pod out of its endpoints.
func Closed(pod *corev1.Pod) bool {
	c := Condition(pod)
	return Gated(pod) && c != nil && c.Status == corev1.ConditionFalse
}

// Open reports whether pod's gate lets it be Ready: it is not gated, or
// its gate condition is True.
func Open(pod *corev1.Pod) bool {
	c := Condition(pod)
	return !Gated(pod) || (c != nil && c.Status == corev1.ConditionTrue)
}

// ContainersReady reports whether every container and native sidecar of pod
// runs the image its spec names and is ready (podutil.RunsReady): an
// in-place update is over, or none is under way, and the gate may open.
func ContainersReady(pod *corev1.Pod) bool {
	for i := range pod.Spec.Containers {
		if !podutil.RunsReady(pod.Status.ContainerStatuses, pod.Spec.Containers[i].Name, pod.Spec.Containers[i].Image) {
			return false
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if podutil.IsNativeSidecar(c) && !podutil.RunsReady(pod.Status.InitContainerStatuses, c.Name, c.Image) {
			return false
		}
	}
	return true
}

// ReadyAwaited reports whether pod's gate is open and its containers are
// ready while the pod is not Ready yet: the kubelet has not yet written what
// the gate's opening makes of it, so the pod is not back in its endpoints.
func ReadyAwaited(pod *corev1.Pod) bool {
	return Gated(pod) && Open(pod) && ContainersReady(pod) && !podutil.IsPodReady(pod)
}

// Close writes the gate False, unless it already is, naming in its message
// the object that closes it (by, e.g. "PodSet web"): only that object opens
// it again (Release). Another controller's update that finds the gate
// closed restarts under it.
//
// It returns the pod as written (pod itself when nothing was): an image
// patch that follows carries the pod's new resourceVersion.
func Close(ctx context.Context, c client.Client, pod *corev1.Pod, by string, now time.Time) (*corev1.Pod, error) {
	if cur := Condition(pod); !Gated(pod) || (cur != nil && cur.Status == corev1.ConditionFalse) {
		return pod, nil
	}
	return patch(ctx, c, pod, corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionFalse,
		Reason: ReasonUpdating, Message: by + closedMessage, LastTransitionTime: metav1.NewTime(now)})
}

const closedMessage = " updates the pod in place"

// Release writes the gate True, unless it already is or another object
// than by closed it: by has seen every container ready on its spec image
// (ContainersReady), after its update or at the pod's start (a new pod
// has no gate condition yet).
func Release(ctx context.Context, c client.Client, pod *corev1.Pod, by string, now time.Time) error {
	if !releasable(pod, by) {
		return nil
	}
	_, err := patch(ctx, c, pod, corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionTrue,
		Reason: ReasonReady, Message: "no in-place update is under way", LastTransitionTime: metav1.NewTime(now)})
	return err
}

// releasable reports whether by may open pod's gate: it is not open, and
// not closed by another.
func releasable(pod *corev1.Pod, by string) bool {
	if Open(pod) {
		return false
	}
	cur := Condition(pod)
	return cur == nil || cur.Status != corev1.ConditionFalse || cur.Message == by+closedMessage
}

// patch writes cond through the pods/status subresource with a strategic
// merge patch: pod conditions merge by type, so the conditions the kubelet
// writes (Ready, ContainersReady...) are left as they are. The pod's
// resourceVersion in the patch makes it fail with a conflict when the pod
// changed since it was read: a decision taken on a cache that lags is not
// written (each write would be one more event for the cache to catch up
// on), and the next sync decides again.
func patch(ctx context.Context, c client.Client, pod *corev1.Pod, cond corev1.PodCondition) (*corev1.Pod, error) {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err != nil {
		return nil, err
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := c.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, body), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		return nil, err
	}
	return target, nil
}

// GracePeriod is seconds as a duration, DefaultGracePeriodSeconds when nil.
func GracePeriod(seconds *int32) time.Duration {
	if seconds == nil {
		return DefaultGracePeriodSeconds * time.Second
	}
	return time.Duration(*seconds) * time.Second
}
