package helm

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type rendered map[string]*unstructured.Unstructured

func (r rendered) get(t *testing.T, key string) *unstructured.Unstructured {
	t.Helper()
	obj, ok := r[key]
	if !ok {
		t.Fatalf("%s not rendered", key)
	}
	return obj
}

func nested(t *testing.T, obj *unstructured.Unstructured, fields ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(obj.Object, fields...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(fields, "."), err)
	}
	return v
}

// manager returns the manager container of the rendered Deployment.
func manager(t *testing.T, r rendered, ns string) map[string]any {
	t.Helper()
	containers := nested(t, r.get(t, "Deployment/"+ns+"/deckhand-controller-manager"), "spec", "template", "spec", "containers").([]any)
	return containers[0].(map[string]any)
}

func env(t *testing.T, r rendered, ns, name string) (string, bool) {
	t.Helper()
	for _, e := range manager(t, r, ns)["env"].([]any) {
		if e := e.(map[string]any); e["name"] == name {
			v, _ := e["value"].(string)
			return v, true
		}
	}
	return "", false
}

func args(t *testing.T, r rendered, ns string) []string {
	t.Helper()
	var out []string
	for _, a := range manager(t, r, ns)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// wantArgs fails t for each of want the manager container's args lack.
func wantArgs(t *testing.T, r rendered, ns string, want ...string) {
	t.Helper()
	have := args(t, r, ns)
	for _, w := range want {
		if !slices.Contains(have, w) {
			t.Errorf("args %v lack %s", have, w)
		}
	}
}

// writers returns the roles (kind/name) of r that grant a verb other than
// get, list or watch on resource.
func writers(r rendered, resource string) []string {
	return grantors(r, resource, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
}

// grantors returns the roles (kind/name) of r that grant on resource a
// verb that counts.
func grantors(r rendered, resource string, counts func(verb string) bool) []string {
	var out []string
	for k, obj := range r {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for _, rule := range rules {
			rule := rule.(map[string]any)
			res, _, _ := unstructured.NestedStringSlice(rule, "resources")
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			if slices.Contains(res, resource) && slices.ContainsFunc(verbs, counts) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// policyUser is the user the admission policy on the manager matches.
func policyUser(t *testing.T, r rendered) string {
	t.Helper()
	for _, c := range nested(t, r.get(t, "ValidatingAdmissionPolicy/deckhand-manager-writes"), "spec", "matchConditions").([]any) {
		if c := c.(map[string]any); c["name"] == "deckhand-manager" {
			return c["expression"].(string)
		}
	}
	t.Fatal("the admission policy has no deckhand-manager match condition")
	return ""
}

func podWebhook(t *testing.T, r rendered) map[string]any {
	t.Helper()
	for _, h := range nested(t, r.get(t, "MutatingWebhookConfiguration/deckhand-mutating-webhook-configuration"), "webhooks").([]any) {
		if h := h.(map[string]any); h["name"] == "msidecarset-pod.apps.deckhand.dev" {
			return h
		}
	}
	t.Fatal("no pod webhook rendered")
	return nil
}

// managerGrants returns the manager's roles (not the users' roles the
// chart ships) that grant any verb on resource.
func managerGrants(r rendered, resource string) []string {
	return slices.DeleteFunc(grantors(r, resource, func(string) bool { return true }), func(k string) bool {
		return !strings.Contains(k, "/deckhand-manager-")
	})
}

// webhookPaths are the paths of every webhook of r's webhook configurations.
func webhookPaths(r rendered) []string {
	var out []string
	for _, obj := range r {
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for _, h := range hooks {
			if p, ok, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "path"); ok {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// noneRendered checks that no object whose key starts with prefix (a kind
// and a slash) is rendered.
func noneRendered(prefix string) func(t *testing.T, r rendered) {
	return func(t *testing.T, r rendered) {
		t.Helper()
		for k := range r {
			if strings.HasPrefix(k, prefix) {
				t.Errorf("%s rendered", k)
			}
		}
	}
}

// TestValues renders the chart with each combination of values docs/helm.md
// describes and checks its effect on the rendered objects.
func TestValues(t *testing.T) {
	const ns = "deckhand-system"
	podSpec := func(t *testing.T, r rendered) map[string]any {
		return nested(t, r.get(t, "Deployment/"+ns+"/deckhand-controller-manager"), "spec", "template", "spec").(map[string]any)
	}
	cases := []struct {
		name  string
		ns    string
		set   []string
		check func(t *testing.T, r rendered)
	}{{
		name: "defaults",
		check: func(t *testing.T, r rendered) {
			if v, _ := env(t, r, ns, "GOMEMLIMIT"); v != "460MiB" {
				t.Errorf("GOMEMLIMIT %q, want 460MiB (90%% of 512Mi)", v)
			}
			wantArgs(t, r, ns, "--cert-management=self")
			if img := manager(t, r, ns)["image"]; img != "ghcr.io/deckhand-dev/deckhand:0.1.0-dev" {
				t.Errorf("image %v, want the appVersion tag", img)
			}
			for k := range r {
				if strings.Contains(k, "monitoring.coreos.com") || strings.HasPrefix(k, "ConfigMap/") || strings.HasPrefix(k, "Certificate/") {
					t.Errorf("%s rendered by default", k)
				}
			}
			// Self-managed certificates: their roles. Policy injection off:
			// no permission on MutatingAdmissionPolicies.
			for _, res := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
				if got := writers(r, res); !slices.Equal(got, []string{"ClusterRole/deckhand-manager-certs-role"}) {
					t.Errorf("roles writing %s: %v, want only deckhand-manager-certs-role", res, got)
				}
			}
			for _, res := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
				if got := writers(r, res); len(got) > 0 {
					t.Errorf("roles writing %s without policy injection: %v", res, got)
				}
			}
			if slices.Contains(args(t, r, ns), "--sidecarset-policy-injection") {
				t.Errorf("args %v turn policy injection on by default", args(t, r, ns))
			}
			// A namespace labelled out of every SidecarSet is out of the pod
			// webhook's reach.
			if sel := podWebhook(t, r)["namespaceSelector"].(map[string]any)["matchExpressions"].([]any); len(sel) != 2 ||
				sel[1].(map[string]any)["key"] != "apps.deckhand.dev/sidecarset-injection" || sel[1].(map[string]any)["operator"] != "NotIn" {
				t.Errorf("pod webhook namespaceSelector %v: want the protected namespaces and apps.deckhand.dev/sidecarset-injection NotIn [disabled]", sel)
			}
			r.get(t, "NetworkPolicy/"+ns+"/deckhand-controller-manager")
			r.get(t, "ValidatingAdmissionPolicyBinding/deckhand-manager-writes")
			if want := "request.userInfo.username == 'system:serviceaccount:" + ns + ":deckhand-controller-manager'"; policyUser(t, r) != want {
				t.Errorf("admission policy matches %q, want %q", policyUser(t, r), want)
			}
		},
	}, {
		name: "other namespace",
		ns:   "platform-ops",
		check: func(t *testing.T, r rendered) {
			const other = "platform-ops"
			r.get(t, "Deployment/"+other+"/deckhand-controller-manager")
			r.get(t, "Secret/"+other+"/deckhand-webhook-server-cert")
			sel := podWebhook(t, r)["namespaceSelector"].(map[string]any)["matchExpressions"].([]any)[0].(map[string]any)["values"].([]any)
			if !slices.Equal(sel, []any{"kube-system", other}) {
				t.Errorf("pod webhook excludes %v, want kube-system and %s", sel, other)
			}
			svc := podWebhook(t, r)["clientConfig"].(map[string]any)["service"].(map[string]any)
			if svc["namespace"] != other {
				t.Errorf("webhook Service namespace %v", svc["namespace"])
			}
			subjects := nested(t, r.get(t, "ClusterRoleBinding/deckhand-manager-rolebinding"), "subjects").([]any)
			if subjects[0].(map[string]any)["namespace"] != other {
				t.Errorf("manager ClusterRoleBinding subject %v", subjects[0])
			}
			if !strings.Contains(policyUser(t, r), "system:serviceaccount:"+other+":deckhand-controller-manager") {
				t.Errorf("admission policy matches %q, not the manager of %s", policyUser(t, r), other)
			}
		},
	}, {
		name: "namespace value",
		set:  []string{"namespace=team-a"},
		check: func(t *testing.T, r rendered) {
			r.get(t, "Deployment/team-a/deckhand-controller-manager")
			r.get(t, "Role/team-a/deckhand-leader-election-role")
		},
	}, {
		name: "certManager.enabled",
		set:  []string{"certManager.enabled=true"},
		check: func(t *testing.T, r rendered) {
			for _, k := range []string{"Issuer/" + ns + "/deckhand-selfsigned-issuer", "Certificate/" + ns + "/deckhand-ca", "Issuer/" + ns + "/deckhand-ca-issuer"} {
				r.get(t, k)
			}
			dns := nested(t, r.get(t, "Certificate/"+ns+"/deckhand-serving-cert"), "spec", "dnsNames").([]any)
			if !slices.Equal(dns, []any{"deckhand-webhook-service." + ns + ".svc", "deckhand-webhook-service." + ns + ".svc.cluster.local",
				"deckhand-controller-manager-metrics-service." + ns + ".svc", "deckhand-controller-manager-metrics-service." + ns + ".svc.cluster.local"}) {
				t.Errorf("dnsNames %v", dns)
			}
			for _, k := range []string{"MutatingWebhookConfiguration/deckhand-mutating-webhook-configuration", "ValidatingWebhookConfiguration/deckhand-validating-webhook-configuration"} {
				if a := r.get(t, k).GetAnnotations()["cert-manager.io/inject-ca-from"]; a != ns+"/deckhand-serving-cert" {
					t.Errorf("%s inject-ca-from %q", k, a)
				}
			}
			wantArgs(t, r, ns, "--cert-management=external")
			vol := podSpec(t, r)["volumes"].([]any)[0].(map[string]any)
			if vol["secret"] == nil {
				t.Errorf("webhook-certs volume %v is not the Secret", vol)
			}
			for _, k := range []string{"Secret/" + ns + "/deckhand-webhook-server-cert", "Role/" + ns + "/deckhand-manager-certs-role", "RoleBinding/" + ns + "/deckhand-manager-certs-rolebinding",
				"ClusterRole/deckhand-manager-certs-role", "ClusterRoleBinding/deckhand-manager-certs-rolebinding"} {
				if _, ok := r[k]; ok {
					t.Errorf("%s rendered with cert-manager", k)
				}
			}
			// cert-manager writes the certificates and the caBundle: the
			// manager may write neither its webhook configurations nor Secrets.
			for _, res := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "secrets"} {
				if got := writers(r, res); len(got) > 0 {
					t.Errorf("with cert-manager, roles writing %s: %v", res, got)
				}
			}
		},
	}, {
		name: "monitoring all on",
		set:  []string{"serviceMonitor.enabled=true", "prometheusRule.enabled=true", "grafanaDashboard.enabled=true"},
		check: func(t *testing.T, r rendered) {
			r.get(t, "ServiceMonitor/"+ns+"/deckhand-controller-manager")
			r.get(t, "PrometheusRule/"+ns+"/deckhand")
			r.get(t, "ServiceAccount/"+ns+"/deckhand-metrics-scraper")
			r.get(t, "Secret/"+ns+"/deckhand-metrics-scraper-token")
			subjects := nested(t, r.get(t, "ClusterRoleBinding/deckhand-metrics-scraper"), "subjects").([]any)
			if subjects[0].(map[string]any)["namespace"] != ns {
				t.Errorf("scraper binding subject %v", subjects[0])
			}
			cm := r.get(t, "ConfigMap/"+ns+"/deckhand-grafana-dashboard")
			if cm.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("dashboard labels %v", cm.GetLabels())
			}
			if d, _ := nested(t, cm, "data", "deckhand.json").(string); !strings.Contains(d, `"uid": "deckhand"`) {
				t.Error("dashboard ConfigMap lacks the dashboard")
			}
		},
	}, {
		name: "controllers restartschedule only",
		set:  []string{"controllers={restartschedule}"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--controllers=restartschedule")
			if got := webhookPaths(r); !slices.Equal(got, []string{"/validate-apps-deckhand-dev-v1alpha1-restartschedule"}) {
				t.Errorf("webhooks %v, want the RestartSchedule one only", got)
			}
			for _, res := range []string{"sidecarsets", "sidecarsets/status", "podsets/status", "webservers", "webservers/status",
				"namespaces", "services", "ingresses", "httproutes", "controllerrevisions", "poddisruptionbudgets", "pods/status", "pods/resize"} {
				if got := managerGrants(r, res); len(got) > 0 {
					t.Errorf("roles granting on %s without its kind: %v", res, got)
				}
			}
			// It reads the pods of the workloads it restarts and evicts
			// them; it creates, patches and deletes none.
			if got := writers(r, "pods"); len(got) > 0 {
				t.Errorf("roles writing pods: %v", got)
			}
			r.get(t, "ClusterRole/deckhand-manager-restartschedule-role")
			noneRendered("ClusterRole/deckhand-manager-sidecarset-role")(t, r)
		},
	}, {
		name: "controllers without sidecarset",
		set:  []string{"controllers={webserver,podset}", "sidecarSet.policyInjection=true"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--controllers=podset,webserver")
			want := []string{"/mutate-apps-deckhand-dev-v1alpha1-podset", "/validate-apps-deckhand-dev-v1alpha1-podset",
				"/validate-apps-deckhand-dev-v1alpha1-podset-scale", "/validate-apps-deckhand-dev-v1alpha1-webserver"}
			if got := webhookPaths(r); !slices.Equal(got, want) {
				t.Errorf("webhooks %v, want %v: no pod webhook without SidecarSets", got, want)
			}
			for _, res := range []string{"sidecarsets", "namespaces", "mutatingadmissionpolicies"} {
				if got := managerGrants(r, res); len(got) > 0 {
					t.Errorf("roles granting on %s without SidecarSets: %v", res, got)
				}
			}
		},
	}, {
		name: "resources without memory limit",
		set:  []string{"resources.limits.memory=null"},
		check: func(t *testing.T, r rendered) {
			if v, ok := env(t, r, ns, "GOMEMLIMIT"); ok {
				t.Errorf("GOMEMLIMIT %q without a memory limit", v)
			}
		},
	}, {
		name: "memory limit in Gi",
		set:  []string{"resources.limits.memory=1Gi"},
		check: func(t *testing.T, r rendered) {
			if v, _ := env(t, r, ns, "GOMEMLIMIT"); v != "921MiB" {
				t.Errorf("GOMEMLIMIT %q, want 921MiB", v)
			}
		},
	}, {
		name: "goMemLimit explicit",
		set:  []string{"goMemLimit=300MiB"},
		check: func(t *testing.T, r rendered) {
			if v, _ := env(t, r, ns, "GOMEMLIMIT"); v != "300MiB" {
				t.Errorf("GOMEMLIMIT %q, want 300MiB", v)
			}
		},
	}, {
		name: "failurePolicy Fail",
		set:  []string{"webhook.failurePolicy=Fail"},
		check: func(t *testing.T, r rendered) {
			if p := podWebhook(t, r)["failurePolicy"]; p != "Fail" {
				t.Errorf("pod webhook failurePolicy %v", p)
			}
		},
	}, {
		name: "scheduling",
		set: []string{"nodeSelector.pool=system", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
			"priorityClassName=system-cluster-critical"},
		check: func(t *testing.T, r rendered) {
			spec := podSpec(t, r)
			if spec["nodeSelector"].(map[string]any)["pool"] != "system" {
				t.Errorf("nodeSelector %v", spec["nodeSelector"])
			}
			if spec["tolerations"].([]any)[0].(map[string]any)["key"] != "dedicated" {
				t.Errorf("tolerations %v", spec["tolerations"])
			}
			aff := spec["affinity"].(map[string]any)
			if aff["nodeAffinity"] == nil || aff["podAntiAffinity"] != nil {
				t.Errorf("affinity %v, want the value's (replacing the default)", aff)
			}
			if spec["priorityClassName"] != "system-cluster-critical" {
				t.Errorf("priorityClassName %v", spec["priorityClassName"])
			}
		},
	}, {
		name: "image, pull secrets, pod metadata, replicas, leader election",
		set: []string{"image.repository=registry.example/deckhand", "image.tag=v9", "image.pullPolicy=Always",
			"imagePullSecrets[0].name=regcred", "podAnnotations.team=platform", "podLabels.tier=ops", "replicas=3",
			"leaderElection.leaseDuration=30s", "leaderElection.renewDeadline=20s", "leaderElection.retryPeriod=2s",
			"leaderElection.warmStandby=false"},
		check: func(t *testing.T, r rendered) {
			c := manager(t, r, ns)
			if c["image"] != "registry.example/deckhand:v9" || c["imagePullPolicy"] != "Always" {
				t.Errorf("image %v pull policy %v", c["image"], c["imagePullPolicy"])
			}
			spec := podSpec(t, r)
			if spec["imagePullSecrets"].([]any)[0].(map[string]any)["name"] != "regcred" {
				t.Errorf("imagePullSecrets %v", spec["imagePullSecrets"])
			}
			d := r.get(t, "Deployment/"+ns+"/deckhand-controller-manager")
			if nested(t, d, "spec", "replicas") != int64(3) {
				t.Errorf("replicas %v", nested(t, d, "spec", "replicas"))
			}
			meta := nested(t, d, "spec", "template", "metadata").(map[string]any)
			if meta["annotations"].(map[string]any)["team"] != "platform" || meta["labels"].(map[string]any)["tier"] != "ops" {
				t.Errorf("pod metadata %v", meta)
			}
			wantArgs(t, r, ns, "--leader-elect", "--leader-election-lease-duration=30s", "--leader-election-renew-deadline=20s", "--leader-election-retry-period=2s",
				"--leader-election-warm-standby=false")
		},
	}, {
		name: "Policy mode by default",
		set:  []string{"sidecarSet.injectionMode=Policy"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--sidecarset-injection-mode=Policy")
			podWebhook(t, r) // still served: SidecarSets may choose Webhook mode
			// A Policy default injects by policy: the manager may write them.
			if got := writers(r, "mutatingadmissionpolicies"); !slices.Equal(got, []string{"ClusterRole/deckhand-manager-policy-role"}) {
				t.Errorf("roles writing mutatingadmissionpolicies: %v, want deckhand-manager-policy-role", got)
			}
		},
	}, {
		name: "policy injection",
		set:  []string{"sidecarSet.policyInjection=true"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--sidecarset-policy-injection")
			for _, res := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
				if got := writers(r, res); !slices.Equal(got, []string{"ClusterRole/deckhand-manager-policy-role"}) {
					t.Errorf("roles writing %s: %v, want deckhand-manager-policy-role", res, got)
				}
			}
			subjects := nested(t, r.get(t, "ClusterRoleBinding/deckhand-manager-policy-rolebinding"), "subjects").([]any)
			if subjects[0].(map[string]any)["name"] != "deckhand-controller-manager" {
				t.Errorf("policy role bound to %v", subjects[0])
			}
		},
	}, {
		name: "network and admission policy off",
		set:  []string{"networkPolicy.enabled=false", "admissionPolicy.enabled=false"},
		check: func(t *testing.T, r rendered) {
			for k := range r {
				if strings.HasPrefix(k, "NetworkPolicy/") || strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
					t.Errorf("%s rendered", k)
				}
			}
		},
	}, {
		name: "network policy peers",
		set:  []string{"networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/24", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs"},
		check: func(t *testing.T, r rendered) {
			ingress := nested(t, r.get(t, "NetworkPolicy/"+ns+"/deckhand-controller-manager"), "spec", "ingress").([]any)
			webhook := ingress[0].(map[string]any)["from"].([]any)
			if len(webhook) != 1 || webhook[0].(map[string]any)["ipBlock"].(map[string]any)["cidr"] != "10.0.0.0/24" {
				t.Errorf("webhook port open to %v, want only 10.0.0.0/24", webhook)
			}
			metrics := ingress[1].(map[string]any)["from"].([]any)
			if len(metrics) != 1 || metrics[0].(map[string]any)["namespaceSelector"] == nil {
				t.Errorf("metrics port open to %v", metrics)
			}
		},
	}, {
		name: "no pod webhook",
		set:  []string{"sidecarSet.injectionMode=Policy", "sidecarSet.podWebhook=false"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--sidecarset-pod-webhook=false")
			hooks := nested(t, r.get(t, "MutatingWebhookConfiguration/deckhand-mutating-webhook-configuration"), "webhooks").([]any)
			for _, h := range hooks {
				if name := h.(map[string]any)["name"]; name == "msidecarset-pod.apps.deckhand.dev" {
					t.Errorf("the pod webhook is rendered")
				}
			}
			if len(hooks) == 0 {
				t.Errorf("no mutating webhook left; the SidecarSet, PodSet and WebServer defaulters must stay")
			}
		},
	}, {
		name: "SidecarSet pod metadata allowlist",
		set:  []string{"sidecarSet.podMetadataAllowlist[0]=example.com/*", "sidecarSet.podMetadataAllowlist[1]=team.io/owner"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--sidecarset-pod-metadata-allowlist=example.com/*,team.io/owner")
		},
	}, {
		name: "CRDs: templates kept on uninstall",
		check: func(t *testing.T, r rendered) {
			for _, plural := range []string{"sidecarsets", "podsets", "webservers", "restartschedules"} {
				crd := r.get(t, "CustomResourceDefinition/"+plural+".apps.deckhand.dev")
				if p := crd.GetAnnotations()["helm.sh/resource-policy"]; p != "keep" {
					t.Errorf("%s resource-policy %q, want keep", plural, p)
				}
				if l := crd.GetLabels()["app.kubernetes.io/managed-by"]; l != "Helm" {
					t.Errorf("%s managed-by %q: not a template of the release", plural, l)
				}
			}
		},
	}, {
		name: "CRDs not kept",
		set:  []string{"crds.keep=false"},
		check: func(t *testing.T, r rendered) {
			if p, ok := r.get(t, "CustomResourceDefinition/podsets.apps.deckhand.dev").GetAnnotations()["helm.sh/resource-policy"]; ok {
				t.Errorf("resource-policy %q with crds.keep false", p)
			}
		},
	}, {
		name:  "CRDs not installed",
		set:   []string{"crds.install=false"},
		check: noneRendered("CustomResourceDefinition/"),
	}, {
		// A PodDisruptionBudget for one replica would block every drain of
		// its node.
		name:  "one replica: no PodDisruptionBudget",
		set:   []string{"replicas=1"},
		check: noneRendered("PodDisruptionBudget/"),
	}, {
		name: "one replica, PodDisruptionBudget forced",
		set:  []string{"replicas=1", "podDisruptionBudget.force=true"},
		check: func(t *testing.T, r rendered) {
			r.get(t, "PodDisruptionBudget/"+ns+"/deckhand-controller-manager")
		},
	}, {
		name:  "PodDisruptionBudget off",
		set:   []string{"podDisruptionBudget.enabled=false"},
		check: noneRendered("PodDisruptionBudget/"),
	}, {
		name: "extra args and env",
		set:  []string{"extraArgs[0]=--zap-log-level=debug", "extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://proxy:3128"},
		check: func(t *testing.T, r rendered) {
			if a := args(t, r, ns); a[len(a)-1] != "--zap-log-level=debug" {
				t.Errorf("args %v do not end with the extra argument", a)
			}
			if v, _ := env(t, r, ns, "HTTPS_PROXY"); v != "http://proxy:3128" {
				t.Errorf("HTTPS_PROXY %q", v)
			}
		},
	}, {
		name: "webhook timeout, port, namespaceSelector, hostNetwork",
		set: []string{"webhook.timeoutSeconds=7", "webhook.port=10260", "webhook.hostNetwork=true",
			"webhook.namespaceSelector.matchLabels.sidecars=on",
			"webhook.namespaceSelector.matchExpressions[0].key=tier", "webhook.namespaceSelector.matchExpressions[0].operator=Exists"},
		check: func(t *testing.T, r rendered) {
			for _, k := range []string{"MutatingWebhookConfiguration/deckhand-mutating-webhook-configuration", "ValidatingWebhookConfiguration/deckhand-validating-webhook-configuration"} {
				for _, h := range nested(t, r.get(t, k), "webhooks").([]any) {
					if h := h.(map[string]any); h["timeoutSeconds"] != int64(7) {
						t.Errorf("%s timeoutSeconds %v, want 7", h["name"], h["timeoutSeconds"])
					}
				}
			}
			wantArgs(t, r, ns, "--webhook-port=10260")
			if p := manager(t, r, ns)["ports"].([]any)[0].(map[string]any); p["containerPort"] != int64(10260) || p["name"] != "webhook-server" {
				t.Errorf("webhook port %v, want webhook-server 10260", p)
			}
			if spec := podSpec(t, r); spec["hostNetwork"] != true || spec["dnsPolicy"] != "ClusterFirstWithHostNet" {
				t.Errorf("hostNetwork %v dnsPolicy %v", spec["hostNetwork"], spec["dnsPolicy"])
			}
			sel := podWebhook(t, r)["namespaceSelector"].(map[string]any)
			if sel["matchLabels"].(map[string]any)["sidecars"] != "on" {
				t.Errorf("pod webhook namespaceSelector %v lacks the value's matchLabels", sel)
			}
			exprs := sel["matchExpressions"].([]any)
			if len(exprs) != 3 || exprs[0].(map[string]any)["operator"] != "NotIn" ||
				exprs[1].(map[string]any)["key"] != "apps.deckhand.dev/sidecarset-injection" || exprs[2].(map[string]any)["key"] != "tier" {
				t.Errorf("pod webhook matchExpressions %v, want the exclusion of kube-system and %s, the opt-out label's, then the value's", exprs, ns)
			}
		},
	}, {
		name: "topology spread, ServiceAccount annotations, security contexts",
		set: []string{"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
			"serviceAccount.annotations.iam\\.example\\.com/role=deckhand",
			"podSecurityContext.runAsUser=65532", "securityContext.readOnlyRootFilesystem=false"},
		check: func(t *testing.T, r rendered) {
			spec := podSpec(t, r)
			if c := spec["topologySpreadConstraints"].([]any)[0].(map[string]any); c["topologyKey"] != "topology.kubernetes.io/zone" {
				t.Errorf("topologySpreadConstraints %v", spec["topologySpreadConstraints"])
			}
			if a := r.get(t, "ServiceAccount/"+ns+"/deckhand-controller-manager").GetAnnotations(); a["iam.example.com/role"] != "deckhand" {
				t.Errorf("ServiceAccount annotations %v", a)
			}
			// An override merges with the defaults, which stay.
			if psc := spec["securityContext"].(map[string]any); psc["runAsUser"] != int64(65532) || psc["runAsNonRoot"] != true {
				t.Errorf("pod securityContext %v", psc)
			}
			if sc := manager(t, r, ns)["securityContext"].(map[string]any); sc["readOnlyRootFilesystem"] != false || sc["allowPrivilegeEscalation"] != false {
				t.Errorf("container securityContext %v", sc)
			}
		},
	}, {
		name: "monitoring labels",
		set: []string{"serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom",
			"prometheusRule.enabled=true", "prometheusRule.labels.role=alert-rules"},
		check: func(t *testing.T, r rendered) {
			if l := r.get(t, "ServiceMonitor/"+ns+"/deckhand-controller-manager").GetLabels(); l["release"] != "prom" || l["app.kubernetes.io/part-of"] != "deckhand" {
				t.Errorf("ServiceMonitor labels %v", l)
			}
			if l := r.get(t, "PrometheusRule/"+ns+"/deckhand").GetLabels(); l["role"] != "alert-rules" || l["release"] != "" {
				t.Errorf("PrometheusRule labels %v", l)
			}
		},
	}, {
		name: "leader election off",
		set:  []string{"leaderElection.enabled=false", "replicas=1"},
		check: func(t *testing.T, r rendered) {
			wantArgs(t, r, ns, "--leader-elect=false")
		},
	}}
	t.Run("no pod webhook without Policy mode is refused", func(t *testing.T) {
		t.Parallel()
		out, err := runHelm(t, "template", "deckhand", chartDir(t), "--set", "sidecarSet.podWebhook=false")
		if err == nil || !strings.Contains(out+err.Error(), "sidecarSet.podWebhook: false needs sidecarSet.injectionMode: Policy") {
			t.Errorf("rendering with sidecarSet.podWebhook=false alone: err %v, output %.200s", err, out)
		}
	})
	t.Run("a value of the wrong type is refused by helm install", func(t *testing.T) {
		t.Parallel()
		out, err := runHelm(t, "install", "deckhand", chartDir(t), "--dry-run=client", "--namespace", ns, "--set", "replicas=two")
		if err == nil || !strings.Contains(out+err.Error(), "at '/replicas': got string, want integer") {
			t.Errorf("helm install with replicas=two: err %v, output %.200s", err, out)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := tc.ns
			if n == "" {
				n = ns
			}
			tc.check(t, render(t, n, tc.set...))
		})
	}
}
