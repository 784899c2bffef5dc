package fuzz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
	restartschedulewebhook "github.com/deckhand-dev/deckhand/internal/webhook/restartschedule"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
	webserverwebhook "github.com/deckhand-dev/deckhand/internal/webhook/webserver"
)

// fixedNow keeps the RestartSchedule "never fires" check deterministic.
var fixedNow = func() time.Time { return time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC) }

// seedsFor adds the sample of kind from config/samples (as JSON) and the
// given hand-written seeds to f's corpus.
func seedsFor(f *testing.F, kind string, extra ...string) {
	f.Helper()
	for _, s := range extra {
		f.Add([]byte(s))
	}
	root := testutil.RepoRoot(f)
	files, _ := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var meta struct{ Kind string }
			if yaml.Unmarshal([]byte(doc), &meta) != nil || meta.Kind != kind {
				continue
			}
			js, err := utilyaml.ToJSON([]byte(doc))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(js)
		}
	}
}

// crdDefault applies what the API server does to a new object of kind:
// prune unknown fields, then apply the schema's defaults. It returns the
// typed result, or false if the input is not an object of that shape.
func crdDefault[T runtime.Object](s *structuralschema.Structural, in T, out T) bool {
	data, err := json.Marshal(in)
	if err != nil {
		return false
	}
	var u map[string]any
	if err := utiljson.Unmarshal(data, &u); err != nil || u == nil {
		return false
	}
	pruning.Prune(u, s, true)
	structuraldefaulting.Default(u, s)
	data, err = json.Marshal(u)
	if err != nil {
		return false
	}
	return json.Unmarshal(data, out) == nil
}

// outcome is a validation result reduced to what must be deterministic:
// pass or fail, and the set of field errors (order-independent, since some
// validators walk maps).
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return "error: " + err.Error()
	}
	var causes []string
	for _, c := range status.Status().Details.Causes {
		causes = append(causes, fmt.Sprintf("%s %s %s", c.Type, c.Field, c.Message))
	}
	sort.Strings(causes)
	return "invalid: " + strings.Join(causes, " | ")
}

// checkDefaultValidate is the property every kind must have: defaulting
// (CRD schema defaults, then the webhook's own for SidecarSets) is
// idempotent, validation never panics, and a defaulted object passes or
// fails validation the same way every time, as a create and as an update
// to itself.
func checkDefaultValidate[T runtime.Object](t *testing.T, kind string, data []byte, newObj func() T,
	webhookDefault func(T), validate func(old, obj T) error) {
	in := newObj()
	if err := json.Unmarshal(data, in); err != nil {
		return
	}
	s := schemaFor(t, kind)
	once, twice := newObj(), newObj()
	if !crdDefault(s, in, once) {
		return
	}
	if webhookDefault != nil {
		webhookDefault(once)
	}
	if !crdDefault(s, once, twice) {
		t.Fatalf("a defaulted %s no longer encodes", kind)
	}
	if webhookDefault != nil {
		webhookDefault(twice)
	}
	if !apiequality.Semantic.DeepEqual(once, twice) {
		a, _ := json.Marshal(once)
		b, _ := json.Marshal(twice)
		t.Fatalf("defaulting a %s is not idempotent:\nonce  %s\ntwice %s", kind, a, b)
	}
	var zero T
	first := outcome(validate(zero, once))
	for range 2 {
		if again := outcome(validate(zero, once.DeepCopyObject().(T))); again != first {
			t.Fatalf("validating the same %s twice gave different answers:\n%s\n%s", kind, first, again)
		}
	}
	checkUpdateToItself(t, kind, validate(zero, once), validate(once, twice))
	checkSchemaAgrees(t, kind, once, validate(zero, once))
}

