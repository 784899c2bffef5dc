package sidecarpolicy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func policySet(name, ns, image string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:     ns,
			Selector:      &metav1.LabelSelector{MatchLabels: web},
			InjectionMode: deckhandv1alpha1.PolicyInjection,
			Containers:    []deckhandv1alpha1.SidecarContainer{sc("log", image, "")},
		},
	}
}

// podImage creates a web pod and returns the image its log sidecar got
// ("" when it has none) and the revision its record shows.
func podImage(t *testing.T, ns, name string) (image, revision string) {
	t.Helper()
	got, err := createPod(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: web},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}, false)
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	for _, c := range got.Spec.Containers {
		if c.Name == "log" {
			image = c.Image
		}
	}
	rec := sidecarcontrol.ReadPodRecord(got.Annotations)
	for _, n := range rec.Names() {
		revision, _ = rec.Revisions(n)
	}
	return image, revision
}

// eventuallyInjects waits until a dry-run web pod gets image (the API
// server picks a changed policy up within about a second).
func eventuallyInjects(t *testing.T, ns, image string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := createPod(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: web},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}, true)
		if err != nil {
			return false, err
		}
		for _, c := range got.Spec.Containers {
			if c.Name == "log" {
				return c.Image == image, nil
			}
		}
		return image == "", nil
	}, "new pods in %s get the log sidecar at image %q", ns, image)
}

func getPolicy(ctx context.Context, name string) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: sidecarpolicy.Name(name)}, p); err != nil {
		return nil, nil, err
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: sidecarpolicy.Name(name)}, b); err != nil {
		return p, nil, err
	}
	return p, b, nil
}

func waitPolicyGone(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, _, err := getPolicy(ctx, name)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "the policy and binding of %s are gone", name)
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: sidecarpolicy.Name(name)}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "the binding of %s is gone", name)
}

// TestPolicyFollowsTheSidecarSet: the policy and binding are owned by the
// SidecarSet, follow its spec, go when it leaves Policy mode, come back
// when it returns, are restored when deleted by hand, and are deleted with
// it.
func TestPolicyFollowsTheSidecarSet(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxT(t)
	s := policySet("life-"+ns[len(ns)-5:], ns, "log:1")
	createSidecarSet(t, s)
	waitPolicyReady(t, s.Name)
	p, b, err := getPolicy(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(p, s) || !metav1.IsControlledBy(b, s) {
		t.Fatalf("the policy and binding are not controlled by the SidecarSet: %v %v", p.OwnerReferences, b.OwnerReferences)
	}
	if b.Spec.PolicyName != p.Name {
		t.Fatalf("the binding binds %q, want %q", b.Spec.PolicyName, p.Name)
	}
	eventuallyInjects(t, ns, "log:1")

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "log:2" })
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, "log:2")

	// Deleted by hand: restored.
	if err := env.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		_, got, err := getPolicy(ctx, s.Name)
		return err == nil && got.UID != b.UID, client.IgnoreNotFound(err)
	}, "the binding deleted by hand is restored")

	// Webhook mode: the policy goes, the condition too, and the webhook
	// injects (the pod is injected once, as the record shows).
	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection })
	waitPolicyGone(t, s.Name)
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: s.Name}, got); err != nil {
			return false, err
		}
		return meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition) == nil, nil
	}, "the InjectionPolicyReady condition is removed in Webhook mode")
	if img, _ := podImage(t, ns, "by-webhook"); img != "log:2" {
		t.Fatalf("in Webhook mode a new pod got log image %q, want log:2", img)
	}

	// Back to Policy mode, then deleted: the garbage collector deletes the
	// policy and binding with their owner.
	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection })
	waitPolicyReady(t, s.Name)
	if err := env.Client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitPolicyGone(t, s.Name)
}

