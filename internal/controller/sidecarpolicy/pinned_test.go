package sidecarpolicy_test

import (
	"encoding/json"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// A revision pinned with policy Always is compiled into the policy: a pod
// the API server injects in Policy mode is the pod the webhook injects in
// Webhook mode, with the pinned revision's sidecar and hash.
func TestPinnedRevisionIsCompiledIntoThePolicy(t *testing.T) {
	ns := env.Namespace(t)
	s := policySet("pinned-"+ns, ns, "log:1")
	s.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection
	s.Labels = map[string]string{deckhandv1alpha1.SidecarSetCustomVersionLabel: "v1"}
	createSidecarSet(t, s)
	pinnedHash := waitSidecarSet(t, time.Minute, s.Name, "records its first revision", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevisionName != ""
	}).Status.LatestRevision

	gen := updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "log:2"
		s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] = "v2"
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("v1")}
	})
	waitCached(t, s.Name, gen)
	byWebhook := createWebPod(t, ns, "w")
	if image, rev := injected(byWebhook); image != "log:1" || rev != pinnedHash {
		t.Fatalf("webhook mode, pinned: log sidecar %q at %s, want log:1 at %s", image, rev, pinnedHash)
	}

	gen = updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection })
	waitCached(t, s.Name, gen)
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, logImage, "log:1")
	byPolicy, err := createPod(ctxT(t), webPod(ns, "p"), true)
	if err != nil {
		t.Fatal(err)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(byPolicy.Annotations).Revisions(s.Name); rev != pinnedHash {
		t.Fatalf("policy mode, pinned: the pod records %s, want the pinned %s", rev, pinnedHash)
	}
	normalize(byWebhook)
	normalize(byPolicy)
	if !apiequality.Semantic.DeepEqual(byWebhook.Spec, byPolicy.Spec) || !apiequality.Semantic.DeepEqual(byWebhook.Annotations, byPolicy.Annotations) {
		wj, _ := json.Marshal(map[string]any{"annotations": byWebhook.Annotations, "spec": byWebhook.Spec})
		pj, _ := json.Marshal(map[string]any{"annotations": byPolicy.Annotations, "spec": byPolicy.Spec})
		t.Errorf("the pinned pod differs between the modes:\nwebhook: %s\npolicy:  %s", wj, pj)
	}
}
