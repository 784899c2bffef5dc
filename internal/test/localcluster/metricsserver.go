package localcluster

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// metrics-server's identity towards the API server: a static token of a
// user of its own, bound to the roles metrics-server's own manifests grant.
const (
	metricsServerToken = "deckhand-local-metrics-server-token"
	metricsServerUser  = "deckhand-local:metrics-server"
)

// The Service the APIService of metrics.k8s.io points at. The aggregator
// checks metrics-server's certificate against the Service's DNS name.
const (
	metricsServerNamespace = "kube-system"
	metricsServerService   = "metrics-server"
)

// frontProxyClientName is the common name of the client certificate the
// API server's aggregator presents to metrics-server.
const frontProxyClientName = "front-proxy-client"

// aggregationArgs writes the front proxy's CA and client certificate into
// pki and returns the kube-apiserver flags of the aggregation layer: the
// aggregator proxies a request for metrics.k8s.io with that certificate and
// the user in X-Remote-* headers, which metrics-server trusts through the
// CA the API server publishes in kube-system/extension-apiserver-authentication.
func aggregationArgs(pki string) ([]string, error) {
	ca, caKey, err := newCA("deckhand-local-front-proxy-ca", localCertValidity)
	if err != nil {
		return nil, err
	}
	tmpl := certTemplate(2, frontProxyClientName, x509.KeyUsageDigitalSignature, localCertValidity)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	key, cert, err := issue(tmpl, ca, caKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyToPEM(key)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"front-proxy-ca.crt":     certToPEM(ca),
		"front-proxy-client.crt": certToPEM(cert),
		"front-proxy-client.key": keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return []string{
		"--requestheader-client-ca-file", filepath.Join(pki, "front-proxy-ca.crt"),
		"--requestheader-allowed-names", frontProxyClientName,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", filepath.Join(pki, "front-proxy-client.crt"),
		"--proxy-client-key-file", filepath.Join(pki, "front-proxy-client.key"),
	}, nil
}

// metricsServerRole is what metrics-server's own manifests grant it: read
// nodes and pods and their kubelet metrics.
const metricsServerRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: deckhand-local:metrics-server
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
`

// metricsServerGrant binds metrics-server's user to a role, as its own
// manifests bind its service account.
type metricsServerGrant struct {
	name, namespace string // the binding's; no namespace for a ClusterRoleBinding
	roleKind, role  string
}

// metricsServerGrants: its own role, delegating authentication and
// authorization to the API server, and reading the front proxy's CA.
var metricsServerGrants = []metricsServerGrant{
	{name: "deckhand-local:metrics-server", roleKind: "ClusterRole", role: "deckhand-local:metrics-server"},
	{name: "deckhand-local:metrics-server:system:auth-delegator", roleKind: "ClusterRole", role: "system:auth-delegator"},
	{name: "deckhand-local:metrics-server-auth-reader", namespace: "kube-system", roleKind: "Role", role: "extension-apiserver-authentication-reader"},
}

// binding is the ClusterRoleBinding or RoleBinding of g for user.
func (g metricsServerGrant) binding(user string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       g.roleKind + "Binding",
		"metadata":   map[string]any{"name": g.name},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": g.roleKind, "name": g.role},
		"subjects":   []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}}
	obj.SetNamespace(g.namespace)
	return obj
}

// metricsAPIService registers metrics-server with the aggregation layer.
// Endpoints refuse loopback addresses, so the Service is an ExternalName
// one: the aggregator resolves it to localhost and the Service's port.
const metricsAPIService = `apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  type: ExternalName
  externalName: localhost
  ports:
  - name: https
    port: %[3]d
    protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: %[4]s
  service:
    name: %[1]s
    namespace: %[2]s
    port: %[3]d
`

// startMetricsServer starts metrics-server on a free loopback port,
// scraping the fake nodes' kubelet resource metrics that kwok serves, and
// registers it as the APIService v1beta1.metrics.k8s.io; it waits until
// the API server reports the APIService Available.
func (c *Cluster) startMetricsServer(ctx context.Context) error {
	resolution, scrapeTimeout := MetricsServerResolution, 5*time.Second
	if r := c.opts.MetricsResolution; r > resolution {
		// metrics-server bounds a scrape by its resolution too.
		resolution, scrapeTimeout = r, r*8/10
	}
	pki := filepath.Join(c.dir, "pki")
	dir := filepath.Join(pki, "metrics-server")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	serviceDNS := metricsServerService + "." + metricsServerNamespace + ".svc"
	serving, err := newServingCert("metrics-server-ca", "metrics-server", []string{serviceDNS, "localhost"}, localCertValidity)
	if err != nil {
		return err
	}
	if err := serving.WriteFiles(dir); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.APIServerURL, c.CAPEM, metricsServerUser, metricsServerToken); err != nil {
		return err
	}
	a, err := newApplier(c.Config, "deckhand-localcluster")
	if err != nil {
		return err
	}
	if err := a.applyDocuments(ctx, metricsServerRole); err != nil {
		return err
	}
	for _, g := range metricsServerGrants {
		if err := a.applyObject(ctx, g.binding(metricsServerUser)); err != nil {
			return err
		}
	}

	port, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", filepath.Join(dir, "tls.crt"),
		"--tls-private-key-file", filepath.Join(dir, "tls.key"),
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig,
		// kwok serves every fake node's kubelet endpoints on one loopback
		// port, given in the node's status, with the API server's serving
		// certificate (for 127.0.0.1).
		"--kubelet-use-node-status-port",
		"--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-certificate-authority", filepath.Join(pki, "ca.crt"),
		// The shortest metrics-server accepts by default: usage is at most
		// this old.
		"--metric-resolution", resolution.String(),
		"--kubelet-request-timeout", scrapeTimeout.String(),
		"--v", "1",
	}
	c.MetricsServerURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	c.progress("starting metrics-server on %s", c.MetricsServerURL)
	if err := c.startComponent("metrics-server", "metrics-server", args); err != nil {
		return err
	}
	caBundle := base64.StdEncoding.EncodeToString(serving.CAPEM)
	if err := a.applyDocuments(ctx, fmt.Sprintf(metricsAPIService, metricsServerService, metricsServerNamespace, port, caBundle)); err != nil {
		return err
	}
	return c.waitAPIServiceAvailable(ctx, "v1beta1.metrics.k8s.io", 90*time.Second)
}

// MetricsServerResolution is how often metrics-server scrapes the fake
// nodes, the shortest period it accepts: a PodMetrics is at most this old,
// and a new pod has one after two scrapes (a CPU rate needs two points).
const MetricsServerResolution = 10 * time.Second

// waitAPIServiceAvailable waits until the aggregator has reached the
// APIService's server and reports it Available.
func (c *Cluster) waitAPIServiceAvailable(ctx context.Context, name string, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive("metrics-server", "kube-apiserver"); err != nil {
			return false, err
		}
		obj, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available: %w (last: %s)", name, err, last)
	}
	return nil
}

// applyDocuments server-side applies the YAML documents of data.
func (a *applier) applyDocuments(ctx context.Context, data string) error {
	return eachObject([]byte(data), func(obj *unstructured.Unstructured) error { return a.applyObject(ctx, obj) })
}
