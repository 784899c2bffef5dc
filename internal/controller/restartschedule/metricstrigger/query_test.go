package metricstrigger_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// gpuQuery is a query trigger on the simulated DCGM exporter's frame buffer
// in use (MiB) of the pods of namespace ns, through the cluster's
// Prometheus.
func gpuQuery(ns string, above string, sustained time.Duration) *deckhandv1alpha1.RestartQueryTrigger {
	return &deckhandv1alpha1.RestartQueryTrigger{
		Prometheus: deckhandv1alpha1.RestartPrometheusEndpoint{URL: env.Cluster.PrometheusURL},
		Expr:       fmt.Sprintf(`max by (namespace, pod) (%s{namespace=%q})`, localcluster.DCGMFramebufferUsedMetric, ns),
		Above:      resource.MustParse(above), For: &metav1.Duration{Duration: sustained},
	}
}

// A two-pod Deployment, both pods at 1024 MiB of GPU memory; one of them
// then leaks 200 MiB a second. A query trigger on DCGM_FI_DEV_FB_USED above
// 4096 MiB, sustained for 20s, lists the leaking pod as held for 20s,
// evicts it once Prometheus has answered above the threshold for 20s,
// leaves the flat one alone, and records trigger Query and the value in
// history. The query carries a bearer token from a Secret labelled for it.
func TestIntegrationQueryEvictsTheLeakingGPUPod(t *testing.T) {
	t.Parallel()
	leak := startGPULeak(t, 4*time.Minute, "200")
	env.BindSecretReader(leak.ctx, t, leak.ns)
	testutil.Create(leak.ctx, t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: leak.ns, Name: "prometheus-token",
		Labels: map[string]string{deckhandv1alpha1.RestartQueryCredentialsLabel: "true"}}, Data: map[string][]byte{"token": []byte("t0ken")}})
	q := gpuQuery(leak.ns, "4096", 20*time.Second)
	q.Prometheus.BearerTokenSecret = &deckhandv1alpha1.RestartKeyReference{Name: "prometheus-token", Key: "token"}
	rs := leak.schedule(t, "gpu", deckhandv1alpha1.RestartNeedTrigger{Query: q})

	expectLeakEvicted(t, rs, leakEviction{trigger: deckhandv1alpha1.RestartTriggerQuery, leaking: leak.leaking, flat: leak.flat, workload: "Deployment/gpu",
		leakStarted: leak.started, sustained: 20 * time.Second, threshold: "over 4096", above: "4096", timeout: 2 * time.Minute}, leak.watch)
}

// The leaking pod of a GPU leak grows 50 MiB a second from 1024 MiB. A
// query trigger above 12000 MiB for 45s, whose limit (the GPU's memory) is
// 16000 MiB, under a window six hours away: the trend reaches 16000 within
// urgency.predictedLimitWithin, so the pod is evicted now, while its value
// is still under 12000, for a prediction that aims at the limit, not the
// threshold; the flat pod stays.
func TestIntegrationQueryUrgencyAimsAtTheLimit(t *testing.T) {
	t.Parallel()
	leak := startGPULeak(t, 4*time.Minute, "50")
	q := gpuQuery(leak.ns, "12000", 45*time.Second)
	q.Limit = ptr.To(resource.MustParse("16000"))
	rs := leak.predictionSchedule(t, "gpu", deckhandv1alpha1.RestartNeedTrigger{Query: q}, windowIn(6*time.Hour, time.Hour), true)
	expectPredictedEviction(t, rs, leak, deckhandv1alpha1.RestartTriggerQuery, "12000", "16000", true)
}

