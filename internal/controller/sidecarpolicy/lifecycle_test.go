package sidecarpolicy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

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
	eventuallyInjects(t, ns, logImage, "log:1")

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "log:2" })
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, logImage, "log:2")

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
	waitSidecarSet(t, time.Minute, s.Name, "the InjectionPolicyReady condition is removed in Webhook mode", func(s *deckhandv1alpha1.SidecarSet) bool {
		return meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition) == nil
	})
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
	eventuallyInjects(t, ns, logImage, "log:1")
	hash1, _ := sidecarcontrol.Hashes(&s.Spec)
	// Whatever happens, the next test finds the whole manager running.
	restoreManagerAtEnd(t, &webhooksOnly)

	env.StopManager()
	for _, name := range []string{"down-1", "down-2"} {
		img, rev := podImage(t, ns, name)
		if img != "log:1" || rev != hash1 {
			t.Fatalf("pod %s created while Deckhand is down has log image %q and revision %q, want log:1 at %s", name, img, rev, hash1)
		}
	}

	// Controllers down, webhooks up: the change is accepted, not applied.
	if err := restartManager(&webhooksOnly, true); err != nil {
		t.Fatal(err)
	}
	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "log:2" })
	if img, rev := podImage(t, ns, "changed-while-down"); img != "log:1" || rev != hash1 {
		t.Fatalf("with the controllers down a new pod got log image %q at revision %q, want log:1 at %s (the policy's)", img, rev, hash1)
	}

	if err := restartManager(&webhooksOnly, false); err != nil {
		t.Fatal(err)
	}
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, logImage, "log:2")
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
	restartManagerWith(t, &policyAPIServed, false)
	checkFallsBackToTheWebhook(t, "fallback", "")
}

// TestPolicyInjectionOffFallsBackToTheWebhook: without
// --sidecarset-policy-injection (the default install, which grants no
// permission on MutatingAdmissionPolicies) a Policy-mode SidecarSet says so
// in its condition, naming the flag, no policy is written, and the webhook
// injects it.
func TestPolicyInjectionOffFallsBackToTheWebhook(t *testing.T) {
	restartManagerWith(t, &policyInjectionOff, true)
	checkFallsBackToTheWebhook(t, "off", "--sidecarset-policy-injection")
}

// checkFallsBackToTheWebhook checks, on a manager that cannot write
// policies, that a new Policy-mode SidecarSet reports
// InjectionPolicyReady=False PolicyAPIUnavailable with words in its
// message, that no policy is written and that the webhook injects its
// sidecar.
func checkFallsBackToTheWebhook(t *testing.T, name, words string) {
	t.Helper()
	ns := env.Namespace(t)
	s := policySet(name+"-"+ns[len(ns)-5:], ns, "log:1")
	createSidecarSet(t, s)
	waitSidecarSet(t, time.Minute, s.Name, fmt.Sprintf("reports InjectionPolicyReady=False PolicyAPIUnavailable naming %q", words), func(s *deckhandv1alpha1.SidecarSet) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "PolicyAPIUnavailable" && strings.Contains(c.Message, words)
	})
	waitCached(t, s.Name, 1)
	if img, _ := podImage(t, ns, name); img != "log:1" {
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

// TestPolicyModeInitContainerChangeReachesNewPodsOnly: in Policy mode as in
// Webhook mode, a change of a plain init container's image reaches the pods
// created afterwards (through the recompiled policy) while the pods already
// there keep their spec and record and count as updated.
func TestPolicyModeInitContainerChangeReachesNewPodsOnly(t *testing.T) {
	ns := env.Namespace(t)
	s := policySet("init-"+ns[len(ns)-5:], ns, "")
	s.Spec.Containers = nil
	s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("setup", "setup:1", "")}
	createSidecarSet(t, s)
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, setupImage, "setup:1")
	old := createWebPod(t, ns, "old")
	if img := setupImage(old); img != "setup:1" {
		t.Fatalf("pod old got setup image %q, want setup:1", img)
	}
	first, _ := sidecarcontrol.ReadPodRecord(old.Annotations).Revisions(s.Name)
	waitSidecarSet(t, time.Minute, s.Name, "1 pod matched and updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.LatestRevision == first && st.MatchedPods == 1 && st.UpdatedPods == 1
	})

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" })
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, setupImage, "setup:2")
	fresh := createWebPod(t, ns, "fresh")
	second, _ := sidecarcontrol.ReadPodRecord(fresh.Annotations).Revisions(s.Name)
	if img := setupImage(fresh); img != "setup:2" || second == first {
		t.Fatalf("pod fresh got setup image %q at revision %s, want setup:2 at a new revision", img, second)
	}
	// The status counts the new pod after the reconcile that saw the change:
	// any patch of the old pod would have been written by then.
	waitSidecarSet(t, time.Minute, s.Name, "2 pods matched and updated at the new revision", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.LatestRevision == second && st.MatchedPods == 2 && st.UpdatedPods == 2 && st.NotUpdatablePods == 0
	})
	got := getPod(t, ns, "old")
	if img := setupImage(got); img != "setup:1" {
		t.Errorf("pod old: setup image %s, want setup:1 (a plain init container is never patched in place)", img)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(got.Annotations).Revisions(s.Name); rev != first {
		t.Errorf("pod old records revision %s, want its own %s", rev, first)
	}
}

// TestWithoutThePodWebhookOnlyPolicyModeInjects: a manager started with
// --sidecarset-pod-webhook=false serves no pod webhook (Deckhand is off the
// pod create path), refuses a SidecarSet that asks for Webhook mode naming
// spec.injectionMode, and a SidecarSet that leaves the mode unset is
// injected by its policy.
func TestWithoutThePodWebhookOnlyPolicyModeInjects(t *testing.T) {
	ns := env.Namespace(t)
	restartManagerWith(t, &withoutPodWebhook, true)

	req, err := http.NewRequest(http.MethodPost, inject.PodWebhookPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, pattern := env.Manager().GetWebhookServer().WebhookMux().Handler(req); pattern != "" {
		t.Errorf("the webhook server serves %s (pattern %q); want no pod webhook", inject.PodWebhookPath, pattern)
	}

	webhookMode := policySet("nohook-webhook-"+ns[len(ns)-5:], ns, "log:1")
	webhookMode.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection
	err = env.Client.Create(ctxT(t), webhookMode)
	if err == nil {
		t.Cleanup(func() { _ = env.Client.Delete(ctxT(t), webhookMode) })
		t.Fatal("a Webhook-mode SidecarSet was accepted by a manager that serves no pod webhook")
	}
	if !strings.Contains(err.Error(), "spec.injectionMode") || !strings.Contains(err.Error(), "--sidecarset-pod-webhook=false") {
		t.Errorf("refusal %q does not name spec.injectionMode and the flag", err)
	}

	unset := policySet("nohook-"+ns[len(ns)-5:], ns, "log:1")
	unset.Spec.InjectionMode = ""
	createSidecarSet(t, unset)
	waitPolicyReady(t, unset.Name)
	eventuallyInjects(t, ns, logImage, "log:1")
	if img, rev := podImage(t, ns, "nohook"); img != "log:1" || rev == "" {
		t.Fatalf("a new pod got log image %q and revision %q, want log:1 from the policy with its record", img, rev)
	}
}
