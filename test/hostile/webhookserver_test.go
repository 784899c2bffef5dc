package hostile

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/internal/webhookserver"
)

// forgedReview is an AdmissionReview such as anything reaching the webhook
// port can send: a create of obj (a resource of gvr, kind gvk) in ns, with
// whatever user it claims.
func forgedReview(t *testing.T, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, ns, name string, obj any) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	rev := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("forged-" + utilrand.String(8)),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
			Namespace: ns,
			Name:      name,
			Operation: admissionv1.Create,
			// Nothing authenticates this: the claim costs nothing.
			UserInfo: authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters"}},
			Object:   runtime.RawExtension{Raw: raw},
		},
	}
	out, err := json.Marshal(rev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reviewResponse decodes the webhook's answer to a review.
func reviewResponse(t *testing.T, code int, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	var rev admissionv1.AdmissionReview
	if code != http.StatusOK || json.Unmarshal(body, &rev) != nil || rev.Response == nil {
		t.Fatalf("answer %d %q, want an AdmissionReview", code, body)
	}
	return rev.Response
}

// webhookPaths are the paths of every webhook config/webhook/manifests.yaml
// installs.
func webhookPaths(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var cfg struct {
			Webhooks []admissionregistrationv1.ValidatingWebhook `json:"webhooks"`
		}
		if err := dec.Decode(&cfg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for _, w := range cfg.Webhooks {
			if w.ClientConfig.Service != nil && w.ClientConfig.Service.Path != nil {
				paths = append(paths, *w.ClientConfig.Service.Path)
			}
		}
	}
	if len(paths) < 4 {
		t.Fatalf("found only the webhook paths %v in config/webhook/manifests.yaml", paths)
	}
	return paths
}

// rawPost sends a POST of size zero bytes to path over a connection of its
// own, announcing the size in Content-Length or, if chunked, streaming it
// without one, and returns the answer's status and start. The body is
// written while the answer is read: a server that answers before the body
// is all sent (and closes) is what is tested, and a client that stopped at
// the first failed write would never see that answer.
func rawPost(t *testing.T, path string, size int64, chunked bool) (int, string) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(suite.WebhookPort)),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the caller is the attacker
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	head := "POST " + path + " HTTP/1.1\r\nHost: deckhand\r\nContent-Type: application/json\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += "Content-Length: " + strconv.FormatInt(size, 10) + "\r\n\r\n"
	}
	go func() {
		chunk := make([]byte, 64<<10)
		if _, err := conn.Write([]byte(head)); err != nil {
			return
		}
		for sent := int64(0); sent < size; sent += int64(len(chunk)) {
			var err error
			if chunked {
				_, err = conn.Write([]byte(strconv.FormatInt(int64(len(chunk)), 16) + "\r\n"))
				if err == nil {
					_, err = conn.Write(append(chunk, '\r', '\n'))
				}
			} else {
				_, err = conn.Write(chunk)
			}
			if err != nil {
				return // the server closed: what it answered is read below
			}
		}
		if chunked {
			_, _ = conn.Write([]byte("0\r\n\r\n"))
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("POST %s of %d bytes (chunked %v): no answer: %v", path, size, chunked, err)
		return 0, ""
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(msg)
}

// TestWebhookServerRefusesOversizedBodies: a 50 MB body is answered 413 on
// every webhook path. Announced by its Content-Length, it is refused before
// any of it is read, and the manager's memory does not move; streamed
// without a length, it is refused once the limit has arrived.
func TestWebhookServerRefusesOversizedBodies(t *testing.T) {
	ensureDeckhand(t)
	const size = 50 << 20
	paths := webhookPaths(t)
	for _, chunked := range []bool{false, true} {
		before := managerRSS(t)
		for _, path := range paths {
			if code, msg := rawPost(t, path, size, chunked); code != http.StatusRequestEntityTooLarge {
				t.Errorf("%s (chunked %v): answered %d %q, want 413", path, chunked, code, msg)
			}
		}
		after := managerRSS(t)
		t.Logf("chunked %v: manager RSS %d MiB before %d requests of 50 MB, %d MiB after", chunked, before>>20, len(paths), after>>20)
		if !chunked && after-before > 10<<20 {
			t.Errorf("the manager's RSS grew by %d MiB", (after-before)>>20)
		}
	}
	// A request of ordinary size is still read and answered.
	code, body, err := postWebhook(t, "/validate-apps-deckhand-dev-v1alpha1-podset", strings.NewReader("{}"), 10*time.Second)
	if err != nil || code != http.StatusOK {
		t.Errorf("a small request: %d %q %v", code, body, err)
	}
}

// TestWebhookServerClosesSlowConnections: a connection that never finishes
// its TLS handshake, or its request headers, is closed once the header
// timeout has passed, not held open.
func TestWebhookServerClosesSlowConnections(t *testing.T) {
	ensureDeckhand(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(suite.WebhookPort))
	bound := webhookserver.ReadHeaderTimeout + 3*time.Second
	// waitClosed waits for the server to close c, at most bound after start.
	waitClosed := func(what string, c net.Conn, start time.Time) {
		t.Helper()
		_ = c.SetReadDeadline(start.Add(bound))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: still open after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		t.Logf("%s: closed by the server after %v (%v)", what, time.Since(start).Round(time.Millisecond), err)
	}

	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rawStart := time.Now()
	_, _ = raw.Write([]byte{0x16, 0x03, 0x01}) // the first bytes of a ClientHello, and no more

	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the caller is the attacker
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	connStart := time.Now()
	if _, err := conn.Write([]byte("POST /validate-apps-deckhand-dev-v1alpha1-podset HTTP/1.1\r\nHost: deckhand\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	waitClosed("a handshake never finished", raw, rawStart)
	waitClosed("headers never finished", conn, connStart)
}

// TestWebhookServerTLSFlags: --tls-min-version and --tls-cipher-suites
// refuse bad values naming the flag, and a manager started with
// --tls-min-version=VersionTLS13 refuses a TLS 1.2 handshake on its webhook
// and metrics ports.
func TestWebhookServerTLSFlags(t *testing.T) {
	ensureDeckhand(t)
	for _, tc := range []struct{ flag, value string }{
		{"--tls-min-version", "VersionTLS11"},
		{"--tls-min-version", "TLS1.2"},
		{"--tls-cipher-suites", "TLS_RSA_WITH_RC4_128_SHA"},
		{"--tls-cipher-suites", "TLS_NONE"},
	} {
		out, err := exec.CommandContext(ctx(t, 30*time.Second), suite.Binary, tc.flag+"="+tc.value).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.flag) || !strings.Contains(string(out), tc.value) {
			t.Errorf("%s=%s: exit %v, output %q; want exit status 2 naming the flag and the value", tc.flag, tc.value, err, out[:min(len(out), 300)])
		}
	}

	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// A second replica: it stands by for leadership and serves webhooks.
	tls13 := suite.StartReplica(t, localcluster.DeckhandOptions{
		WebhookPort: port, Name: "deckhand-tls13", Args: []string{"--tls-min-version=VersionTLS13"},
	})
	// The metrics server may start a moment after /readyz answers.
	if err := localcluster.WaitTLS(ctx(t, time.Minute), tls13.MetricsPort, 30*time.Second); err != nil {
		t.Fatalf("metrics server not serving TLS: %v", err)
	}
	for name, p := range map[string]int{"webhook": port, "metrics": tls13.MetricsPort} {
		dial := func(maxVersion uint16) error {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)),
				&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion}) //nolint:gosec // protocol negotiation is what is tested
			if err == nil {
				c.Close()
			}
			return err
		}
		if err := dial(tls.VersionTLS12); err == nil {
			t.Errorf("%s server: a manager with --tls-min-version=VersionTLS13 accepted a TLS 1.2 handshake", name)
		} else {
			t.Logf("%s server: TLS 1.2 refused: %v", name, err)
		}
		if err := dial(tls.VersionTLS13); err != nil {
			t.Errorf("%s server: TLS 1.3 refused: %v", name, err)
		}
	}
	// The default (VersionTLS12) still accepts TLS 1.2.
	if err := localcluster.WaitTLS(ctx(t, time.Minute), suite.WebhookPort, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(suite.WebhookPort)), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}) //nolint:gosec // protocol negotiation is what is tested
	if err != nil {
		t.Errorf("the default manager refused TLS 1.2: %v", err)
	} else {
		c.Close()
	}
}

