package restartschedule

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// ReasonQueryFailed is the MetricsUnavailable reason of a query trigger
// whose query got no usable answer (an unreachable endpoint, an error, an
// answer that is not a vector, a missing Secret or key).
const ReasonQueryFailed = "QueryFailed"

// Bounds of one query.
const (
	// DefaultQueryTimeout bounds one query, the connection included.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultQueryMaxBytes bounds an answer's body: about 40,000 series of
	// one pod each.
	DefaultQueryMaxBytes = 8 << 20
)

// Query triggers read the bearer token and CA bundle they name, in the
// schedule's namespace, straight from the API server (no cache, so no list
// or watch of every Secret): get only. Secrets only where the namespace
// binds the secret-reader role (config/rbac/secret_reader_role.yaml).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,roleName=manager-restartschedule-role

// PrometheusQuery is one instant query of a query trigger, its credentials
// read.
type PrometheusQuery struct {
	// URL is the base address of the Prometheus HTTP API.
	URL string
	// BearerToken, when set, is sent as "Authorization: Bearer".
	BearerToken string
	// CABundle, when set, replaces the system's roots to verify the server.
	CABundle []byte
	// Expr is the PromQL expression.
	Expr string
}

// QuerySource runs the instant queries of query triggers.
type QuerySource interface {
	// Query returns the answer, which must be a vector.
	Query(ctx context.Context, q PrometheusQuery) (model.Vector, error)
}

// PrometheusQuerier is the QuerySource of the Prometheus HTTP API
// (github.com/prometheus/client_golang/api).
type PrometheusQuerier struct {
	// Timeout bounds a query (DefaultQueryTimeout when zero).
	Timeout time.Duration
	// MaxBytes bounds an answer (DefaultQueryMaxBytes when zero).
	MaxBytes int64
}

// Query sends q to its server, over a connection of its own: the queries
// of a schedule are seconds apart and each may have its own CA.
func (p PrometheusQuerier) Query(ctx context.Context, q PrometheusQuery) (model.Vector, error) {
	timeout, maxBytes := cmp.Or(p.Timeout, DefaultQueryTimeout), cmp.Or(p.MaxBytes, DefaultQueryMaxBytes)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = true
	if len(q.CABundle) > 0 {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(q.CABundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	c, err := promapi.NewClient(promapi.Config{Address: q.URL, Client: &http.Client{
		Timeout:   timeout,
		Transport: boundedTransport{next: transport, token: q.BearerToken, maxBytes: maxBytes},
	}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, _, err := promv1.NewAPI(c).Query(ctx, q.Expr, time.Time{}, promv1.WithTimeout(timeout))
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("the answer is a %s, not a vector", v.Type())
	}
	return vec, nil
}

// boundedTransport adds the bearer token and cuts an answer longer than
// maxBytes short with an error.
type boundedTransport struct {
	next     http.RoundTripper
	token    string
	maxBytes int64
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.maxBytes + 1, max: t.maxBytes}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left, max int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	if b.left <= 0 {
		return n, fmt.Errorf("the answer is larger than %d bytes", b.max)
	}
	return n, err
}

// queryAnswer is what one query trigger's query said: each pod's value
// (the largest of its series), or why there is no answer.
type queryAnswer struct {
	values map[string]float64
	failed string
}

// usesQuery reports whether a query trigger is set.
func usesQuery(triggers []deckhandv1alpha1.RestartNeedTrigger) bool {
	for _, t := range triggers {
		if t.Query != nil {
			return true
		}
	}
	return false
}

// readQueries runs the query of each query trigger and keeps, for each, the
// values of the schedule's namespace's pods, and the previous runs of
// values above the thresholds. A query that fails is not an error of the
// reconcile: its trigger acts on nothing, and the MetricsUnavailable
// condition says why.
func (r *Reconciler) readQueries(ctx context.Context, s *scope, in *needInput) {
	if !usesQuery(in.triggers) {
		return
	}
	if in.since == nil {
		in.since = map[string]time.Time{}
	}
	for _, c := range s.rs.Status.Candidates {
		if c.Trigger == deckhandv1alpha1.RestartTriggerQuery && c.Since != nil {
			in.since[sinceKey(c.Pod, "")] = c.Since.Time
		}
	}
	in.queried = map[int]queryAnswer{}
	for i, t := range in.triggers {
		if t.Query == nil {
			continue
		}
		a, err := r.runQuery(ctx, s.rs.Namespace, t.Query)
		if err != nil {
			a = queryAnswer{failed: fmt.Sprintf("spec.triggers[%d].query: %v", i, err)}
		}
		in.queried[i] = a
	}
}

// runQuery reads the trigger's credentials and runs its query.
func (r *Reconciler) runQuery(ctx context.Context, ns string, t *deckhandv1alpha1.RestartQueryTrigger) (queryAnswer, error) {
	if r.Queries == nil || r.APIReader == nil {
		return queryAnswer{}, errors.New("no query client")
	}
	q := PrometheusQuery{URL: t.Prometheus.URL, Expr: t.Expr}
	if ref := t.Prometheus.BearerTokenSecret; ref != nil {
		secret := &corev1.Secret{}
		token, err := r.readKey(ctx, ns, secret, ref)
		if err != nil {
			return queryAnswer{}, err
		}
		if secret.Labels[deckhandv1alpha1.RestartQueryCredentialsLabel] != "true" {
			return queryAnswer{}, fmt.Errorf("the Secret %s does not carry the label %s=true, which lets a query trigger send its key to an endpoint",
				ref.Name, deckhandv1alpha1.RestartQueryCredentialsLabel)
		}
		q.BearerToken = string(token)
	}
	if ca := t.Prometheus.CABundle; ca != nil {
		var err error
		if ca.Secret != nil {
			q.CABundle, err = r.readKey(ctx, ns, &corev1.Secret{}, ca.Secret)
		} else if ca.ConfigMap != nil {
			q.CABundle, err = r.readKey(ctx, ns, &corev1.ConfigMap{}, ca.ConfigMap)
		}
		if err != nil {
			return queryAnswer{}, err
		}
	}
	vec, err := r.Queries.Query(ctx, q)
	if err != nil {
		return queryAnswer{}, err
	}
	nsLabel, podLabel := cmp.Or(t.NamespaceLabel, "namespace"), cmp.Or(t.PodLabel, "pod")
	a := queryAnswer{values: map[string]float64{}}
	for _, sample := range vec {
		v := float64(sample.Value)
		pod := string(sample.Metric[model.LabelName(podLabel)])
		if string(sample.Metric[model.LabelName(nsLabel)]) != ns || pod == "" || math.IsNaN(v) {
			continue
		}
		if old, ok := a.values[pod]; !ok || v > old {
			a.values[pod] = v
		}
	}
	return a, nil
}

// readKey reads one key of a Secret or ConfigMap of namespace ns.
func (r *Reconciler) readKey(ctx context.Context, ns string, obj client.Object, ref *deckhandv1alpha1.RestartKeyReference) ([]byte, error) {
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, obj); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", kind, ref.Name, err)
	}
	var v []byte
	var ok bool
	switch o := obj.(type) {
	case *corev1.Secret:
		v, ok = o.Data[ref.Key]
	case *corev1.ConfigMap:
		var s string
		s, ok = o.Data[ref.Key]
		v = []byte(s)
	}
	if !ok {
		return nil, fmt.Errorf("%s %s has no key %q", kind, ref.Name, ref.Key)
	}
	return v, nil
}

