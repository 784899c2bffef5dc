package localcluster

import "testing"

func TestIsForbidden(t *testing.T) {
	for name, tc := range map[string]struct {
		line string
		want bool
	}{
		"authorization denial": {
			`POST /api/v1/namespaces/ns/pods: pods "web-x" is forbidden: User "system:serviceaccount:deckhand-system:deckhand-controller-manager" cannot create resource "pods" in API group "" in the namespace "ns"`,
			true,
		},
		"authorization denial in a JSON log line": {
			`{"level":"error","error":"pods is forbidden: User \"system:serviceaccount:deckhand-system:deckhand-controller-manager\" cannot list resource \"pods\" in API group \"\" at the cluster scope"}`,
			true,
		},
		"owner reference without finalizers permission": {
			`pods "web-x" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>`,
			true,
		},
		"owner reference without delete permission": {
			`pods "web-x" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>`,
			true,
		},
		"owner's kind not yet rediscovered after an API server restart": {
			`pods "web-x" is forbidden: cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion apps.deckhand.dev/v1alpha1 Kind PodSet: no matches for kind "PodSet" in version "apps.deckhand.dev/v1alpha1"`,
			false,
		},
		"Deckhand's own admission policy": {
			`PATCH /apis/apps/v1/namespaces/ns/deployments/app: deployments.apps "app" is forbidden: ValidatingAdmissionPolicy 'deckhand-manager-writes' with binding 'deckhand-manager-writes' denied request: Deckhand may change only objects a Deckhand object controls, pods a SidecarSet injected, and the restart annotation of a workload; deployments ns/app is none of these, or the change is more than a restart`,
			true,
		},
		"exceeded quota": {
			`POST /api/v1/namespaces/ns/pods: pods "web-x" is forbidden: exceeded quota: pod-count, requested: pods=1, used: pods=1, limited: pods=1`,
			false,
		},
		"pod security": {
			`pods "web-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false)`,
			false,
		},
		"namespace being deleted": {
			`pods "web-x" is forbidden: unable to create new content in namespace ns because it is being terminated`,
			false,
		},
		"not a refusal": {`Created pod: web-x`, false},
	} {
		if got := IsForbidden(tc.line); got != tc.want {
			t.Errorf("%s: IsForbidden = %v, want %v", name, got, tc.want)
		}
	}
}
