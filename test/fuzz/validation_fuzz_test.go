package fuzz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/deckhand-dev/deckhand/internal/localcluster"
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
	root, err := localcluster.RepoRoot()
	if err != nil {
		f.Fatal(err)
	}
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
	_ = validate(once, twice)
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
