package main

import (
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestSettlePoliciesDeletesOrphans: on the admission item's cluster (no
// garbage collector) the injection policy and binding of a deleted
// SidecarSet go, those of a live one stay.
func TestSettlePoliciesDeletesOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane (not in -short mode)")
	}
	ctx := testutil.Context(t, 3*time.Minute)
	cl, err := localcluster.Start(ctx, localcluster.Options{BinDir: localcluster.DefaultBinDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// SidecarSets' only: what settlePolicies lists.
	if err := localcluster.InstallCRDs(cl.Config, filepath.Join(root, "config", "crd", "bases", "apps.deckhand.dev_sidecarsets.yaml")); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cl.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	live := benchSidecarSet("live", "bench")
	if err := c.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	for name, owner := range map[string]types.UID{"kept": live.UID, "orphaned": "uid-of-a-deleted-sidecarset"} {
		meta := metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps.deckhand.dev/v1alpha1", Kind: "SidecarSet", Name: "bench", UID: owner, Controller: ptr.To(true),
		}}}
		policy := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: meta, Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"},
			}},
		}}
		binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name}}
		for _, o := range []client.Object{policy, binding} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}

	if err := settlePolicies(ctx, &env{c: c, cs: cl.Clientset()}, true); err != nil {
		t.Fatal(err)
	}
	var policies admissionregistrationv1.MutatingAdmissionPolicyList
	var bindings admissionregistrationv1.MutatingAdmissionPolicyBindingList
	for _, l := range []client.ObjectList{&policies, &bindings} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if len(policies.Items) != 1 || policies.Items[0].Name != "kept" || len(bindings.Items) != 1 || bindings.Items[0].Name != "kept" {
		t.Errorf("left %d policies and %d bindings, want only those named kept: %v, %v", len(policies.Items), len(bindings.Items), policies.Items, bindings.Items)
	}
}