// restrictedNamespace is a fresh namespace at the restricted Pod Security
// level with a quota of no pods.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	c := ctx(t, time.Minute)
	ns := testutil.Namespace(t, suite.Client)
	var nsObj corev1.Namespace
	if err := suite.Client.Get(c, client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := suite.Client.Update(c, &nsObj); err != nil {
		t.Fatal(err)
	}
	testutil.Create(c, t, suite.Client, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	})
	return ns
}

// TestPodSetDryRunTellsNothingOfTheNamespace: the PodSet validator's dry run
// of the template answers the same about a namespace with a restrictive
// quota and Pod Security level, one that does not exist and a plain one,
// to a forged review naming any of them; a template the API server finds
// invalid is still refused naming its field. Both for a manager that does
// not know its namespace (the dry run is in "default") and for one in a
// namespace of its own at the restricted level with a quota, as the
// shipped manifests install it (config/manager/manager.yaml).
func TestPodSetDryRunTellsNothingOfTheNamespace(t *testing.T) {
	ensureDeckhand(t)
	plain := testutil.Namespace(t, suite.Client)
	restricted := restrictedNamespace(t)
	missing := "no-such-namespace-" + utilrand.String(6)

	own := restrictedNamespace(t)
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// A second replica: it stands by for leadership and serves webhooks.
	suite.StartReplica(t, localcluster.DeckhandOptions{
		WebhookPort: port, Name: "deckhand-own-namespace", Env: []string{"POD_NAMESPACE=" + own},
	})

	gvk := deckhandv1alpha1.GroupVersion.WithKind("PodSet")
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "podsets"}
	for _, m := range []struct {
		name string
		port int
	}{{"dry run in default", suite.WebhookPort}, {"dry run in its own restricted namespace", port}} {
		answer := func(ns string, container corev1.Container) *admissionv1.AdmissionResponse {
			ps := testutil.PodSet(ns, "web", 1, map[string]string{"app": "web"}, container)
			ps.TypeMeta = metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
			req, err := http.NewRequestWithContext(ctx(t, 30*time.Second), http.MethodPost,
				"https://127.0.0.1:"+strconv.Itoa(m.port)+"/validate-apps-deckhand-dev-v1alpha1-podset", bytes.NewReader(forgedReview(t, gvk, gvr, ns, ps.Name, ps)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := webhookClient(30 * time.Second).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			ar := reviewResponse(t, resp.StatusCode, body)
			ar.UID = ""
			return ar
		}
		privileged := corev1.Container{Name: "app", Image: "registry.example/app:1", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}
		want := answer(plain, privileged)
		// Where the dry-run namespace's own policy refuses the pod, nothing
		// is said: the template passed the API server's field validation.
		if !want.Allowed || len(want.Warnings) > 0 {
			t.Errorf("%s: a valid PodSet in a plain namespace was answered %+v, want allowed without warnings", m.name, want)
		}
		for _, ns := range []string{restricted, missing} {
			got := answer(ns, privileged)
			if !apiequality.Semantic.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("%s: namespace %s: answer %s differs from a plain namespace's %s", m.name, ns, g, w)
			}
		}
		bad := corev1.Container{Name: "Bad_Name", Image: "registry.example/app:1"}
		for _, ns := range []string{plain, restricted, missing} {
			resp := answer(ns, bad)
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "spec.template.spec.containers[0].name") {
				t.Errorf("%s: namespace %s: an invalid container name was answered %+v, want a denial naming spec.template.spec.containers[0].name", m.name, ns, resp)
			}
		}
	}
}