// unchangedNotRechecked are the fields each webhook deliberately does not
// judge again when an update leaves them as they were, so that an object
// accepted under older rules can still be edited: a RestartSchedule's
// schedule and time zone (cron parsing and the time zone database can
// change between releases), and a WebServer's name (immutable, and checked
// for the Service it names only on create).
var unchangedNotRechecked = map[string][]string{
	"RestartSchedule": {"spec.schedule", "spec.timeZone"},
	"WebServer":       {"metadata.name"},
}

// checkUpdateToItself: an update that changes nothing is judged as the create
// was, except that the fields in unchangedNotRechecked may pass. Any other
// difference means a rule depends on whether the object is new without
// comparing old and new.
func checkUpdateToItself(t *testing.T, kind string, createErr, updateErr error) {
	create, update := causes(createErr), causes(updateErr)
	for c := range update {
		if !create[c] {
			t.Fatalf("an update of a %s to itself is refused for what its create was not: %s\ncreate: %s", kind, c, outcome(createErr))
		}
	}
	for c := range create {
		if update[c] {
			continue
		}
		if !slices.ContainsFunc(unchangedNotRechecked[kind], func(f string) bool { return strings.Contains(c, " "+f+" ") }) {
			t.Fatalf("an update of a %s to itself passes what its create refused: %s\nupdate: %s", kind, c, outcome(updateErr))
		}
	}
	if (createErr == nil) != (updateErr == nil) && len(create)+len(update) == 0 {
		t.Fatalf("a %s judged as a create and as an update to itself: %s vs %s", kind, outcome(createErr), outcome(updateErr))
	}
}

// causes is the set of "type field message" lines of an Invalid error, or
// the error's text for any other error.
func causes(err error) map[string]bool {
	out := map[string]bool{}
	if err == nil {
		return out
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		out[err.Error()] = true
		return out
	}
	for _, c := range status.Status().Details.Causes {
		out[fmt.Sprintf("%s %s %s", c.Type, c.Field, c.Message)] = true
	}
	return out
}

// sharedRule is a rule both the CRD schema (OpenAPI checks, CEL rules) and
// the validating webhook hold: the schema reports it at or below schema, the
// webhook at or below one of webhook (the same field unless the schema can
// only say it of a parent). With exact, only errors at those very fields
// count: the webhook also judges what lies below, which the schema does not.
type sharedRule struct {
	schema  string
	webhook []string
	exact   bool
}

func sameField(f string) sharedRule { return sharedRule{schema: f, webhook: []string{f}} }

// checkedByBoth are the rules held twice. The copies must not drift: for
// each, the schema and the webhook refuse the same objects. Every other rule
// lives in one place only (each webhook's doc comment says which), so a
// disagreement elsewhere is by design.
var checkedByBoth = map[string][]sharedRule{
	"PodSet": {
		sameField("spec.replicas"), sameField("spec.minReadySeconds"),
		sameField("spec.updateStrategy.maxUnavailable"), sameField("spec.updateStrategy.maxSurge"),
		sameField("spec.updateStrategy.partition"), sameField("spec.template.spec.restartPolicy"),
	},
	"SidecarSet": {
		{schema: "spec.selector", webhook: []string{"spec.selector"}, exact: true}, // not empty
		sameField("spec.updateStrategy.maxUnavailable"),
		sameField("spec.updateStrategy.partition"),
	},
	"WebServer": {
		{schema: "spec.podLabels", webhook: []string{"spec.podLabels[app.kubernetes.io/name]",
			"spec.podLabels[app.kubernetes.io/instance]", "spec.podLabels[app.kubernetes.io/managed-by]"}},
	},
	"RestartSchedule": {
		{schema: "spec.target", webhook: []string{"spec.target"}, exact: true}, // exactly one of targetRef, selector
		sameField("spec.startingDeadlineSeconds"), sameField("spec.maxConcurrent"),
		sameField("spec.rolloutTimeout"), sameField("spec.historyLimit"), sameField("spec.jitter"),
	},
}