// evaluateQuery judges pod p against the answer of query trigger i. The pod
// is a candidate while its value is above the threshold; it is sustained
// once it has been above in every answer since `for` ago (since, carried
// from the previous status, ends with the first answer at or below it, or
// without the pod). A pod whose prediction names it (predict, aiming at
// limit, or above when unset) is a candidate at once. A failed query
// names no pod.
func evaluateQuery(in needInput, workload string, p *corev1.Pod, i int, q *deckhandv1alpha1.RestartQueryTrigger) (needCandidate, bool) {
	a, ok := in.queried[i]
	if !ok || a.failed != "" {
		return needCandidate{}, false
	}
	v, ok := a.values[p.Name]
	if !ok {
		return needCandidate{}, false
	}
	threshold, limit := q.Above.AsApproximateFloat64(), q.Above
	if q.Limit != nil {
		limit = *q.Limit
	}
	over := v - threshold
	if threshold != 0 {
		over /= math.Abs(threshold)
	}
	c := needCandidate{pod: p, over: over,
		RestartCandidate: deckhandv1alpha1.RestartCandidate{Pod: p.Name, Workload: workload, Trigger: deckhandv1alpha1.RestartTriggerQuery,
			Value: formatValue(v), Limit: formatValue(threshold)}}
	named := predict(in, &c, seriesKey{trigger: i, pod: p.Name}, limit.AsApproximateFloat64(), formatValue(limit.AsApproximateFloat64()))
	switch {
	case named:
		return c, true
	case v <= threshold:
		return needCandidate{}, false
	}
	hold := defaultFor
	if q.For != nil {
		hold = q.For.Duration
	}
	// The answer is dated by this controller's clock, not the server's:
	// a server clock ahead would otherwise date a run of values in the
	// future.
	since, ok := in.since[sinceKey(p.Name, "")]
	if !ok || since.After(in.now) {
		since = in.now
	}
	c.Since, c.sustainedAt, c.holdFor = ptr.To(metav1.NewTime(since)), since.Add(hold), hold
	return c, true
}

// formatValue writes a query's value as a reader compares it with the
// threshold ("20480", "0.93").
func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// queryFailures lists the query triggers that got no answer.
func queryFailures(in needInput) []string {
	var out []string
	for i := range in.triggers {
		if a, ok := in.queried[i]; ok && a.failed != "" {
			out = append(out, a.failed)
		}
	}
	return out
}
