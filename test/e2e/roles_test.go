package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestBuiltInRolesReachNamespacedKinds: with dist/install.yaml applied,
// kube-controller-manager's role aggregation gives the built-in "edit" and
// "view" roles Deckhand's namespaced kinds, and nothing on SidecarSets. A
// namespace owner bound to "edit" may create PodSets, WebServers and
// RestartSchedules there but no SidecarSet; one bound to "view" may read
// them and change nothing.
func TestBuiltInRolesReachNamespacedKinds(t *testing.T) {
	ctx := tctx(t)
	ns := testutil.Namespace(t, suite.client)
	const editor, viewer = "e2e-namespace-editor", "e2e-namespace-viewer"
	for user, role := range map[string]string{editor: "edit", viewer: "view"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}
		if err := suite.client.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	type access struct {
		user, verb, resource, namespace string
		allowed                         bool
	}
	checks := []access{
		{editor, "create", "podsets", ns, true},
		{editor, "patch", "webservers", ns, true},
		{editor, "delete", "restartschedules", ns, true},
		{editor, "update", "podsets/scale", ns, true},
		{editor, "create", "sidecarsets", "", false},
		{editor, "list", "sidecarsets", "", false},
		{viewer, "list", "podsets", ns, true},
		{viewer, "get", "restartschedules", ns, true},
		{viewer, "watch", "webservers", ns, true},
		{viewer, "create", "podsets", ns, false},
		{viewer, "update", "webservers", ns, false},
		{viewer, "list", "sidecarsets", "", false},
	}
	allowed := func(ctx context.Context, a access) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: a.user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.namespace, Verb: a.verb, Group: "apps.deckhand.dev", Resource: a.resource,
			},
		}}
		out, err := suite.clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return out.Status.Allowed, nil
	}
	// The aggregation controller fills "edit" and "view" asynchronously
	// after the install: wait until every expected grant is there, then
	// check that nothing else is.
	var missing []string
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		missing = missing[:0]
		for _, a := range checks {
			if !a.allowed {
				continue
			}
			ok, err := allowed(ctx, a)
			if err != nil {
				return false, err
			}
			if !ok {
				missing = append(missing, fmt.Sprintf("%s %s %s", a.user, a.verb, a.resource))
			}
		}
		return len(missing) == 0, nil
	}, "every expected grant is there (missing: %v)", &missing)
	for _, a := range checks {
		if a.allowed {
			continue
		}
		ok, err := allowed(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Errorf("%s (bound to a built-in role in %s) may %s %s", a.user, ns, a.verb, a.resource)
		}
	}
}