// checkSchemaAgrees compares the webhook's verdict on obj with the CRD
// schema's on every field in checkedByBoth.
func checkSchemaAgrees[T runtime.Object](t *testing.T, kind string, obj T, webhookErr error) {
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encoding a defaulted %s: %v", kind, err)
	}
	var u map[string]any
	if err := utiljson.Unmarshal(data, &u); err != nil {
		t.Fatalf("decoding a defaulted %s: %v", kind, err)
	}
	var schemaFields []string
	for _, e := range schemaErrors(t, kind, u, nil) {
		schemaFields = append(schemaFields, e.Field)
	}
	webhookFields := errorFields(webhookErr)
	for _, r := range checkedByBoth[kind] {
		bySchema := refuses(schemaFields, r.schema, r.exact)
		byWebhook := slices.ContainsFunc(r.webhook, func(f string) bool { return refuses(webhookFields, f, r.exact) })
		if bySchema != byWebhook {
			t.Fatalf("the CRD schema and the webhook disagree on %s of this %s: schema refuses %v, webhook refuses %v\nschema:  %v\nwebhook: %s\nobject:  %s",
				r.schema, kind, bySchema, byWebhook, schemaErrors(t, kind, u, nil), outcome(webhookErr), data)
		}
	}
}

// errorFields are the field paths an Invalid error names.
func errorFields(err error) []string {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

// refuses reports whether one of fields is path or, unless exact, lies below
// it (list indexes and map keys included).
func refuses(fields []string, path string, exact bool) bool {
	for _, f := range fields {
		if f == path || (!exact && strings.HasPrefix(f, path) && (f[len(path)] == '.' || f[len(path)] == '[')) {
			return true
		}
	}
	return false
}

// validateWith is the validate argument of checkDefaultValidate for v: a
// create when old is nil, an update otherwise.
func validateWith[T runtime.Object](v admission.Validator[T]) func(old, obj T) error {
	return func(old, obj T) error {
		var none T
		var err error
		if any(old) == any(none) {
			_, err = v.ValidateCreate(context.Background(), obj)
		} else {
			_, err = v.ValidateUpdate(context.Background(), old, obj)
		}
		return err
	}
}

func FuzzSidecarSetDefaultValidate(f *testing.F) {
	seedsFor(f, "SidecarSet",
		`{"metadata":{"name":"logging"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"fluent-bit:3","shareVolumePolicy":{"type":"enabled"}}]}}`,
		`{"metadata":{"name":"mesh"},"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"In","values":["a","b"]}]},"namespace":"prod","initContainers":[{"name":"init","image":"busybox","restartPolicy":"Always","podInjectPolicy":"AfterAppContainer"}],"volumes":[{"name":"cfg","configMap":{"name":"c"}},{"name":"hp","hostPath":{"path":"/var/log"}}],"imagePullSecrets":[{"name":"regcred"}],"updateStrategy":{"maxUnavailable":"10%","partition":3}}}`,
		`{"metadata":{"name":"bad"},"spec":{"selector":{},"containers":[{"name":"","image":"","env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],"resources":{"limits":{"cpu":"1"}},"livenessProbe":{"httpGet":{"port":80}}}],"updateStrategy":{"type":"Nope","maxUnavailable":"150%","selector":{"matchLabels":{"x":"y"}},"partition":1}}}`,
		`{"spec":{"containers":[{"name":"a","image":"x","transferEnv":[{"sourceContainerName":"app","envName":"TZ"}],"lifecycle":{"preStop":{"httpGet":{"port":"http"}}}}]}}`,
	)
	v := &sidecarsetwebhook.Validator{}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDefaultValidate(t, "SidecarSet", data,
			func() *deckhandv1alpha1.SidecarSet { return &deckhandv1alpha1.SidecarSet{} },
			sidecarsetwebhook.SetDefaults,
			validateWith[*deckhandv1alpha1.SidecarSet](webhookutil.CreateOrUpdate[*deckhandv1alpha1.SidecarSet](v.Validate)))
	})
}

