package sidecarset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Reasons of the pod condition apps.deckhand.dev/SidecarSetsUpdatable.
const (
	// ReasonPodNotUpdatableInPlace: a SidecarSet's latest revision cannot
	// reach the pod in place; the message names the SidecarSets and why.
	ReasonPodNotUpdatableInPlace = "NotUpdatableInPlace"
	// ReasonPodUpdatableInPlace: every SidecarSet that named the pod not
	// updatable can update it in place again.
	ReasonPodUpdatableInPlace = "UpdatableInPlace"
)

// Writing the pod condition needs the status subresource, patch only.
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch,roleName=manager-sidecarset-role

// notUpdatableReason says why pod p cannot reach the SidecarSet's latest
// revision in place, "" if it can. It covers exactly the pods
// status.notUpdatablePods counts. The text has no "; " (the entry
// separator of the condition's message).
func notUpdatableReason(sc *scope, p *podState) string {
	if !p.injected() {
		return ""
	}
	evict := ""
	if sc.set.Spec.UpdateStrategy.Recreate == deckhandv1alpha1.RecreateEvict {
		evict = " (updateStrategy.recreate is Evict: the pod is evicted for its controller to recreate it)"
	}
	switch p.stage {
	case stageSpecBehind:
		return fmt.Sprintf("revision %s differs from the pod's %s in more than images and CPU or memory resources, so only recreating the pod brings its sidecars up to date%s",
			sc.compiled.Hash, p.revision, evict)
	case stageResizeFailed:
		return fmt.Sprintf("the in-place resize of the sidecars to revision %s was infeasible, refused or deferred too long, so only recreating the pod brings its sidecars up to date%s",
			sc.compiled.Hash, evict)
	}
	return ""
}

// syncPodConditions keeps the pod condition
// apps.deckhand.dev/SidecarSetsUpdatable in step with the pods
// status.notUpdatablePods counts: False, naming this SidecarSet and why,
// while the pod is among them; True again once no SidecarSet names it. A
// pod never named keeps no condition at all. A pod is written only when
// its condition changes.
func (r *Reconciler) syncPodConditions(ctx context.Context, sc *scope) (ctrl.Result, error) {
	w := podConditionWriter{r: r, set: sc.set.Name}
	for _, p := range sc.pods {
		if p.pending || !p.injected() || p.conditionSynced {
			continue
		}
		if want, ok := nextPodCondition(p.pod, p.record, sc.set.Name, notUpdatableReason(sc, p), sc.now); ok {
			w.write(ctx, p.pod, want)
		} else {
			p.conditionSynced = true
		}
	}
	return w.result()
}

// dropDeletedFromPodConditions removes the entry of SidecarSet name, which
// no longer exists, from the pod condition of every cached pod: no
// reconcile of that SidecarSet will clear it again, and a pod would
// otherwise read not updatable in place for good. Pods that carry no entry
// of it are not written.
func (r *Reconciler) dropDeletedFromPodConditions(ctx context.Context, name string) (ctrl.Result, error) {
	pods, err := r.Pods.Select(ctx, "", labels.Everything())
	if err != nil {
		return ctrl.Result{}, err
	}
	w := podConditionWriter{r: r, set: name}
	now := r.Clock.Now()
	for _, pod := range pods {
		r.releaseGateOfDeleted(ctx, pod, name, now, &w.outcome)
		if updatableCondition(pod) == nil {
			continue // nothing to drop, and no record to read
		}
		if want, ok := nextPodCondition(pod, sidecarcontrol.ReadPodRecord(pod.Annotations), name, "", now); ok {
			w.write(ctx, pod, want)
		}
	}
	return w.result()
}

// podConditionWriter writes the pod conditions of one reconcile and
// collects what the reconcile returns: a retry soon after a conflict, the
// other errors joined. A failed write of one pod does not keep the others
// from being written.
type podConditionWriter struct {
	r   *Reconciler
	set string
	outcome
}

