package eviction_test

import (
	"errors"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/deckhand-dev/deckhand/internal/eviction"
)

func TestDisruptionMessage(t *testing.T) {
	refusal := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	refusal.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 2 healthy pods and has 2 currently"}}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"the budget's cause", refusal, "The disruption budget web needs 2 healthy pods and has 2 currently"},
		{"an API status without it", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-1"), `pods "web-1" not found`},
		{"any other error", errors.New("connection refused"), "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eviction.DisruptionMessage(tc.err); got != tc.want {
				t.Fatalf("DisruptionMessage = %q, want %q", got, tc.want)
			}
		})
	}
}