// A query that gets no usable answer acts on nothing, whatever the
// threshold: the MetricsUnavailable condition says QueryFailed with the
// cause, a Warning Event says the same, and the data-missing metric counts
// it.
func TestIntegrationQueryFailureActsOnNothing(t *testing.T) {
	t.Parallel()
	needEnv(t)
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	token := func(labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-token", Labels: labels}, Data: map[string][]byte{"token": []byte("t0ken")}}
	}
	cases := map[string]struct {
		mutate func(q *deckhandv1alpha1.RestartQueryTrigger)
		cause  string
		secret *corev1.Secret
		// noReader: the namespace does not bind the secret-reader role.
		noReader bool
	}{
		// Deckhand's own role reads no Secret: a namespace opts in by
		// binding the secret-reader role.
		"Secret in a namespace that does not let Deckhand read it": {mutate: func(q *deckhandv1alpha1.RestartQueryTrigger) {
			q.Prometheus.BearerTokenSecret = &deckhandv1alpha1.RestartKeyReference{Name: "prometheus-token", Key: "token"}
		}, cause: "forbidden", secret: token(map[string]string{deckhandv1alpha1.RestartQueryCredentialsLabel: "true"}), noReader: true},
		// A Secret nobody labelled for it is never sent: the schedule's
		// author may not be allowed to read it.
		"Secret not labelled for queries": {func(q *deckhandv1alpha1.RestartQueryTrigger) {
			q.Prometheus.BearerTokenSecret = &deckhandv1alpha1.RestartKeyReference{Name: "prometheus-token", Key: "token"}
		}, "does not carry the label " + deckhandv1alpha1.RestartQueryCredentialsLabel + "=true", token(nil), false},
		"unreachable endpoint": {func(q *deckhandv1alpha1.RestartQueryTrigger) {
			q.Prometheus.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
		}, "connection refused", nil, false},
		"missing Secret": {func(q *deckhandv1alpha1.RestartQueryTrigger) {
			q.Prometheus.BearerTokenSecret = &deckhandv1alpha1.RestartKeyReference{Name: "prometheus-token", Key: "token"}
		}, `reading Secret prometheus-token: secrets "prometheus-token" not found`, nil, false},
		"not a vector": {func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Expr = "1" }, "the answer is a scalar, not a vector", nil, false},
		"query error":  {func(q *deckhandv1alpha1.RestartQueryTrigger) { q.Expr = "rate(" }, "bad_data", nil, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testutil.Context(t, 2*time.Minute)
			ns := env.Namespace(t)
			d := deployment(ns, "gpu", 2, map[string]string{localcluster.SimGPUMemoryUsedAnnotation: "1024"}, nil)
			testutil.Create(ctx, t, env.Client, d)
			old := readyPods(t, d, 2)
			if tc.secret != nil {
				tc.secret.Namespace = ns
				testutil.Create(ctx, t, env.Client, tc.secret)
			}
			if tc.noReader {
				env.ExpectRefused("/api/v1/namespaces/" + ns + "/secrets/")
			} else {
				env.BindSecretReader(ctx, t, ns)
			}
			q := gpuQuery(ns, "0", 0)
			tc.mutate(q)
			before := dataMissing(t, "QueryFailed")
			rs := podScope(ns, "gpu", "gpu", deckhandv1alpha1.RestartNeedTrigger{Query: q})
			testutil.Create(ctx, t, env.Client, rs)
			got := waitSchedule(t, rs, 60*time.Second, "MetricsUnavailable says QueryFailed", func(got *deckhandv1alpha1.RestartSchedule) bool {
				c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
				return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "QueryFailed" &&
					strings.Contains(c.Message, "spec.triggers[0].query: ") && strings.Contains(c.Message, tc.cause)
			})
			if len(got.Status.Candidates) > 0 || len(got.Status.History) > 0 {
				t.Fatalf("acted without an answer: candidates %+v, history %+v", got.Status.Candidates, got.Status.History)
			}
			testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
				var events corev1.EventList
				if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
					return false, err
				}
				return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
					return e.Reason == "QueryFailed" && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "gpu" &&
						strings.Contains(e.Message, tc.cause)
				}), nil
			}, "a QueryFailed Warning Event")
			if after := dataMissing(t, "QueryFailed"); after <= before {
				t.Errorf("deckhand_restartschedule_trigger_data_missing_total{reason=QueryFailed} %v, was %v: not counted", after, before)
			}
			// Still failing three evaluations (2s apart) later, and nothing
			// evicted.
			got = waitSchedule(t, rs, 30*time.Second, "QueryFailed for 6s", func(cur *deckhandv1alpha1.RestartSchedule) bool {
				c := meta.FindStatusCondition(cur.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
				return c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.Add(6*time.Second).Before(time.Now())
			})
			if len(got.Status.Candidates) > 0 || len(got.Status.History) > 0 {
				t.Fatalf("acted without an answer: candidates %+v, history %+v", got.Status.Candidates, got.Status.History)
			}
			pods := readyPods(t, d, 2)
			for i := range pods {
				if pods[i].UID != old[0].UID && pods[i].UID != old[1].UID {
					t.Fatalf("pod %s replaced although the query failed", pods[i].Name)
				}
			}
		})
	}
}

