package hostile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// replaceManager stops the suite's manager and starts, in its place (its
// webhook port, which the installed webhook configurations call), one with
// args and plain-HTTP metrics; the suite's manager is back when t ends.
func replaceManager(t *testing.T, name string, args ...string) *localcluster.DeckhandProcess {
	t.Helper()
	ensureDeckhand(t)
	suite.Deckhand.Stop()
	t.Cleanup(func() {
		if !suite.Deckhand.Exited() {
			return
		}
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := suite.Deckhand.Restart(c); err != nil {
			t.Errorf("restarting the suite's manager: %v", err)
		}
	})
	return suite.StartReplica(t, localcluster.DeckhandOptions{
		Name: name, WebhookPort: suite.WebhookPort, Args: append([]string{"--metrics-secure=false"}, args...),
	})
}

// scrape returns the text of a /metrics endpoint: the API server's when
// d is nil, else the manager d's (served over plain HTTP).
func scrape(t *testing.T, d *localcluster.DeckhandProcess) string {
	t.Helper()
	if d == nil {
		raw, err := suite.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx(t, 30*time.Second))
		if err != nil {
			t.Fatalf("scraping the API server: %v", err)
		}
		return string(raw)
	}
	req, err := http.NewRequestWithContext(ctx(t, 30*time.Second), http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(d.MetricsPort)+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping the manager: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// metricSum adds up the samples of metric name whose labels include every
// one of labels (each written as in the exposition: key="value").
func metricSum(text, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		set, value, ok := strings.Cut(rest, "} ")
		if !ok || !containsAll(set, labels) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += v
		}
	}
	return sum
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// podWatches is the number of pod watches the API server serves, its own
// informers' included.
func podWatches(t *testing.T) float64 {
	return metricSum(scrape(t, nil), "apiserver_longrunning_requests", `resource="pods"`, `verb="WATCH"`)
}

// A manager run with --controllers=restartschedule reconciles
// RestartSchedules and admits them through its webhook, serves no pod
// webhook, keeps no pod informer, and refuses the kinds it does not run
// with a message naming the flag, through the webhook configurations of a
// full installation.
func TestRestartScheduleOnlyManager(t *testing.T) {
	d := replaceManager(t, "deckhand-restartschedule-only", "--controllers=restartschedule")
	ns := testutil.Namespace(t, suite.Client)
	c := ctx(t, 3*time.Minute)

	// Its RestartSchedule webhook judges schedules...
	wantInvalid(t, "@every 1s", suite.Client.Create(c, restartSchedule(ns, "fast", "@every 1s")), "spec.schedule")
	// ...and its controller restarts the target of a valid one.
	dep := testutil.Deployment(ns, "web", 1, map[string]string{"app": "web"}, app)
	testutil.Create(c, t, suite.Client, dep)
	rs := restartSchedule(ns, "nightly", "0 3 * * *")
	rs.Annotations = map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "now"}
	testutil.Create(c, t, suite.Client, rs)
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		var got appsv1.Deployment
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(dep), &got)
		return got.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] != "", err
	}, "the RestartSchedule-only manager restarted the Deployment")

	// The kinds it does not run are refused, saying why.
	refused := map[string]client.Object{
		"PodSet":     testutil.PodSet(ns, "ps", 1, map[string]string{"app": "ps"}, app),
		"SidecarSet": injectedSidecarSet(ns, "disabled", corev1.Container{Name: "proxy", Image: "registry.example/proxy:1"}),
		"WebServer": &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: deckhandv1alpha1.WebServerSpec{Image: "registry.example/web:1"}},
	}
	for kind, obj := range refused {
		err := suite.Client.Create(c, obj)
		if err == nil || !strings.Contains(err.Error(), "--controllers=restartschedule") {
			t.Errorf("creating a %s: %v, want a refusal naming --controllers=restartschedule", kind, err)
		}
	}

	// No pod webhook: its path is not served, and a pod is admitted as
	// it is (the pod webhook's failurePolicy is Ignore).
	code, body, err := postWebhook(t, inject.PodWebhookPath, strings.NewReader("{}"), 10*time.Second)
	if err != nil || code != http.StatusNotFound {
		t.Errorf("POST %s: %d %q %v, want 404", inject.PodWebhookPath, code, body, err)
	}
	pod := labelledPod(ns, "bare", "disabled")
	testutil.Create(c, t, suite.Client, pod)
	if len(pod.Spec.Containers) != 1 {
		t.Errorf("the pod was admitted with containers %v, want its own only", pod.Spec.Containers)
	}
	if n := metricSum(scrape(t, d), "controller_runtime_webhook_requests_total", fmt.Sprintf("webhook=%q", inject.PodWebhookPath)); n != 0 {
		t.Errorf("the manager counts %v pod webhook requests, want none", n)
	}

	// No pod informer: a full manager, whose SidecarSet and PodSet
	// controllers share one pod informer, adds a pod watch to those the
	// API server serves to the RestartSchedule-only one. This suite runs no
	// scheduler, controller manager or kubelet to watch pods meanwhile.
	without := podWatches(t)
	d.Stop()
	if err := suite.Deckhand.Restart(ctx(t, 2*time.Minute)); err != nil {
		t.Fatalf("restarting the suite's manager: %v", err)
	}
	testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
		return podWatches(t) > without, nil
	}, "a full manager adds a pod watch to the %v pod watches served with the RestartSchedule-only manager", without)
}
