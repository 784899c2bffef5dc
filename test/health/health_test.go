package health_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	"github.com/deckhand-dev/deckhand/test/health"
)

// object returns a Deckhand object of kind at generation 2 whose status,
// written for observed, carries the summary conditions of s (nil: no status
// written yet) and, when suspended, a True Suspended condition.
func object(t *testing.T, kind string, observed int64, s *conditions.Summary, suspended bool) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(deckhandv1alpha1.GroupVersion.WithKind(kind))
	u.SetName("x")
	u.SetGeneration(2)
	if s == nil {
		return u
	}
	var conds []metav1.Condition
	conditions.Set(&conds, observed, time.Unix(100, 0), *s)
	if suspended {
		conds = append(conds, metav1.Condition{Type: deckhandv1alpha1.RestartScheduleSuspendedCondition, Status: metav1.ConditionTrue, Reason: "Suspended"})
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
	}{observed, conds})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = st
	return u
}

// TestToolsReadTheSummary checks what kstatus and Argo CD make of each
// kind's summary conditions: Ready is Current and Healthy, Reconciling and
// a status written for an older generation are InProgress and Progressing,
// Stalled is Failed and Degraded.
func TestToolsReadTheSummary(t *testing.T) {
	ready := &conditions.Summary{State: conditions.Ready, Reason: "Complete", Message: "3 pods available"}
	rolling := &conditions.Summary{State: conditions.Reconciling, Reason: "RolloutInProgress", Message: "1 of 3 updated"}
	waiting := &conditions.Summary{State: conditions.Waiting, Reason: "PodsNotReady", Message: "2 of 3 ready"}
	stalled := &conditions.Summary{State: conditions.Stalled, Reason: "ReplicaFailure", Message: "exceeded quota"}
	paused := &conditions.Summary{State: conditions.Waiting, Reason: "UpdatePaused", Message: "paused"}
	failedRun := &conditions.Summary{State: conditions.Waiting, Reason: "RestartFailed", Message: "web: timed out"}

	type want struct {
		kstatus status.Status
		argo    string
	}
	cases := []struct {
		name      string
		summary   *conditions.Summary
		observed  int64
		suspended bool
		want      want
		kinds     []string
	}{
		{"ready", ready, 2, false, want{status.CurrentStatus, health.Healthy}, nil},
		{"rolling out", rolling, 2, false, want{status.InProgressStatus, health.Progressing}, []string{"PodSet", "SidecarSet", "WebServer"}},
		{"pods not ready", waiting, 2, false, want{status.InProgressStatus, health.Progressing}, []string{"PodSet", "SidecarSet", "WebServer"}},
		{"stalled", stalled, 2, false, want{status.FailedStatus, health.Degraded}, nil},
		// kstatus cannot tell an object Deckhand has not written a status for
		// from one that uses no conditions at all: it calls both Current (the
		// corner case its README describes). Deckhand writes the first status
		// within a reconcile of the create.
		{"no status yet", nil, 0, false, want{status.CurrentStatus, health.Progressing}, nil},
		{"ready for an older generation", ready, 1, false, want{status.InProgressStatus, health.Progressing}, nil},
		{"rollout paused", paused, 2, false, want{status.InProgressStatus, health.Suspended}, []string{"SidecarSet"}},
		{"last run failed", failedRun, 2, false, want{status.InProgressStatus, health.Degraded}, []string{"RestartSchedule"}},
		{"suspended", ready, 2, true, want{status.CurrentStatus, health.Suspended}, []string{"RestartSchedule"}},
	}
	for _, tc := range cases {
		kinds := tc.kinds
		if kinds == nil {
			kinds = []string{"PodSet", "SidecarSet", "WebServer", "RestartSchedule"}
		}
		for _, kind := range kinds {
			obj := object(t, kind, tc.observed, tc.summary, tc.suspended)
			res, err := health.Kstatus(obj)
			if err != nil {
				t.Fatalf("%s %s: kstatus: %v", kind, tc.name, err)
			}
			argo, msg, err := health.ArgoCD(obj)
			if err != nil {
				t.Fatalf("%s %s: Argo CD health check: %v", kind, tc.name, err)
			}
			if res.Status != tc.want.kstatus || argo != tc.want.argo {
				t.Errorf("%s %s: kstatus %s (%s), Argo CD %s (%s); want %s and %s",
					kind, tc.name, res.Status, res.Message, argo, msg, tc.want.kstatus, tc.want.argo)
			}
		}
	}
}

// TestArgoCDConfigMapCarriesTheScript checks that every kind's key of the
// argocd-cm snippet holds the health check script as it is in health.lua.
func TestArgoCDConfigMapCarriesTheScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(health.RepoRoot(), health.ArgoCDScript))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(health.RepoRoot(), "config/argocd/argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"PodSet", "SidecarSet", "WebServer", "RestartSchedule"} {
		key := "resource.customizations.health." + deckhandv1alpha1.GroupVersion.Group + "_" + kind
		if got, ok := cm.Data[key]; !ok || got != string(script) {
			t.Errorf("argocd-cm.yaml: %s differs from %s (present: %v)", key, health.ArgoCDScript, ok)
		}
	}
	if len(cm.Data) != 4 {
		t.Errorf("argocd-cm.yaml has %d keys, want one per kind", len(cm.Data))
	}
}