func FuzzPodSetDefaultValidate(f *testing.F) {
	seedsFor(f, "PodSet",
		`{"metadata":{"name":"web","namespace":"ns"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`,
		`{"metadata":{"name":"w"},"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"Exists"}]},"template":{"metadata":{"labels":{"app":"x"}},"spec":{"restartPolicy":"Never","activeDeadlineSeconds":5,"containers":[]}},"updateStrategy":{"type":"OnDelete","maxUnavailable":0,"maxSurge":"0%","partition":-1}}}`,
		`{"spec":{"replicas":-1,"minReadySeconds":-5,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"db"}}},"updateStrategy":{"maxUnavailable":"101%","maxSurge":"abc"}}}`,
	)
	v := &podsetwebhook.Validator{}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDefaultValidate(t, "PodSet", data,
			func() *deckhandv1alpha1.PodSet { return &deckhandv1alpha1.PodSet{} },
			nil,
			validateWith[*deckhandv1alpha1.PodSet](webhookutil.CreateOrUpdate[*deckhandv1alpha1.PodSet](v.Validate)))
	})
}

func FuzzWebServerDefaultValidate(f *testing.F) {
	seedsFor(f, "WebServer",
		`{"metadata":{"name":"site","namespace":"ns"},"spec":{"image":"nginx:1.27","replicas":2,"env":[{"name":"A","value":"1"}],"resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"1"}},"readinessProbe":{"httpGet":{"path":"/","port":"http"}}}}`,
		`{"metadata":{"name":"9bad"},"spec":{"image":"Nginx","port":70000,"env":[{"name":"","value":"x","valueFrom":{}},{"name":"A=B"}],"resources":{"requests":{"cpu":"2","memory":"-1"},"limits":{"cpu":"1"}},"podLabels":{"app.kubernetes.io/name":"x","bad key!":"v"},"podAnnotations":{"":""},"readinessProbe":{"exec":{},"tcpSocket":{"port":0},"periodSeconds":-1}}}`,
		`{"metadata":{"name":"g"},"spec":{"image":"nginx","readinessProbe":{"grpc":{"port":99999}}}}`,
	)
	v := &webserverwebhook.Validator{}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDefaultValidate(t, "WebServer", data,
			func() *deckhandv1alpha1.WebServer { return &deckhandv1alpha1.WebServer{} },
			nil,
			validateWith[*deckhandv1alpha1.WebServer](v))
	})
}

func FuzzRestartScheduleDefaultValidate(f *testing.F) {
	seedsFor(f, "RestartSchedule",
		`{"metadata":{"name":"nightly"},"spec":{"schedule":"0 3 * * *","timeZone":"Europe/Paris","target":{"targetRef":{"kind":"Deployment","name":"web"}}}}`,
		`{"metadata":{"name":"sel"},"spec":{"schedule":"@every 90m","target":{"selector":{"matchLabels":{"tier":"web"}}},"startingDeadlineSeconds":60,"rolloutTimeout":"5m","concurrencyPolicy":"Replace","maxConcurrent":2}}`,
		`{"metadata":{"name":"bad"},"spec":{"schedule":"0 0 31 2 *","timeZone":"Mars/Olympus","target":{"targetRef":{"kind":"Pod","name":""},"selector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]}},"startingDeadlineSeconds":0,"rolloutTimeout":"-1s","historyLimit":1000,"concurrencyPolicy":"Allow","maxConcurrent":0}}`,
		`{"spec":{"schedule":"CRON_TZ=UTC 0 * * * *","timeZone":"Local","target":{}}}`,
		`{"spec":{"schedule":"@every 0s","target":{"selector":{}}}}`,
	)
	v := &restartschedulewebhook.Validator{Now: fixedNow}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDefaultValidate(t, "RestartSchedule", data,
			func() *deckhandv1alpha1.RestartSchedule { return &deckhandv1alpha1.RestartSchedule{} },
			nil,
			validateWith[*deckhandv1alpha1.RestartSchedule](v))
	})
}
