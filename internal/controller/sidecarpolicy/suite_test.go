package sidecarpolicy_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/operator"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
)

var env *testenv.Env

// webhooksOnly, when set, makes the next manager serve the webhooks and run
// no controller: a manager whose controllers are down while its admission
// webhooks still answer (a SidecarSet can be changed, nothing reconciles).
var webhooksOnly atomic.Bool

// policyAPIServed, when false, makes the next manager believe the API
// server does not serve MutatingAdmissionPolicies.
var policyAPIServed atomic.Bool

// policyInjectionOff, when set, makes the next manager run without
// --sidecarset-policy-injection (the default install's mode).
var policyInjectionOff atomic.Bool

// withoutPodWebhook, when set, makes the next manager run as
// --sidecarset-pod-webhook=false --sidecarset-injection-mode=Policy.
var withoutPodWebhook atomic.Bool

// The whole of Deckhand, as the binary runs it, on an API server only (the
// pods need not run): the pod webhook, the SidecarSet controllers and the
// policy controller, under the manager's ServiceAccount.
func TestMain(m *testing.M) {
	policyAPIServed.Store(true)
	os.Exit(testenv.Run(m, &env, testenv.Options{
		// kube-controller-manager collects the policies of deleted
		// SidecarSets (and creates the pods' ServiceAccounts).
		Cluster: &localcluster.Options{ControllerManager: true},
		Setup: func(mgr ctrl.Manager) error {
			opts := operator.DefaultOptions()
			opts.SidecarSetPolicyInjection = !policyInjectionOff.Load()
			if !policyAPIServed.Load() {
				opts.PolicyAPIServed = new(bool)
			}
			if withoutPodWebhook.Load() {
				opts.SidecarSetPodWebhook = false
				opts.SidecarSetInjectionMode = deckhandv1alpha1.PolicyInjection
			}
			if webhooksOnly.Load() {
				lister, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache(), sidecarcontrol.Options{
					Modes: sidecarcontrol.Modes{Default: opts.SidecarSetInjectionMode, PolicyServed: policyAPIServed.Load()},
				})
				if err != nil {
					return err
				}
				if err := sidecarsetwebhook.SetupWebhookWithLister(mgr, lister); err != nil {
					return err
				}
				return inject.SetupWithManager(mgr, lister)
			}
			return operator.Setup(mgr, opts)
		},
	}))
}

func ctxT(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

// createSidecarSet creates s and deletes it when the test ends.
func createSidecarSet(t *testing.T, s *deckhandv1alpha1.SidecarSet) {
	t.Helper()
	if err := env.Client.Create(ctxT(t), s); err != nil {
		t.Fatalf("creating SidecarSet %s: %v", s.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
}

// waitCached waits until the manager's cache (which the pod webhook reads)
// shows SidecarSet name at generation gen or later.
func waitCached(t *testing.T, name string, gen int64) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Manager().GetCache().Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return got.Generation >= gen, nil
	}, "the manager's cache has SidecarSet %s at generation %d", name, gen)
}

// updateSidecarSet applies mutate to SidecarSet name (retrying conflicts)
// and returns the new generation.
func updateSidecarSet(t *testing.T, name string, mutate func(*deckhandv1alpha1.SidecarSet)) int64 {
	t.Helper()
	ctx := ctxT(t)
	for {
		s := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, s); err != nil {
			t.Fatal(err)
		}
		mutate(s)
		err := env.Client.Update(ctx, s)
		if err == nil {
			return s.Generation
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("updating SidecarSet %s: %v", name, err)
		}
	}
}

// waitPolicyReady waits until SidecarSet name reports its policy in place
// for its current generation, and returns the policy.
func waitPolicyReady(t *testing.T, name string) *admissionregistrationv1.MutatingAdmissionPolicy {
	t.Helper()
	var last string
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		s := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, s); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
		if c == nil {
			last = "no condition"
			return false, nil
		}
		last = fmt.Sprintf("%s %s: %s (generation %d of %d)", c.Status, c.Reason, c.Message, c.ObservedGeneration, s.Generation)
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.Generation, nil
	}, "SidecarSet %s reports InjectionPolicyReady=True (last: %s)", name, lazy(func() string { return last }))
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	if err := env.Client.Get(ctxT(t), types.NamespacedName{Name: sidecarpolicy.Name(name)}, p); err != nil {
		t.Fatalf("the policy of %s: %v", name, err)
	}
	return p
}

// createPod creates p (dry-run if asked) and returns what the API server
// stored (or would store).
func createPod(ctx context.Context, p *corev1.Pod, dryRun bool) (*corev1.Pod, error) {
	p = p.DeepCopy()
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	err := env.Client.Create(ctx, p, opts...)
	return p, err
}

// lazy is a message part computed when the message is printed.
type lazy func() string

func (l lazy) String() string { return l() }
