package sidecarpolicy

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// ReasonPolicyNotYetInEffect: the policy and binding are written, but a
// dry-run pod the SidecarSet selects is not yet injected with the current
// revision: the API server has not loaded the policy yet (it does so
// asynchronously, typically within a second).
const ReasonPolicyNotYetInEffect = "PolicyNotYetInEffect"

// ProbeAnnotation marks the dry-run pod by which the controller checks that
// the API server applies a SidecarSet's policy; its value is the
// SidecarSet's name. The pod is never stored: the mark is for audit logs
// and admission plugins that see the request.
const ProbeAnnotation = "apps.deckhand.dev/injection-probe"

// probeContainer is the probe pod's only own container.
const probeContainer = "deckhand-injection-probe"

// Retries of the probe while the API server has not loaded the policy:
// doubling from the first, up to the last.
const (
	probeRetryMin = 50 * time.Millisecond
	probeRetryMax = 5 * time.Second
)

// The probe is a dry-run create of a pod: nothing is stored, and the
// ValidatingAdmissionPolicy that confines Deckhand's ServiceAccount does not
// judge dry runs. Namespaces are read from the cache (metadata only).
// +kubebuilder:rbac:groups="",resources=pods,verbs=create,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch,roleName=manager-sidecarset-role

// probePod returns a pod that s selects, in a namespace it selects, or nil
// and why none can be built.
func (r *Reconciler) probePod(ctx context.Context, s *deckhandv1alpha1.SidecarSet) (*corev1.Pod, string, error) {
	podLabels, ok := probeLabels(s.Spec.Selector)
	if !ok {
		return nil, "no pod the selector matches could be built from its matchLabels and its In and Exists expressions", nil
	}
	ns, err := r.probeNamespace(ctx, s, podLabels)
	if err != nil || ns == "" {
		return nil, "no existing namespace is selected", err
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "deckhand-injection-probe-",
			Namespace:    ns,
			Labels:       podLabels,
			Annotations:  map[string]string{ProbeAnnotation: s.Name},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: probeContainer, Image: probeContainer}}},
	}, "", nil
}

// probeLabels returns labels sel matches, and false when it finds none:
// the selector's matchLabels, the first value of each In expression and a
// value for each Exists; other operators only constrain, and the result is
// checked against the whole selector.
func probeLabels(sel *metav1.LabelSelector) (map[string]string, bool) {
	if sel == nil {
		return nil, false
	}
	podLabels := map[string]string{}
	for k, v := range sel.MatchLabels {
		podLabels[k] = v
	}
	for _, e := range sel.MatchExpressions {
		if _, set := podLabels[e.Key]; set {
			continue
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if len(e.Values) > 0 {
				podLabels[e.Key] = e.Values[0]
			}
		case metav1.LabelSelectorOpExists:
			podLabels[e.Key] = "probe"
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || !selector.Matches(labels.Set(podLabels)) {
		return nil, false
	}
	return podLabels, true
}

// probeNamespace returns the first existing, not terminating namespace
// (spec.namespace, else by name) where s selects a pod with podLabels.
func (r *Reconciler) probeNamespace(ctx context.Context, s *deckhandv1alpha1.SidecarSet, podLabels map[string]string) (string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Client.List(ctx, list); err != nil {
		return "", err
	}
	names := make([]string, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			names = append(names, list.Items[i].Name)
		}
	}
	slices.Sort(names)
	if s.Spec.Namespace != "" {
		if !slices.Contains(names, s.Spec.Namespace) {
			return "", nil
		}
		names = []string{s.Spec.Namespace}
	}
	for _, ns := range names {
		if r.Lister.Matches(s, ns, podLabels) {
			return ns, nil
		}
	}
	return "", nil
}

// verified is a policy a dry-run pod showed in effect.
type verified struct {
	written string // the policy's and binding's resourceVersions
	cond    metav1.Condition
}

// verify checks that the API server applies the policy just written for s
// (whose revision is hash; written names the policy's and binding's
// resourceVersions) by dry-running a pod s selects. It returns the
// condition to report and, while the policy is not in effect yet, when to
// look again. inPlace is the condition to report once it is.
//
// Every SidecarSet event reconciles every SidecarSet: objects already seen
// in effect are not checked again (a policy recreated or edited has other
// resourceVersions).
func (r *Reconciler) verify(ctx context.Context, s *deckhandv1alpha1.SidecarSet, hash, written string, inPlace *metav1.Condition) (*metav1.Condition, time.Duration, error) {
	r.backoffMu.Lock()
	v, ok := r.verified[s.Name]
	r.backoffMu.Unlock()
	if ok && v.written == written && v.cond.Message != "" {
		c := v.cond
		return &c, 0, nil
	}
	if s.Spec.InjectionStrategy.Paused {
		// A paused policy injects nothing: there is nothing to see.
		return inPlace, 0, nil
	}
	pod, why, err := r.probePod(ctx, s)
	if err != nil {
		return nil, 0, err
	}
	if pod == nil {
		c := *inPlace
		c.Message += "; not checked by a dry-run pod: " + why
		return &c, 0, nil
	}
	err = r.Client.Create(ctx, pod, client.DryRunAll, client.FieldOwner(FieldManager))
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsAlreadyExists(err):
		// Another admission plugin (a quota, Pod Security, a webhook)
		// refuses the synthetic pod: that says nothing of the policy.
		c := *inPlace
		c.Message += fmt.Sprintf("; not checked by a dry-run pod: the API server refused one in namespace %s: %v", pod.Namespace, err)
		return &c, 0, nil
	case err != nil:
		return nil, 0, err
	}
	got, _ := sidecarcontrol.ReadPodRecord(pod.Annotations).Revisions(s.Name)
	if got == hash {
		c := *inPlace
		c.Message += fmt.Sprintf("; a dry-run pod in namespace %s got it", pod.Namespace)
		r.clearBackoff(s.Name)
		r.backoffMu.Lock()
		if r.verified == nil {
			r.verified = map[string]verified{}
		}
		r.verified[s.Name] = verified{written: written, cond: c}
		r.backoffMu.Unlock()
		return &c, 0, nil
	}
	return &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonPolicyNotYetInEffect,
		Message: fmt.Sprintf("the API server does not apply the policy for revision %s yet: a dry-run pod in namespace %s got revision %q", hash, pod.Namespace, got)}, r.nextBackoff(s.Name), nil
}

// nextBackoff returns how long to wait before probing s's policy again:
// probeRetryMin after a success, doubling up to probeRetryMax.
func (r *Reconciler) nextBackoff(name string) time.Duration {
	r.backoffMu.Lock()
	defer r.backoffMu.Unlock()
	if r.backoff == nil {
		r.backoff = map[string]time.Duration{}
	}
	d := r.backoff[name]
	if d == 0 {
		d = probeRetryMin
	}
	r.backoff[name] = min(2*d, probeRetryMax)
	return d
}

func (r *Reconciler) clearBackoff(name string) {
	r.backoffMu.Lock()
	defer r.backoffMu.Unlock()
	delete(r.backoff, name)
}

// forget drops what is known of the SidecarSet called name (deleted).
func (r *Reconciler) forget(name string) {
	r.clearBackoff(name)
	r.backoffMu.Lock()
	defer r.backoffMu.Unlock()
	delete(r.verified, name)
}