// dataMissing is the manager's count of trigger data missing for reason.
func dataMissing(t *testing.T, reason string) float64 {
	t.Helper()
	return counterValue(t, "deckhand_restartschedule_trigger_data_missing_total", map[string]string{"reason": reason})
}

// The real API server refuses a wrong query trigger naming the field.
func TestIntegrationQueryValidation(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	query := func(mutate func(q map[string]any)) map[string]any {
		q := map[string]any{"prometheus": map[string]any{"url": "http://prometheus.monitoring:9090"}, "expr": "DCGM_FI_DEV_FB_USED", "above": "20000"}
		mutate(q)
		return map[string]any{
			"target":   map[string]any{"targetRef": map[string]any{"kind": "Deployment", "name": "gpu"}},
			"triggers": []any{map[string]any{"query": q}},
		}
	}
	cases := map[string]struct {
		spec       map[string]any
		field, msg string
	}{
		"expr too long": {query(func(q map[string]any) { q["expr"] = strings.Repeat("x", 4097) }),
			"spec.triggers[0].query.expr", "Too long"},
		"no expr":      {query(func(q map[string]any) { delete(q, "expr") }), "spec.triggers[0].query.expr", "Required value"},
		"no threshold": {query(func(q map[string]any) { delete(q, "above") }), "spec.triggers[0].query.above", "Required value"},
		"no url":       {query(func(q map[string]any) { q["prometheus"] = map[string]any{} }), "spec.triggers[0].query.prometheus.url", "Required value"},
		"url scheme": {query(func(q map[string]any) { q["prometheus"] = map[string]any{"url": "ftp://prometheus:9090"} }),
			"spec.triggers[0].query.prometheus.url", "must be an http or https URL with a host"},
		"url too long": {query(func(q map[string]any) {
			q["prometheus"] = map[string]any{"url": "http://prometheus/" + strings.Repeat("x", 2048)}
		}), "spec.triggers[0].query.prometheus.url", "Too long"},
		"pod label": {query(func(q map[string]any) { q["podLabel"] = "pod-name" }), "spec.triggers[0].query.podLabel", "should match"},
		"for":       {query(func(q map[string]any) { q["for"] = "25h" }), "spec.triggers[0].query.for", "between 0s and 24h"},
		"CA from both": {query(func(q map[string]any) {
			ref := map[string]any{"name": "ca", "key": "ca.crt"}
			q["prometheus"] = map[string]any{"url": "https://prometheus:9090", "caBundle": map[string]any{"secret": ref, "configMap": ref}}
		}), "spec.triggers[0].query.prometheus.caBundle", "exactly one of secret or configMap"},
		"token key": {query(func(q map[string]any) {
			q["prometheus"] = map[string]any{"url": "https://prometheus:9090", "bearerTokenSecret": map[string]any{"name": "token"}}
		}), "spec.triggers[0].query.prometheus.bearerTokenSecret.key", "Required value"},
		"query and podAge": {map[string]any{
			"target": map[string]any{"targetRef": map[string]any{"kind": "Deployment", "name": "gpu"}},
			"triggers": []any{map[string]any{"podAge": map[string]any{"maxAge": "1h"},
				"query": map[string]any{"prometheus": map[string]any{"url": "http://p:9090"}, "expr": "up", "above": "1"}}},
		}, "spec.triggers[0]", "exactly one kind of trigger (podAge, memory, query)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testutil.Context(t, 30*time.Second)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": deckhandv1alpha1.GroupVersion.String(), "kind": "RestartSchedule",
				"metadata": map[string]any{"namespace": ns, "name": "invalid"}, "spec": tc.spec,
			}}
			err := env.Client.Create(ctx, u)
			if err == nil {
				t.Fatalf("accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not name %s (with %q)", err, tc.field, tc.msg)
			}
		})
	}
	// The defaults: the labels DCGM's exporter uses, for 5m.
	ctx := testutil.Context(t, 30*time.Second)
	rs := podScope(ns, "ok", "gpu", deckhandv1alpha1.RestartNeedTrigger{Query: &deckhandv1alpha1.RestartQueryTrigger{
		Prometheus: deckhandv1alpha1.RestartPrometheusEndpoint{URL: "https://prometheus.monitoring:9090"}, Expr: "DCGM_FI_DEV_FB_USED", Above: resource.MustParse("20000")}})
	testutil.Create(ctx, t, env.Client, rs)
	got := &deckhandv1alpha1.RestartSchedule{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
		t.Fatal(err)
	}
	if q := got.Spec.Triggers[0].Query; q.NamespaceLabel != "namespace" || q.PodLabel != "pod" || q.For == nil || q.For.Duration != 5*time.Minute {
		t.Fatalf("query trigger defaults: %+v", q)
	}
	// The sample of config/samples is accepted.
	samples := testutil.ReadFile(t, filepath.Join(testutil.RepoRoot(t), "config", "samples", "apps_v1alpha1_restartschedule.yaml"))
	var sample *deckhandv1alpha1.RestartSchedule
	for _, doc := range strings.Split(samples, "\n---") {
		rs := &deckhandv1alpha1.RestartSchedule{}
		if yaml.Unmarshal([]byte(doc), rs) == nil && rs.Kind == "RestartSchedule" && len(rs.Spec.Triggers) > 0 && rs.Spec.Triggers[0].Query != nil {
			sample = rs
		}
	}
	if sample == nil {
		t.Fatal("no RestartSchedule with a query trigger in config/samples")
	}
	sample.Namespace = ns
	testutil.Create(ctx, t, env.Client, sample)
}

