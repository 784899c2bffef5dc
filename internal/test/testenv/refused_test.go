package testenv

import "testing"

func TestRefusedPermission(t *testing.T) {
	cases := []struct {
		line                                 string
		user, verb, resource, sub, group, ns string
	}{
		{
			line: `{"level":"error","msg":"Reconciler error","error":"creating pods: pods is forbidden: User \"system:serviceaccount:deckhand-system:deckhand-controller-manager\" cannot create resource \"pods\" in API group \"\" in the namespace \"a-b\""}`,
			user: "system:serviceaccount:deckhand-system:deckhand-controller-manager", verb: "create", resource: "pods", ns: "a-b",
		},
		{
			line: `POST /api/v1/namespaces/x/pods/p/eviction: pods "p" is forbidden: User "u" cannot create resource "pods/eviction" in API group "policy" in the namespace "x"`,
			user: "u", verb: "create", resource: "pods", sub: "eviction", group: "policy", ns: "x",
		},
		{
			line: `W1127 reflector.go: failed to list *v1.Node: nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster scope`,
			user: "u", verb: "list", resource: "nodes",
		},
	}
	for _, c := range cases {
		attrs, user, ok := RefusedPermission(c.line)
		if !ok {
			t.Errorf("%s: not read", c.line)
			continue
		}
		if user != c.user || attrs.Verb != c.verb || attrs.Resource != c.resource || attrs.Subresource != c.sub ||
			attrs.Group != c.group || attrs.Namespace != c.ns {
			t.Errorf("%s: read %q %+v", c.line, user, *attrs)
		}
	}
	// An admission refusal names no permission the authorizer could grant.
	if _, _, ok := RefusedPermission(`pods "p" is forbidden: ValidatingAdmissionPolicy 'deckhand-manager-writes' denied request`); ok {
		t.Error("an admission refusal read as a permission")
	}
}