func (w *podConditionWriter) write(ctx context.Context, pod *corev1.Pod, want corev1.PodCondition) {
	err := w.r.patchPodCondition(ctx, pod, want)
	switch {
	case err == nil:
		podConditionWrites.WithLabelValues(w.set, "success").Inc()
	case apierrors.IsConflict(err):
		podConditionWrites.WithLabelValues(w.set, "conflict").Inc()
		// The cache is behind the pod (it was just updated, or another
		// SidecarSet wrote its part of the condition): try again from a
		// fresher copy.
		w.retryAfter(time.Second)
	case apierrors.IsNotFound(err):
	default:
		podConditionWrites.WithLabelValues(w.set, "error").Inc()
		w.fail(err)
	}
}

// nextPodCondition returns the condition pod should carry once the entry
// of SidecarSet name says why ("" for nothing to say), and whether that
// differs from what it carries. Each SidecarSet owns its entry of the
// message ("SidecarSet <name>: <why>", entries sorted by name and joined by
// "; "); entries of SidecarSets the pod's record rec no longer holds are
// dropped.
func nextPodCondition(pod *corev1.Pod, rec sidecarcontrol.PodRecord, name, why string, now time.Time) (corev1.PodCondition, bool) {
	cur := updatableCondition(pod)
	if cur == nil && why == "" {
		return corev1.PodCondition{}, false
	}
	entries := map[string]string{}
	if cur != nil && cur.Status == corev1.ConditionFalse {
		for _, e := range strings.Split(cur.Message, "; ") {
			set, text, ok := strings.Cut(strings.TrimPrefix(e, "SidecarSet "), ": ")
			if ok && strings.HasPrefix(e, "SidecarSet ") && rec.Has(set) {
				entries[set] = text
			}
		}
	}
	delete(entries, name)
	if why != "" {
		entries[name] = why
	}
	want := corev1.PodCondition{Type: deckhandv1alpha1.SidecarSetsUpdatablePodCondition, Status: corev1.ConditionTrue, Reason: ReasonPodUpdatableInPlace,
		Message: "every SidecarSet of the pod can update its sidecars in place"}
	if len(entries) > 0 {
		names := make([]string, 0, len(entries))
		for n := range entries {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = "SidecarSet " + n + ": " + entries[n]
		}
		want.Status, want.Reason, want.Message = corev1.ConditionFalse, ReasonPodNotUpdatableInPlace, strings.Join(parts, "; ")
	}
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
		return corev1.PodCondition{}, false
	}
	want.LastTransitionTime = metav1.NewTime(now)
	if cur != nil && cur.Status == want.Status {
		want.LastTransitionTime = cur.LastTransitionTime
	}
	return want, true
}

// updatableCondition returns pod's SidecarSetsUpdatable condition, nil if
// it has none.
func updatableCondition(pod *corev1.Pod) *corev1.PodCondition {
	var cur *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == deckhandv1alpha1.SidecarSetsUpdatablePodCondition {
			cur = &pod.Status.Conditions[i]
		}
	}
	return cur
}

// patchPodCondition writes cond to the pod's status with a strategic merge
// patch: pod conditions merge by type, so the patch touches this condition
// only. The pod's resourceVersion in the patch makes it fail with a
// conflict when the pod changed since it was read (another SidecarSet may
// have written its entry of the same condition).
func (r *Reconciler) patchPodCondition(ctx context.Context, pod *corev1.Pod, cond corev1.PodCondition) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err != nil {
		return err
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	return r.Client.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, body), client.FieldOwner(deckhandv1alpha1.FieldManager))
}

// releaseGateOfDeleted opens the in-place update gate of a pod that
// SidecarSet name, now deleted, injected or closed, once its containers run
// ready: no other SidecarSet would (it opens only the gates it closed, or
// none written yet, of pods it injected), and a gate never opened keeps the
// pod out of Ready for good. Pod events of a pod whose record names the
// SidecarSet bring its name back here, after a restart too.
func (r *Reconciler) releaseGateOfDeleted(ctx context.Context, pod *corev1.Pod, name string, now time.Time, out *outcome) {
	if !inplacegate.Gated(pod) || inplacegate.Open(pod) || !inplacegate.ContainersReady(pod) ||
		!slices.Contains(sidecarcontrol.ReadPodRecord(pod.Annotations).Names(), name) {
		return
	}
	err := inplacegate.Release(ctx, r.Client, pod, gateOwner(name), now)
	switch {
	case err == nil, apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		out.retryAfter(time.Second)
	default:
		out.fail(err)
	}
}
