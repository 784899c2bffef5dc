package sidecarpolicy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/sidecarpolicy"
)

// TestConditionsHaveOneWriterEach: both controllers write conditions on a
// Policy-mode SidecarSet, and the API server records each condition under
// one field manager, written by apply: InjectionPolicyReady under the policy
// controller's, every other condition under the SidecarSet controller's. No
// status field is held by an update (a whole-list write from a copy), and the
// policy controller holds nothing of the status but its condition.
func TestConditionsHaveOneWriterEach(t *testing.T) {
	ns := env.Namespace(t)
	createSidecarSet(t, policySet(ns, ns, "registry.example/log:1"))
	waitPolicyReady(t, ns)
	s := waitSidecarSet(t, time.Minute, ns, "has its summary for its generation", func(s *deckhandv1alpha1.SidecarSet) bool {
		ready := meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.ReadyCondition)
		return ready != nil && ready.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation
	})

	owners := map[string][]string{}
	for _, mf := range s.ManagedFields {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		if mf.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("%s holds status fields by an update", mf.Manager)
		}
		var fields struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		var conds map[string]json.RawMessage
		for f, sub := range fields.Status {
			switch {
			case f == "f:conditions":
				if err := json.Unmarshal(sub, &conds); err != nil {
					t.Fatal(err)
				}
			case mf.Manager == sidecarpolicy.FieldManager && f != ".":
				t.Errorf("the policy controller holds status field %s", f)
			}
		}
		for k := range conds {
			var key struct{ Type string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(k, "k:")), &key); err != nil {
				continue // "." marks the list itself
			}
			owners[key.Type] = append(owners[key.Type], mf.Manager)
		}
	}
	for _, c := range s.Status.Conditions {
		want := deckhandv1alpha1.FieldManager
		if c.Type == deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition {
			want = sidecarpolicy.FieldManager
		}
		if !slices.Equal(owners[c.Type], []string{want}) {
			t.Errorf("condition %s is held by %v, want %s alone", c.Type, owners[c.Type], want)
		}
	}
	if len(owners[deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition]) == 0 {
		t.Errorf("no manager holds %s: %+v", deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition, s.ManagedFields)
	}
}
