package reliability

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Metrics authentication and authorization (anonymous refused, a token
// without the metrics-reader role refused, with it allowed) are tested in
// test/e2e (TestMetricsEndpointAuth), with the manager's real RBAC.

func dialTLS(port int, cfg *tls.Config) (*tls.Conn, error) {
	cfg.InsecureSkipVerify = true //nolint:gosec // protocol negotiation is what is tested
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg)
}

// TestTLSMinimumAndHTTP2: the webhook and metrics servers refuse TLS 1.1.
// By default the webhook server offers HTTP/2 (a stopping replica sends
// GOAWAY, so that no call is lost on a connection it closes) and HTTP/1.1,
// and the metrics server HTTP/1.1 only.
func TestTLSMinimumAndHTTP2(t *testing.T) {
	ensureDeckhand(t)
	for name, port := range map[string]int{"webhook": suite.port, "metrics": suite.deckhand.MetricsPort} {
		wantH2 := name == "webhook"
		// The metrics server may start a moment after /readyz answers.
		if err := localcluster.WaitTLS(testutil.Context(t, time.Minute), port, time.Minute); err != nil {
			t.Fatalf("%s server not serving TLS on %d: %v", name, port, err)
		}
		if c, err := dialTLS(port, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
			c.Close()
			t.Errorf("%s server accepted a TLS 1.1 handshake", name)
		}
		c, err := dialTLS(port, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Errorf("%s server refused TLS 1.2: %v", name, err)
			continue
		}
		if got := c.ConnectionState().NegotiatedProtocol == "h2"; got != wantH2 {
			t.Errorf("%s server negotiated %q with a client offering h2 and http/1.1, want HTTP/2 %t", name, c.ConnectionState().NegotiatedProtocol, wantH2)
		}
		c.Close()
		c, err = dialTLS(port, &tls.Config{NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Errorf("%s server refused an HTTP/1.1-only client: %v", name, err)
			continue
		}
		if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("%s server negotiated %q with an HTTP/1.1-only client", name, p)
		}
		c.Close()
	}
}

// TestInjectionGrantsNoPrivilege: a pod injected by a SidecarSet gains
// nothing the SidecarSet did not state. The sidecar's securityContext is
// exactly the SidecarSet's, the app containers and the pod-level settings
// (securityContext, service account, host namespaces) are exactly what the
// API server makes of the same pod without injection, but for one readiness
// gate (the in-place update gate).
func TestInjectionGrantsNoPrivilege(t *testing.T) {
	ensureDeckhand(t)
	ns := namespace(t)
	labels := map[string]string{"app": "privilege"}
	sidecarSC := &corev1.SecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534), ReadOnlyRootFilesystem: ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "privilege-" + ns},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace: ns, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Containers: []deckhandv1alpha1.SidecarContainer{
				{Container: corev1.Container{Name: "hardened", Image: "sidecar:1", SecurityContext: sidecarSC}},
				{Container: corev1.Container{Name: "plain", Image: "sidecar:1"}},
			},
			// The uninjected pod compared against opts out.
			InjectionStrategy: deckhandv1alpha1.SidecarSetInjectionStrategy{AllowOptOut: true},
		},
	}
	retry(t, time.Minute, "creating the SidecarSet", func(ctx context.Context) error { return suite.client.Create(ctx, s) })
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), s) })

	pod := func(name string, skip bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{
				SecurityContext:              &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)},
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "app", Image: "app:1",
					SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001), AllowPrivilegeEscalation: ptr.To(false)}}},
			},
		}
		if skip {
			p.Annotations = map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"}
		}
		return p
	}
	var injected *corev1.Pod
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		injected = pod("injected", false)
		if err := suite.client.Create(ctx, injected, client.DryRunAll); err != nil {
			return false, err
		}
		return len(injected.Spec.Containers) == 3, nil
	}, "the pod webhook injects the two sidecars")
	injected = pod("injected", false)
	if err := suite.client.Create(testutil.Context(t, time.Minute), injected); err != nil {
		t.Fatal(err)
	}
	plain := pod("plain", true)
	if err := suite.client.Create(testutil.Context(t, time.Minute), plain, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Container{}
	for _, c := range injected.Spec.Containers {
		byName[c.Name] = c
	}
	if got := byName["hardened"].SecurityContext; !apiequality.Semantic.DeepEqual(got, sidecarSC) {
		t.Errorf("the hardened sidecar's securityContext is %+v, the SidecarSet states %+v", got, sidecarSC)
	}
	if got := byName["plain"].SecurityContext; got != nil {
		t.Errorf("the plain sidecar gained a securityContext the SidecarSet does not state: %+v", got)
	}
	if !apiequality.Semantic.DeepEqual(byName["app"], plain.Spec.Containers[0]) {
		t.Errorf("the app container differs from the same pod without injection:\n%+v\n%+v", byName["app"], plain.Spec.Containers[0])
	}
	a, b := injected.Spec.DeepCopy(), plain.Spec.DeepCopy()
	// The one pod-level addition: the in-place update readiness gate, which
	// lets a sidecar restart only once the pod is out of its endpoints.
	if want := append(slices.Clone(b.ReadinessGates), corev1.PodReadinessGate{ConditionType: inplacegate.ConditionType}); !apiequality.Semantic.DeepEqual(a.ReadinessGates, want) {
		t.Errorf("injection set readinessGates %+v, want %+v", a.ReadinessGates, want)
	}
	a.Containers, b.Containers, a.Volumes, b.Volumes = nil, nil, nil, nil
	a.ReadinessGates, b.ReadinessGates = nil, nil
	if !apiequality.Semantic.DeepEqual(a, b) {
		t.Errorf("injection changed pod-level settings:\n%+v\n%+v", a, b)
	}
}
