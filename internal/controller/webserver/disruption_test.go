package webserver_test

import (
	"context"
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// waitBudget waits until the WebServer's PodDisruptionBudget satisfies
// cond; a nil budget stands for none.
func waitBudget(t *testing.T, ns, name, what string, cond func(*policyv1.PodDisruptionBudget) bool) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		err := env.Client.Get(ctx, key(ns, name), pdb)
		if apierrors.IsNotFound(err) {
			return cond(nil), nil
		}
		return err == nil && cond(pdb), err
	}, "%s", what)
}

// A WebServer of more than one replica has a PodDisruptionBudget of its
// pods, shaped by spec.disruptionBudget; at one replica it has none, so a
// node drain is never blocked.
func TestDisruptionBudgetFollowsReplicas(t *testing.T) {
	ws, ns := createWebServer(t, "site", ptr.To[int32](3))
	waitBudget(t, ns, "site", "a budget of maxUnavailable 1 over the WebServer's pods", func(pdb *policyv1.PodDisruptionBudget) bool {
		return pdb != nil && pdb.Spec.MaxUnavailable.String() == "1" &&
			pdb.Spec.Selector.MatchLabels[deckhandv1alpha1.WebServerInstanceLabel] == "site" && pdb.OwnerReferences[0].UID == ws.UID
	})

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) {
		ws.Spec.DisruptionBudget = &deckhandv1alpha1.WebServerDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))}
	})
	waitBudget(t, ns, "site", "maxUnavailable 50%", func(pdb *policyv1.PodDisruptionBudget) bool {
		return pdb != nil && pdb.Spec.MaxUnavailable.String() == "50%"
	})

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Replicas = ptr.To[int32](1) })
	waitBudget(t, ns, "site", "no budget at one replica", func(pdb *policyv1.PodDisruptionBudget) bool { return pdb == nil })

	// A budget that allows no disruption at all, or more than every pod, is
	// refused naming the field.
	for _, bad := range []intstr.IntOrString{intstr.FromInt32(0), intstr.FromString("150%"), intstr.FromString("0%")} {
		err := env.Client.Create(ctx(t), func() *deckhandv1alpha1.WebServer {
			w := newWebServer(ns, "bad", ptr.To[int32](2))
			w.Spec.DisruptionBudget = &deckhandv1alpha1.WebServerDisruptionBudget{MaxUnavailable: &bad}
			return w
		}())
		if err == nil || !strings.Contains(err.Error(), "spec.disruptionBudget.maxUnavailable") {
			t.Errorf("maxUnavailable %s: %v, want a refusal naming spec.disruptionBudget.maxUnavailable", bad.String(), err)
		}
	}
}
