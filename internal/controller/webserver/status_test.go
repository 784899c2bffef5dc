package webserver

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func deployment(replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: available, AvailableReplicas: available, Conditions: conds,
		},
	}
}

func cond(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
}

func TestComputeStatus(t *testing.T) {
	available := cond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable")
	unavailable := cond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable")
	progressing := cond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated")
	stuck := cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded")
	quota := cond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate")
	svc := &corev1.Service{}

	type want struct{ available, progressing, degraded string } // "Status/Reason"
	cases := map[string]struct {
		o    observed
		want want
	}{
		"rolled out": {
			o:    observed{deployment: deployment(2, 2, 2, available, progressing), service: svc},
			want: want{"True/MinimumReplicasAvailable", "False/RolloutComplete", "False/AsExpected"},
		},
		"rolling out": {
			o:    observed{deployment: deployment(2, 1, 1, unavailable, progressing), service: svc},
			want: want{"False/MinimumReplicasUnavailable", "True/RollingOut", "False/AsExpected"},
		},
		"stuck rollout": {
			o:    observed{deployment: deployment(2, 1, 2, available, stuck), service: svc},
			want: want{"True/MinimumReplicasAvailable", "False/ProgressDeadlineExceeded", "True/ProgressDeadlineExceeded"},
		},
		"replica failure": {
			o:    observed{deployment: deployment(2, 0, 0, unavailable, progressing, quota), service: svc},
			want: want{"False/MinimumReplicasUnavailable", "True/RollingOut", "True/ReplicaFailure"},
		},
		"service missing": {
			o:    observed{deployment: deployment(2, 2, 2, available, progressing)},
			want: want{"False/ServicePending", "False/RolloutComplete", "False/AsExpected"},
		},
		"not created yet": {
			o:    observed{},
			want: want{"False/DeploymentPending", "True/DeploymentPending", "False/AsExpected"},
		},
		"deployment name conflict": {
			o:    observed{service: svc, conflicts: []string{"Deployment web/site exists and is not controlled by this WebServer"}},
			want: want{"False/NameConflict", "False/NameConflict", "True/NameConflict"},
		},
		"service name conflict": {
			o:    observed{deployment: deployment(2, 2, 2, available, progressing), conflicts: []string{"Service web/site exists and is not controlled by this WebServer"}},
			want: want{"False/NameConflict", "False/RolloutComplete", "True/NameConflict"},
		},
		"apply failed": {
			o:    observed{deployment: deployment(2, 2, 2, available, progressing), service: svc, applyErrs: []string{"applying Service: boom"}},
			want: want{"True/MinimumReplicasAvailable", "False/RolloutComplete", "True/ApplyFailed"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := testWebServer()
			st := computeStatus(ws, tc.o)
			got := want{}
			for _, c := range []struct {
				t   string
				out *string
			}{
				{deckhandv1alpha1.WebServerAvailableCondition, &got.available},
				{deckhandv1alpha1.WebServerProgressingCondition, &got.progressing},
				{deckhandv1alpha1.WebServerDegradedCondition, &got.degraded},
			} {
				if cd := meta.FindStatusCondition(st.Conditions, c.t); cd != nil {
					*c.out = string(cd.Status) + "/" + cd.Reason
					if cd.ObservedGeneration != ws.Generation {
						t.Errorf("%s observedGeneration = %d", c.t, cd.ObservedGeneration)
					}
				}
			}
			if got != tc.want {
				t.Errorf("conditions = %+v, want %+v", got, tc.want)
			}
			wantGen := ws.Generation
			if len(tc.o.applyErrs) > 0 {
				wantGen = ws.Status.ObservedGeneration
			}
			if st.ObservedGeneration != wantGen || st.Selector != "app.kubernetes.io/instance=site,app.kubernetes.io/name=webserver" {
				t.Errorf("observedGeneration %d, selector %q", st.ObservedGeneration, st.Selector)
			}
			if (tc.o.service != nil) != (st.URL == "http://site.web.svc:8080") {
				t.Errorf("url = %q with service %v", st.URL, tc.o.service != nil)
			}
			if len(tc.o.conflicts) > 0 {
				if d := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.WebServerDegradedCondition); !strings.Contains(d.Message, tc.o.conflicts[0]) {
					t.Errorf("Degraded message %q does not name the conflict", d.Message)
				}
			}
		})
	}
}

// A second computation from the same observations keeps transition times.
func TestComputeStatusStable(t *testing.T) {
	ws := testWebServer()
	o := observed{deployment: deployment(2, 2, 2, cond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable")), service: &corev1.Service{}}
	ws.Status = computeStatus(ws, o)
	ws.Status.Conditions[0].LastTransitionTime = metav1.Unix(1, 0)
	again := computeStatus(ws, o)
	if again.Conditions[0].LastTransitionTime != metav1.Unix(1, 0) {
		t.Errorf("transition time changed without a status change")
	}
}