// TestPodsAreInjectedWhileDeckhandIsDown: with the manager stopped, pods in
// a Policy-mode SidecarSet's scope still get their sidecars and the
// injection record. A change made while the controllers are down (the
// webhooks, which validate SidecarSets, still up) reaches new pods once
// they are back.
func TestPodsAreInjectedWhileDeckhandIsDown(t *testing.T) {
	ns := env.Namespace(t)
	s := policySet("outage-"+ns[len(ns)-5:], ns, "log:1")
	createSidecarSet(t, s)
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, "log:1")
	hash1, _ := sidecarcontrol.Hashes(&s.Spec)
	t.Cleanup(func() {
		// Whatever happens, the next test finds the whole manager running.
		env.StopManager()
		webhooksOnly.Store(false)
		if _, err := env.StartManager(); err != nil {
			t.Errorf("restarting the manager: %v", err)
		}
	})

	env.StopManager()
	for _, name := range []string{"down-1", "down-2"} {
		img, rev := podImage(t, ns, name)
		if img != "log:1" || rev != hash1 {
			t.Fatalf("pod %s created while Deckhand is down has log image %q and revision %q, want log:1 at %s", name, img, rev, hash1)
		}
	}

	// Controllers down, webhooks up: the change is accepted, not applied.
	webhooksOnly.Store(true)
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "log:2" })
	if img, rev := podImage(t, ns, "changed-while-down"); img != "log:1" || rev != hash1 {
		t.Fatalf("with the controllers down a new pod got log image %q at revision %q, want log:1 at %s (the policy's)", img, rev, hash1)
	}

	env.StopManager()
	webhooksOnly.Store(false)
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, "log:2")
	s.Spec.Containers[0].Image = "log:2"
	hash2, _ := sidecarcontrol.Hashes(&s.Spec)
	if img, rev := podImage(t, ns, "after-return"); img != "log:2" || rev != hash2 {
		t.Fatalf("after Deckhand returned a new pod got log image %q at revision %q, want log:2 at %s", img, rev, hash2)
	}
}

// TestPolicyModeFallsBackToTheWebhook: where the API server does not serve
// MutatingAdmissionPolicies, a Policy-mode SidecarSet says so in its
// condition and the webhook injects it.
func TestPolicyModeFallsBackToTheWebhook(t *testing.T) {
	ns := env.Namespace(t)
	t.Cleanup(func() {
		env.StopManager()
		policyAPIServed.Store(true)
		if _, err := env.StartManager(); err != nil {
			t.Errorf("restarting the manager: %v", err)
		}
	})
	env.StopManager()
	policyAPIServed.Store(false)
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	s := policySet("fallback-"+ns[len(ns)-5:], ns, "log:1")
	createSidecarSet(t, s)
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: s.Name}, got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "PolicyAPIUnavailable", nil
	}, "the SidecarSet reports InjectionPolicyReady=False PolicyAPIUnavailable")
	waitCached(t, s.Name, 1)
	if img, _ := podImage(t, ns, "fallback"); img != "log:1" {
		t.Fatalf("in the fallback a new pod got log image %q, want log:1 from the webhook", img)
	}
	if _, _, err := getPolicy(ctxT(t), s.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("in the fallback a policy exists (err %v)", err)
	}
}

// TestPolicyPeersMayNotShareVolumeOrSecretNames: two Policy-mode
// SidecarSets that can select the same pods cannot share a volume or pull
// secret name; in Webhook mode they can.
func TestPolicyPeersMayNotShareVolumeOrSecretNames(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxT(t)
	vol := corev1.Volume{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	a := policySet("peer-a-"+ns[len(ns)-5:], ns, "a:1")
	a.Spec.Volumes = []corev1.Volume{vol}
	a.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	createSidecarSet(t, a)
	waitCached(t, a.Name, 1)
	b := policySet("peer-b-"+ns[len(ns)-5:], ns, "b:1")
	b.Spec.Containers[0].Name = "other"
	b.Spec.Volumes = []corev1.Volume{vol}
	b.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	err := env.Client.Create(ctx, b.DeepCopy(), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.volumes[0].name") || !strings.Contains(err.Error(), "spec.imagePullSecrets[0].name") {
		t.Fatalf("a second Policy-mode SidecarSet sharing a volume and a pull secret name was not refused naming both fields: %v", err)
	}
	b.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection
	if err := env.Client.Create(ctx, b.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatalf("in Webhook mode the same SidecarSet was refused: %v", err)
	}
}
