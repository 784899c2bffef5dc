// The checks: dist/install.yaml is what `make build-installer` produces now,
// RBAC is least privilege, and the manager Deployment and the webhook
// configurations carry the settings docs/operations.md promises. The
// end-to-end suite (test/e2e) applies the same file to a real cluster.
package install

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

const namespace = "deckhand-system"

func kubectl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(localcluster.DefaultBinDir(), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make k8s-binaries` (kustomize is kubectl's)", bin)
	}
	return bin
}

// TestInstallerUpToDate regenerates the installer with the Makefile's
// default image and compares it with the committed dist/install.yaml.
func TestInstallerUpToDate(t *testing.T) {
	root := testutil.RepoRoot(t)
	out := filepath.Join(t.TempDir(), "install.yaml")
	cmd := exec.Command("make", "--no-print-directory", "-s", "build-installer",
		"INSTALLER="+out, "KUBECTL="+kubectl(t))
	cmd.Dir = root
	// The default image is part of the comparison: an IMG from the
	// environment must not leak in.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "IMG=") })
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, b)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(root, "dist", "install.yaml"))
	if err != nil {
		t.Fatalf("dist/install.yaml: %v (run `make build-installer`)", err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatalf("dist/install.yaml is out of date: run `make manifests build-installer` and commit it.\nfirst difference:\n%s",
			firstDifference(committed, fresh))
	}
}

func firstDifference(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  committed: " + x + "\n  generated: " + y
		}
	}
	return "(none)"
}

// manifest is one document of a rendered YAML stream.
type manifest struct {
	meta metav1.TypeMeta
	obj  metav1.ObjectMeta
	raw  []byte
}

func render(t *testing.T, path string) []manifest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, data)
}

func parse(t *testing.T, data []byte) []manifest {
	t.Helper()
	var out []manifest
	if err := localcluster.EachDocument(data, func(doc []byte) error {
		var m struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return err
		}
		if m.Kind != "" {
			out = append(out, manifest{meta: m.TypeMeta, obj: m.Metadata, raw: doc})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func decode[T any](t *testing.T, m manifest) *T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(m.raw, &v); err != nil {
		t.Fatalf("%s %s: %v", m.meta.Kind, m.obj.Name, err)
	}
	return &v
}

func find(ms []manifest, kind, name string) (manifest, bool) {
	for _, m := range ms {
		if m.meta.Kind == kind && m.obj.Name == name {
			return m, true
		}
	}
	return manifest{}, false
}

func installer(t *testing.T) []manifest {
	return render(t, filepath.Join(testutil.RepoRoot(t), "dist", "install.yaml"))
}

// TestInstallerContents: every object the issue lists is there, namespaced
// objects are in deckhand-system, and the CRDs precede everything that
// could depend on them.
func TestInstallerContents(t *testing.T) {
	ms := installer(t)
	want := map[string][]string{
		"Namespace":                        {namespace},
		"ServiceAccount":                   {"deckhand-controller-manager"},
		"ClusterRole":                      {"deckhand-manager-role", "deckhand-manager-certs-role", "deckhand-metrics-auth-role", "deckhand-metrics-reader"},
		"ClusterRoleBinding":               {"deckhand-manager-rolebinding", "deckhand-manager-certs-rolebinding", "deckhand-metrics-auth-rolebinding"},
		"Role":                             {"deckhand-leader-election-role", "deckhand-manager-certs-role"},
		"RoleBinding":                      {"deckhand-leader-election-rolebinding", "deckhand-manager-certs-rolebinding"},
		"NetworkPolicy":                    {"deckhand-controller-manager"},
		"ValidatingAdmissionPolicy":        {"deckhand-manager-writes"},
		"ValidatingAdmissionPolicyBinding": {"deckhand-manager-writes"},
		"Deployment":                       {"deckhand-controller-manager"},
		"Service":                          {"deckhand-webhook-service", "deckhand-controller-manager-metrics-service"},
		"PodDisruptionBudget":              {"deckhand-controller-manager"},
		"Secret":                           {"deckhand-webhook-server-cert"},
		"MutatingWebhookConfiguration":     {"deckhand-mutating-webhook-configuration"},
		"ValidatingWebhookConfiguration":   {"deckhand-validating-webhook-configuration"},
		"CustomResourceDefinition": {"sidecarsets.apps.deckhand.dev", "podsets.apps.deckhand.dev",
			"webservers.apps.deckhand.dev", "restartschedules.apps.deckhand.dev"},
	}
	for kind, names := range want {
		for _, name := range names {
			if _, ok := find(ms, kind, name); !ok {
				t.Errorf("dist/install.yaml has no %s %s", kind, name)
			}
		}
	}
	clusterScoped := map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
		"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
		"CustomResourceDefinition": true, "MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
	for _, m := range ms {
		if !clusterScoped[m.meta.Kind] && m.obj.Namespace != namespace {
			t.Errorf("%s %s is in namespace %q, want %s", m.meta.Kind, m.obj.Name, m.obj.Namespace, namespace)
		}
	}
	if ms[0].meta.Kind != "Namespace" {
		t.Errorf("the first object is a %s; the Namespace must come first", ms[0].meta.Kind)
	}
	ns := decode[corev1.Namespace](t, ms[0])
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s does not enforce the restricted Pod Security Standard: %v", namespace, ns.Labels)
	}
}

// TestInstallerRBACLeastPrivilege: no wildcard anywhere; Secrets only in
// Deckhand's namespace and updatable only by name; webhook configurations
// updatable only by name; no write access to RBAC, nodes or namespaces;
// finalizers only of Deckhand's own kinds.
func TestInstallerRBACLeastPrivilege(t *testing.T) {
	ms := installer(t)
	check := func(kind, name string, rules []rbacv1.PolicyRule) {
		for i, r := range rules {
			for field, vals := range map[string][]string{"verbs": r.Verbs, "resources": r.Resources,
				"apiGroups": r.APIGroups, "nonResourceURLs": r.NonResourceURLs} {
				for _, v := range vals {
					if strings.Contains(v, "*") {
						t.Errorf("%s %s rule %d: %s contains %q", kind, name, i, field, v)
					}
				}
			}
		}
	}
	var managerRules []rbacv1.PolicyRule
	for _, m := range ms {
		switch m.meta.Kind {
		case "ClusterRole":
			cr := decode[rbacv1.ClusterRole](t, m)
			check("ClusterRole", cr.Name, cr.Rules)
			if cr.AggregationRule != nil {
				t.Errorf("ClusterRole %s aggregates other roles", cr.Name)
			}
			checkAggregation(t, cr)
			// The manager's roles: the one every kind needs, and each
			// kind's and mode's own.
			if strings.HasPrefix(cr.Name, "deckhand-manager-") && strings.HasSuffix(cr.Name, "-role") {
				managerRules = append(managerRules, cr.Rules...)
			}
		case "Role":
			r := decode[rbacv1.Role](t, m)
			check("Role", r.Name, r.Rules)
			for _, rule := range r.Rules {
				if slices.Contains(rule.Resources, "secrets") && slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) &&
					!slices.Equal(rule.ResourceNames, []string{"deckhand-webhook-server-cert"}) {
					t.Errorf("Role %s may write Secrets other than deckhand-webhook-server-cert: %+v", r.Name, rule)
				}
			}
		}
	}
	if managerRules == nil {
		t.Fatal("no ClusterRole deckhand-manager-role")
	}
	for _, r := range managerRules {
		for _, res := range r.Resources {
			// blockOwnerDeletion on the objects it owns needs update on
			// the owner's finalizers (OwnerReferencesPermissionEnforcement):
			// its own kinds only, and nothing but update.
			if strings.HasSuffix(res, "/finalizers") && (!slices.Equal(r.APIGroups, []string{"apps.deckhand.dev"}) || !slices.Equal(r.Verbs, []string{"update"})) {
				t.Errorf("the manager ClusterRole grants %v on %s in %v: only update on Deckhand's own kinds' finalizers is needed", r.Verbs, res, r.APIGroups)
			}
			switch res {
			case "secrets", "nodes", "clusterroles", "clusterrolebindings", "roles", "rolebindings", "serviceaccounts/token":
				t.Errorf("the manager ClusterRole grants %v on %s cluster-wide", r.Verbs, res)
			case "namespaces":
				if slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
					t.Errorf("the manager ClusterRole may modify namespaces: %v", r.Verbs)
				}
			}
		}
	}
	for _, m := range ms {
		if m.meta.Kind != "ClusterRole" {
			continue
		}
		for _, r := range decode[rbacv1.ClusterRole](t, m).Rules {
			for _, res := range r.Resources {
				if (res == "mutatingwebhookconfigurations" || res == "validatingwebhookconfigurations") &&
					slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "list" && v != "watch" }) && len(r.ResourceNames) == 0 {
					t.Errorf("ClusterRole %s may %v every %s, not only Deckhand's", m.obj.Name, r.Verbs, res)
				}
			}
		}
	}
}

// writers returns the roles (kind/name) of ms that grant a verb other than
// get, list or watch on resource.
func writers(t *testing.T, ms []manifest, resource string) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		var rules []rbacv1.PolicyRule
		switch m.meta.Kind {
		case "ClusterRole":
			rules = decode[rbacv1.ClusterRole](t, m).Rules
		case "Role":
			rules = decode[rbacv1.Role](t, m).Rules
		default:
			continue
		}
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) && slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
				out = append(out, m.meta.Kind+"/"+m.obj.Name)
			}
		}
	}
	return out
}

// TestInstallerRulesFollowTheDefaultMode: dist/install.yaml grants the
// permissions of the modes its manager runs in, and no other: self-managed
// certificates (--cert-management=self) may update Deckhand's own webhook
// configurations and certificate Secret, by name, from a role of their own;
// policy injection is off, so nothing may write MutatingAdmissionPolicies.
func TestInstallerRulesFollowTheDefaultMode(t *testing.T) {
	ms := installer(t)
	dm, ok := find(ms, "Deployment", "deckhand-controller-manager")
	if !ok {
		t.Fatal("no Deployment")
	}
	args := decode[appsv1.Deployment](t, dm).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--cert-management=self") || slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--sidecarset-policy-injection") || strings.HasPrefix(a, "--sidecarset-injection-mode=Policy")
	}) {
		t.Fatalf("the default mode changed (args %v): change the rules this test expects with it", args)
	}
	for res, want := range map[string][]string{
		"mutatingwebhookconfigurations":   {"ClusterRole/deckhand-manager-certs-role"},
		"validatingwebhookconfigurations": {"ClusterRole/deckhand-manager-certs-role"},
		"secrets":                         {"Role/deckhand-manager-certs-role"},
		"mutatingadmissionpolicies":       nil,
		"mutatingadmissionpolicybindings": nil,
	} {
		if got := writers(t, ms, res); !slices.Equal(got, want) {
			t.Errorf("roles writing %s: %v, want %v", res, got, want)
		}
	}
	for _, name := range []string{"deckhand-manager-certs-role", "deckhand-manager-role", "deckhand-manager-sidecarset-role",
		"deckhand-manager-podset-role", "deckhand-manager-webserver-role", "deckhand-manager-restartschedule-role"} {
		if _, ok := find(ms, "ClusterRoleBinding", strings.TrimSuffix(name, "-role")+"-rolebinding"); !ok {
			t.Errorf("ClusterRole %s is bound by no ClusterRoleBinding of its name", name)
		}
	}
	// The ValidatingAdmissionPolicy on the manager, and a NetworkPolicy.
	for _, k := range [][2]string{{"ValidatingAdmissionPolicy", "deckhand-manager-writes"}, {"ValidatingAdmissionPolicyBinding", "deckhand-manager-writes"},
		{"NetworkPolicy", "deckhand-controller-manager"}} {
		if _, ok := find(ms, k[0], k[1]); !ok {
			t.Errorf("no %s %s", k[0], k[1])
		}
	}
}

// TestPolicyInjectionComponent: uncommenting the policy-injection component
// in config/default, as docs/install.md says, turns the flag on and grants
// the permission on MutatingAdmissionPolicies with it, and nothing else.
func TestPolicyInjectionComponent(t *testing.T) {
	out := renderEdited(t, "default", func(data []byte) []byte {
		const line = "#- ../components/policy-injection\n"
		if !bytes.Contains(data, []byte(line)) {
			t.Fatalf("config/default/kustomization.yaml has no line %q to uncomment", line)
		}
		return bytes.Replace(data, []byte(line), []byte(line[1:]), 1)
	})
	ms := parse(t, out)
	dm, ok := find(ms, "Deployment", "deckhand-controller-manager")
	if !ok {
		t.Fatal("no Deployment")
	}
	if args := decode[appsv1.Deployment](t, dm).Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--sidecarset-policy-injection") {
		t.Errorf("args %v lack --sidecarset-policy-injection", args)
	}
	for _, res := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		if got := writers(t, ms, res); !slices.Equal(got, []string{"ClusterRole/deckhand-manager-policy-role"}) {
			t.Errorf("roles writing %s: %v, want deckhand-manager-policy-role", res, got)
		}
	}
	bm, ok := find(ms, "ClusterRoleBinding", "deckhand-manager-policy-rolebinding")
	if !ok {
		t.Fatal("no ClusterRoleBinding deckhand-manager-policy-rolebinding")
	}
	if b := decode[rbacv1.ClusterRoleBinding](t, bm); b.RoleRef.Name != "deckhand-manager-policy-role" ||
		len(b.Subjects) != 1 || b.Subjects[0].Name != "deckhand-controller-manager" || b.Subjects[0].Namespace != namespace {
		t.Errorf("the policy role is bound as %+v to %+v", b.RoleRef, b.Subjects)
	}
	if len(ms) != len(installer(t))+2 {
		t.Errorf("the component adds %d objects, want 2 (the role and its binding)", len(ms)-len(installer(t)))
	}
}

// TestKindComponents: leaving the other kinds' components out of
// config/default, as docs/operations.md says for a manager run with
// --controllers=restartschedule, leaves out their roles and bindings and
// nothing else: no role of the manager's is left on SidecarSets, WebServers,
// Namespaces or Services, and the RestartSchedule role is still bound.
func TestKindComponents(t *testing.T) {
	out := renderEdited(t, "default", func(data []byte) []byte {
		for _, kind := range []string{"sidecarset", "podset", "webserver"} {
			line := []byte("- ../components/" + kind + "-controller\n")
			if !bytes.Contains(data, line) {
				t.Fatalf("config/default/kustomization.yaml has no line %q to remove", line)
			}
			data = bytes.Replace(data, line, nil, 1)
		}
		return data
	})
	ms := parse(t, out)
	for _, m := range ms {
		if m.meta.Kind != "ClusterRole" || !strings.HasPrefix(m.obj.Name, "deckhand-manager-") {
			continue
		}
		for _, r := range decode[rbacv1.ClusterRole](t, m).Rules {
			for _, res := range r.Resources {
				switch res {
				case "sidecarsets", "webservers", "namespaces", "services", "podsets/status":
					t.Errorf("ClusterRole %s grants %v on %s without their kinds", m.obj.Name, r.Verbs, res)
				}
			}
		}
	}
	if _, ok := find(ms, "ClusterRoleBinding", "deckhand-manager-restartschedule-rolebinding"); !ok {
		t.Error("no ClusterRoleBinding deckhand-manager-restartschedule-rolebinding")
	}
	if len(ms) != len(installer(t))-6 {
		t.Errorf("leaving three kinds out removes %d objects, want 6 (their roles and bindings)", len(installer(t))-len(ms))
	}
}

// aggregatedRoles are the only roles the install aggregates into the
// built-in ones, and into which: the namespaced kinds' editor and viewer.
var aggregatedRoles = map[string][]string{
	"deckhand-apps-editor-role": {"admin", "edit"},
	"deckhand-apps-viewer-role": {"view"},
}

// checkAggregation: a ClusterRole is aggregated into exactly the built-in
// roles aggregatedRoles names, and an aggregated role grants nothing on
// SidecarSets (creating one is a cluster-admin-level permission, and
// namespace owners who get "edit" must not get it).
func checkAggregation(t *testing.T, cr *rbacv1.ClusterRole) {
	t.Helper()
	var into []string
	for k, v := range cr.Labels {
		if to, ok := strings.CutPrefix(k, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
			into = append(into, to)
		}
	}
	slices.Sort(into)
	if want := aggregatedRoles[cr.Name]; !slices.Equal(into, want) {
		t.Errorf("ClusterRole %s is aggregated into %v, want %v", cr.Name, into, want)
	}
	if len(into) == 0 {
		return
	}
	for _, r := range cr.Rules {
		if slices.ContainsFunc(r.Resources, func(res string) bool { return strings.HasPrefix(res, "sidecarsets") }) {
			t.Errorf("ClusterRole %s is aggregated into %v and grants %v on %v", cr.Name, into, r.Verbs, r.Resources)
		}
	}
}

// TestInstallerManagerDeployment: the Deployment's availability and
// security settings.
func TestInstallerManagerDeployment(t *testing.T) {
	ms := installer(t)
	m, ok := find(ms, "Deployment", "deckhand-controller-manager")
	if !ok {
		t.Fatal("no Deployment deckhand-controller-manager")
	}
	d := decode[appsv1.Deployment](t, m)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "deckhand-controller-manager" {
		t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/deckhand-dev/deckhand:dev" {
		t.Errorf("image = %q, want the Makefile's default IMG", c.Image)
	}
	for _, arg := range []string{"--leader-elect", "--cert-management=self", "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities = %+v, want drop [ALL]", sc.Capabilities)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("no liveness probe on /healthz")
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("no readiness probe on /readyz")
	}
	checkManagerEnv(t, c)
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("no %s request", res)
		}
		if _, ok := c.Resources.Limits[res]; !ok {
			t.Errorf("no %s limit", res)
		}
	}
	certDir := false
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == "/tmp/k8s-webhook-server/serving-certs" {
			for _, v := range pod.Volumes {
				if v.Name == vm.Name && v.EmptyDir != nil {
					certDir = true
				}
			}
		}
	}
	if !certDir {
		t.Error("the webhook certificate directory is not an emptyDir volume")
	}

	pm, ok := find(ms, "PodDisruptionBudget", "deckhand-controller-manager")
	if !ok {
		t.Fatal("no PodDisruptionBudget")
	}
	pdb := decode[policyv1.PodDisruptionBudget](t, pm)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable = %v, want 1", pdb.Spec.MinAvailable)
	}
	if !metav1.HasLabel(metav1.ObjectMeta{Labels: d.Spec.Template.Labels}, "control-plane") ||
		pdb.Spec.Selector.MatchLabels["control-plane"] != d.Spec.Template.Labels["control-plane"] {
		t.Errorf("the PDB selector %v does not select the manager pods %v", pdb.Spec.Selector, d.Spec.Template.Labels)
	}
}

// TestInstallerWebhooks: every webhook calls the webhook Service with an
// explicit failure policy, and the Pod webhook skips kube-system and
// deckhand-system.
func TestInstallerWebhooks(t *testing.T) {
	ms := installer(t)
	mm, ok := find(ms, "MutatingWebhookConfiguration", "deckhand-mutating-webhook-configuration")
	if !ok {
		t.Fatal("no MutatingWebhookConfiguration")
	}
	vm, ok := find(ms, "ValidatingWebhookConfiguration", "deckhand-validating-webhook-configuration")
	if !ok {
		t.Fatal("no ValidatingWebhookConfiguration")
	}
	type hook struct {
		name   string
		cc     admissionregistrationv1.WebhookClientConfig
		policy *admissionregistrationv1.FailurePolicyType
		rules  []admissionregistrationv1.RuleWithOperations
		nsSel  *metav1.LabelSelector
	}
	var hooks []hook
	for _, h := range decode[admissionregistrationv1.MutatingWebhookConfiguration](t, mm).Webhooks {
		hooks = append(hooks, hook{h.Name, h.ClientConfig, h.FailurePolicy, h.Rules, h.NamespaceSelector})
	}
	for _, h := range decode[admissionregistrationv1.ValidatingWebhookConfiguration](t, vm).Webhooks {
		hooks = append(hooks, hook{h.Name, h.ClientConfig, h.FailurePolicy, h.Rules, h.NamespaceSelector})
	}
	podHooks := 0
	for _, h := range hooks {
		if h.cc.Service == nil || h.cc.Service.Name != "deckhand-webhook-service" || h.cc.Service.Namespace != namespace {
			t.Errorf("webhook %s does not call deckhand-webhook-service.%s: %+v", h.name, namespace, h.cc)
		}
		if h.policy == nil {
			t.Errorf("webhook %s has no explicit failurePolicy", h.name)
		}
		for _, r := range h.rules {
			if !slices.Contains(r.Resources, "pods") {
				continue
			}
			podHooks++
			excluded := map[string]bool{}
			if h.nsSel != nil {
				for _, e := range h.nsSel.MatchExpressions {
					if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpNotIn {
						for _, v := range e.Values {
							excluded[v] = true
						}
					}
				}
			}
			if !excluded["kube-system"] || !excluded[namespace] {
				t.Errorf("pod webhook %s does not exclude kube-system and %s: %+v", h.name, namespace, h.nsSel)
			}
		}
	}
	if podHooks == 0 {
		t.Error("no pod webhook found")
	}
}

// TestCertManagerOverlay: the cert-manager variant renders, asks the CA
// injector for both webhook configurations, mounts cert-manager's Secret
// and drops the self-managed Secret and the permission to write it.
func TestCertManagerOverlay(t *testing.T) {
	out, err := exec.Command(kubectl(t), "kustomize", filepath.Join(testutil.RepoRoot(t), "config", "certmanager")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/certmanager: %v", err)
	}
	ms := parse(t, out)
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		var found bool
		for _, m := range ms {
			if m.meta.Kind == kind {
				found = true
				if m.obj.Annotations["cert-manager.io/inject-ca-from"] != namespace+"/deckhand-serving-cert" {
					t.Errorf("%s %s lacks the cert-manager CA injection annotation", kind, m.obj.Name)
				}
			}
		}
		if !found {
			t.Errorf("no %s", kind)
		}
	}
	for _, kind := range []string{"Certificate", "Issuer"} {
		if !slices.ContainsFunc(ms, func(m manifest) bool { return m.meta.Kind == kind }) {
			t.Errorf("no cert-manager %s", kind)
		}
	}
	if _, ok := find(ms, "Secret", "deckhand-webhook-server-cert"); ok {
		t.Error("the self-managed Secret is still there")
	}
	if _, ok := find(ms, "Role", "deckhand-manager-certs-role"); ok {
		t.Error("the Role for the self-managed Secret is still there")
	}
	// cert-manager writes the certificate and the caBundle: nothing grants
	// the manager a write on Secrets or on its webhook configurations.
	for _, res := range []string{"secrets", "mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		if got := writers(t, ms, res); len(got) > 0 {
			t.Errorf("with cert-manager, %v may write %s", got, res)
		}
	}
	dm, ok := find(ms, "Deployment", "deckhand-controller-manager")
	if !ok {
		t.Fatal("no Deployment")
	}
	d := decode[appsv1.Deployment](t, dm)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--cert-management=external") {
		t.Errorf("args %v lack --cert-management=external", d.Spec.Template.Spec.Containers[0].Args)
	}
	v := d.Spec.Template.Spec.Volumes[0]
	if v.Secret == nil || v.Secret.SecretName != "deckhand-webhook-server-cert" {
		t.Errorf("the certificate volume is not cert-manager's Secret: %+v", v)
	}
	checkCertManagerChain(t, ms)
}

// checkCertManagerChain: the serving certificate is signed by a CA of
// Deckhand's own (self-signed issuer -> CA certificate -> CA issuer ->
// serving certificate), so renewing the serving certificate keeps the trust
// anchor the API server holds.
func checkCertManagerChain(t *testing.T, ms []manifest) {
	t.Helper()
	type certManagerObject struct {
		Spec struct {
			IsCA       bool              `json:"isCA"`
			SecretName string            `json:"secretName"`
			IssuerRef  map[string]string `json:"issuerRef"`
			SelfSigned *struct{}         `json:"selfSigned"`
			CA         *struct {
				SecretName string `json:"secretName"`
			} `json:"ca"`
		} `json:"spec"`
	}
	get := func(kind, name string) *certManagerObject {
		m, ok := find(ms, kind, name)
		if !ok {
			t.Fatalf("no cert-manager %s %s", kind, name)
		}
		var o certManagerObject
		if err := yaml.Unmarshal(m.raw, &o); err != nil {
			t.Fatal(err)
		}
		return &o
	}
	if get("Issuer", "deckhand-selfsigned-issuer").Spec.SelfSigned == nil {
		t.Error("deckhand-selfsigned-issuer is not self-signed")
	}
	ca := get("Certificate", "deckhand-ca")
	if !ca.Spec.IsCA || ca.Spec.IssuerRef["name"] != "deckhand-selfsigned-issuer" {
		t.Errorf("deckhand-ca is not a CA certificate issued by the self-signed issuer: %+v", ca.Spec)
	}
	caIssuer := get("Issuer", "deckhand-ca-issuer")
	if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != ca.Spec.SecretName {
		t.Errorf("deckhand-ca-issuer does not sign with the CA's Secret %s: %+v", ca.Spec.SecretName, caIssuer.Spec)
	}
	if serving := get("Certificate", "deckhand-serving-cert"); serving.Spec.IsCA || serving.Spec.IssuerRef["name"] != "deckhand-ca-issuer" {
		t.Errorf("the serving certificate is not issued by the CA issuer: %+v", serving.Spec)
	}
}

// checkManagerEnv: the manager learns its namespace from the downward API,
// and its soft heap limit sits a little under the container's memory limit
// (below it, so the runtime collects before the kernel kills; near it, so
// the limit is used).
func checkManagerEnv(t *testing.T, c corev1.Container) {
	t.Helper()
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_NAMESPACE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE is not the pod's namespace from the downward API: %+v", e)
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	soft, err := parseGoMemLimit(env["GOMEMLIMIT"].Value)
	if err != nil {
		t.Fatalf("GOMEMLIMIT: %v", err)
	}
	if ratio := float64(soft) / float64(limit.Value()); ratio < 0.8 || ratio > 0.95 {
		t.Errorf("GOMEMLIMIT %s is %.2f of the memory limit %s, want 0.80-0.95", env["GOMEMLIMIT"].Value, ratio, limit.String())
	}
}

// parseGoMemLimit reads the forms of GOMEMLIMIT the shipped Deployment uses:
// a number of bytes with an optional KiB/MiB/GiB suffix.
func parseGoMemLimit(v string) (int64, error) {
	q, err := resource.ParseQuantity(strings.TrimSuffix(v, "B"))
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

// renderIn renders the overlay dir of a copy of config/ whose
// config/default installs into ns: the one line a user changes (what
// `make build-installer NAMESPACE=ns` does).
func renderIn(t *testing.T, ns, dir string) string {
	t.Helper()
	return string(renderEdited(t, dir, func(data []byte) []byte {
		line := regexp.MustCompile(`(?m)^namespace: .*$`)
		if !line.Match(data) {
			t.Fatal("config/default/kustomization.yaml has no namespace line")
		}
		return line.ReplaceAll(data, []byte("namespace: "+ns))
	}))
}

// renderEdited renders the overlay dir of a copy of config/ in which edit
// has rewritten config/default/kustomization.yaml, the file a user edits to
// choose what the installation holds.
func renderEdited(t *testing.T, dir string, edit func(kustomization []byte) []byte) []byte {
	t.Helper()
	tmp := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(testutil.RepoRoot(t), "config"), tmp).CombinedOutput(); err != nil {
		t.Fatalf("copy config/: %v\n%s", err, out)
	}
	k := filepath.Join(tmp, "config", "default", "kustomization.yaml")
	data, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, edit(data), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl(t), "kustomize", filepath.Join(tmp, "config", dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v", dir, err)
	}
	return out
}

// TestInstallIntoAnotherNamespace: with config/default's namespace changed,
// neither the self-managed install nor the cert-manager overlay names
// deckhand-system anywhere, and what depends on the namespace follows it:
// every namespaced object, the webhooks' Service, the pod webhook's
// exclusion of the manager's own pods, the serving certificate's DNS names
// and the CA injection.
func TestInstallIntoAnotherNamespace(t *testing.T) {
	const ns = "team-ops"
	for _, dir := range []string{"default", "certmanager", "monitoring"} {
		t.Run(dir, func(t *testing.T) {
			out := renderIn(t, ns, dir)
			if strings.Contains(out, namespace) {
				for i, l := range strings.Split(out, "\n") {
					if strings.Contains(l, namespace) {
						t.Errorf("line %d still names %s: %s", i+1, namespace, strings.TrimSpace(l))
					}
				}
			}
			ms := parse(t, []byte(out))
			for _, m := range ms {
				if m.obj.Namespace != "" && m.obj.Namespace != ns {
					t.Errorf("%s %s is in namespace %q, want %s", m.meta.Kind, m.obj.Name, m.obj.Namespace, ns)
				}
			}
			mm, ok := find(ms, "MutatingWebhookConfiguration", "deckhand-mutating-webhook-configuration")
			if !ok {
				t.Fatal("no MutatingWebhookConfiguration")
			}
			mwc := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, mm)
			for _, w := range mwc.Webhooks {
				if w.ClientConfig.Service == nil || w.ClientConfig.Service.Namespace != ns {
					t.Errorf("webhook %s calls %+v, want the Service in %s", w.Name, w.ClientConfig.Service, ns)
				}
				if w.NamespaceSelector == nil {
					continue
				}
				for _, e := range w.NamespaceSelector.MatchExpressions {
					if e.Key == "kubernetes.io/metadata.name" && !slices.Contains(e.Values, ns) {
						t.Errorf("pod webhook %s does not exclude %s: %v", w.Name, ns, e.Values)
					}
				}
			}
			if dir != "certmanager" {
				return
			}
			cm, ok := find(ms, "Certificate", "deckhand-serving-cert")
			if !ok {
				t.Fatal("no serving Certificate")
			}
			if !strings.Contains(string(cm.raw), "deckhand-webhook-service."+ns+".svc") {
				t.Errorf("the serving certificate is not issued for the webhook Service in %s:\n%s", ns, cm.raw)
			}
			if got := mwc.Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/deckhand-serving-cert" {
				t.Errorf("inject-ca-from = %q, want %s/deckhand-serving-cert", got, ns)
			}
			dm, _ := find(ms, "Deployment", "deckhand-controller-manager")
			checkManagerEnv(t, decode[appsv1.Deployment](t, dm).Spec.Template.Spec.Containers[0])
		})
	}
}

// TestClientSideApply applies the install with kubectl's client-side apply,
// which stores each object, as JSON, in the last-applied-configuration
// annotation: `kubectl apply -f dist/install.yaml`, then
// `kubectl apply -k config/default` over it. The API server refuses an
// object whose annotations exceed 256 KiB, as the PodSet CRD did before
// `make manifests` trimmed Kubernetes' descriptions (hack/crdtrim). With the
// Deckhand webhooks removed (nothing serves them here), the CRDs alone still
// refuse a wrong type, a value outside an enum and a missing required
// field, naming the field.
func TestClientSideApply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local API server")
	}
	ctx := testutil.Context(t, 4*time.Minute)
	cluster, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	root := testutil.RepoRoot(t)
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, kubectl(t), append([]string{"--kubeconfig", cluster.KubeconfigPath}, args...)...)
		cmd.Dir = root
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"apply", "-f", "dist/install.yaml"},
		{"apply", "-k", "config/default"},
	} {
		if out, err := run("", args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := run("", "get", "crd", "-l", "app.kubernetes.io/part-of=deckhand", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get crd: %v\n%s", err, out)
	}
	var crds struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := yaml.Unmarshal([]byte(out), &crds); err != nil {
		t.Fatal(err)
	}
	if len(crds.Items) != 4 {
		t.Fatalf("want the four CRDs, got %d", len(crds.Items))
	}
	for _, crd := range crds.Items {
		if crd.Metadata.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == "" {
			t.Errorf("CRD %s has no last-applied-configuration: not applied client-side", crd.Metadata.Name)
		}
	}

	if out, err := run("", "wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", "app.kubernetes.io/part-of=deckhand"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	if out, err := run("", "delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "-l", "app.kubernetes.io/part-of=deckhand"); err != nil {
		t.Fatalf("kubectl delete webhooks: %v\n%s", err, out)
	}
	if out, err := run("", "create", "namespace", "shop"); err != nil {
		t.Fatalf("kubectl create namespace: %v\n%s", err, out)
	}
	refusals := []struct{ name, spec, want string }{
		{"wrong-type", `template: {metadata: {labels: {app: web}}, spec: {containers: [{name: web, image: nginx, ports: [{containerPort: eighty}]}]}}`,
			`spec.template.spec.containers[0].ports[0].containerPort: Invalid value: "string": spec.template.spec.containers[0].ports[0].containerPort in body must be of type integer: "string"`},
		{"outside-enum", `updateStrategy: {type: Sideways}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: web, image: nginx}]}}`,
			`spec.updateStrategy.type: Unsupported value: "Sideways": supported values: "RollingUpdate", "OnDelete"`},
		{"missing-required", `template: {metadata: {labels: {app: web}}, spec: {containers: [{image: nginx}]}}`,
			`spec.template.spec.containers[0].name: Required value`},
	}
	for _, r := range refusals {
		podSet := "apiVersion: apps.deckhand.dev/v1alpha1\nkind: PodSet\nmetadata: {name: " + r.name + ", namespace: shop}\n" +
			"spec: {selector: {matchLabels: {app: web}}, " + r.spec + "}\n"
		out, err := run(podSet, "apply", "-f", "-")
		if err == nil {
			t.Errorf("%s: applied, want a refusal", r.name)
			continue
		}
		if !strings.Contains(out, r.want) {
			t.Errorf("%s: kubectl said\n%s\nwant it to contain\n%s", r.name, out, r.want)
		}
	}
}