// The query client is bounded: an answer of the real Prometheus larger than
// MaxBytes is refused, and a server that accepts the connection but never
// answers fails the query after Timeout.
func TestIntegrationQueryBounds(t *testing.T) {
	needEnv(t)
	ctx := testutil.Context(t, 30*time.Second)
	q := restartschedule.PrometheusQuery{URL: env.Cluster.PrometheusURL, Expr: `vector(1) or label_replace(vector(2), "pod", "a-long-enough-pod-name", "", "")`}
	if vec, err := (restartschedule.PrometheusQuerier{}).Query(ctx, q); err != nil || len(vec) != 2 {
		t.Fatalf("within the default bounds: %v, %v", vec, err)
	}
	if _, err := (restartschedule.PrometheusQuerier{MaxBytes: 100}).Query(ctx, q); err == nil || !strings.Contains(err.Error(), "the answer is larger than 100 bytes") {
		t.Fatalf("an answer over MaxBytes: %v", err)
	}

	// The kernel completes the connection into the backlog; nothing
	// accepts it or answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	start := time.Now()
	_, err = (restartschedule.PrometheusQuerier{Timeout: time.Second}).Query(ctx, restartschedule.PrometheusQuery{URL: "http://" + silent.Addr().String(), Expr: "up"})
	if elapsed := time.Since(start); err == nil || elapsed > 10*time.Second {
		t.Fatalf("a silent server: %v after %s, want an error after about 1s", err, elapsed)
	}
}
