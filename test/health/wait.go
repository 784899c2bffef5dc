package health

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Want is what an object's summary conditions should say, and what kstatus
// and Argo CD should make of them.
type Want struct {
	// Ready is the status and Reason the reason of the Ready condition.
	Ready  metav1.ConditionStatus
	Reason string
	// Reconciling and Stalled: whether each is present (they are present
	// only while True).
	Reconciling, Stalled bool
	Kstatus              status.Status
	ArgoCD               string
}

// IsReady: Ready=True with reason, Current, Healthy.
func IsReady(reason string) Want {
	return Want{Ready: metav1.ConditionTrue, Reason: reason, Kstatus: status.CurrentStatus, ArgoCD: Healthy}
}

// IsReconciling: Ready=False with reason, Reconciling, InProgress, Progressing.
func IsReconciling(reason string) Want {
	return Want{Ready: metav1.ConditionFalse, Reason: reason, Reconciling: true, Kstatus: status.InProgressStatus, ArgoCD: Progressing}
}

// IsStalled: Ready=False with reason, Stalled, Failed, Degraded.
func IsStalled(reason string) Want {
	return Want{Ready: metav1.ConditionFalse, Reason: reason, Stalled: true, Kstatus: status.FailedStatus, ArgoCD: Degraded}
}

// IsPaused: Ready=False with reason and neither Reconciling nor Stalled,
// InProgress, Suspended: a rollout the user paused.
func IsPaused(reason string) Want {
	return Want{Ready: metav1.ConditionFalse, Reason: reason, Kstatus: status.InProgressStatus, ArgoCD: Suspended}
}

// RefusePods creates a ResourceQuota that refuses every pod of namespace
// ns, what a workload's pods cannot get past, and returns it once it is in
// force.
func RefusePods(t testing.TB, c client.Client, ns string) *corev1.ResourceQuota {
	t.Helper()
	return LimitPods(t, c, ns, 0)
}

// LimitPods creates a ResourceQuota that admits no new pod into namespace
// ns while it has n or more, and returns it once it is in force. Pods
// already there stay.
//
// NOTE: quota admission restricts only the resources in the quota's
// status.hard, which kube-controller-manager's quota controller fills in;
// until then pods are admitted. Waiting for it keeps a slow controller from
// letting the workload's first pods through.
func LimitPods(t testing.TB, c client.Client, ns string, n int64) *corev1.ResourceQuota {
	t.Helper()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limit-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(n, resource.DecimalSI)}}}
	if err := c.Create(context.Background(), quota); err != nil {
		t.Fatalf("creating ResourceQuota %s/%s: %v", ns, quota.Name, err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(quota), quota); err != nil {
			return false, nil
		}
		_, enforced := quota.Status.Hard[corev1.ResourcePods]
		return enforced, nil
	})
	if err != nil {
		t.Fatalf("ResourceQuota %s/%s: waiting for the quota controller to fill in status.hard: %v", ns, quota.Name, err)
	}
	return quota
}

// Wait re-reads obj until its status describes its current generation and
// says what want says, and fails t after timeout with the last state seen.
// obj holds the last read.
func Wait(t testing.TB, c client.Client, obj client.Object, timeout time.Duration, want Want) {
	t.Helper()
	var state string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			state = err.Error()
			return false, nil
		}
		got, err := Observe(obj)
		if err != nil {
			return false, err
		}
		state = got.String()
		return got.Want == want, nil
	})
	if err != nil {
		t.Fatalf("%T %s: waiting for %+v: %v; last seen: %s", obj, obj.GetName(), want, err, state)
	}
}

// Observed is what an object's summary conditions say and what the tools
// make of them.
type Observed struct {
	Want
	Generation, ObservedGeneration, ReadyGeneration int64
	Conditions                                      []metav1.Condition
	ArgoCDMessage                                   string
}

func (o Observed) String() string {
	s := fmt.Sprintf("generation %d, observedGeneration %d, Ready for %d, kstatus %s, Argo CD %s (%s), conditions",
		o.Generation, o.ObservedGeneration, o.ReadyGeneration, o.Kstatus, o.ArgoCD, o.ArgoCDMessage)
	for _, c := range o.Conditions {
		s += fmt.Sprintf(" %s=%s/%s %q", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

// Observe reads obj's summary conditions and runs kstatus and the Argo CD
// health check on it. A status that does not describe the current
// generation leaves Ready empty.
func Observe(obj kruntime.Object) (Observed, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return Observed{}, err
	}
	o := Observed{Generation: u.GetGeneration()}
	o.ObservedGeneration, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, r := range raw {
		var c metav1.Condition
		m, _ := r.(map[string]any)
		if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return o, err
		}
		o.Conditions = append(o.Conditions, c)
	}
	if ready := meta.FindStatusCondition(o.Conditions, deckhandv1alpha1.ReadyCondition); ready != nil {
		o.ReadyGeneration = ready.ObservedGeneration
		if ready.ObservedGeneration == o.Generation && o.ObservedGeneration == o.Generation {
			o.Ready, o.Reason = ready.Status, ready.Reason
		}
	}
	// Abnormal-true conditions are present only while True: presence counts.
	o.Reconciling = meta.FindStatusCondition(o.Conditions, deckhandv1alpha1.ReconcilingCondition) != nil
	o.Stalled = meta.FindStatusCondition(o.Conditions, deckhandv1alpha1.StalledCondition) != nil
	res, err := status.Compute(u)
	if err != nil {
		return o, err
	}
	o.Kstatus = res.Status
	o.ArgoCD, o.ArgoCDMessage, err = ArgoCD(u)
	return o, err
}
