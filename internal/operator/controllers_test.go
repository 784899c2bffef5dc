package operator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/inject"
)

func TestParseControllers(t *testing.T) {
	const every = "sidecarset,podset,webserver,restartschedule"
	cases := map[string]struct {
		flag    string
		want    string
		wantErr string
	}{
		"all":                {flag: "all", want: every},
		"star":               {flag: "*", want: every},
		"one":                {flag: "restartschedule", want: "restartschedule"},
		"several, any order": {flag: " RestartSchedule, podset ,", want: "podset,restartschedule"},
		"unknown":            {flag: "restartschedule,cronjob", wantErr: `--controllers="restartschedule,cronjob": unknown controller "cronjob"`},
		"empty":              {flag: " , ", wantErr: `names no controller`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseControllers(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseControllers(%q) = %v, %v; want an error containing %q", tc.flag, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Fatalf("ParseControllers(%q) = %q, %v; want %q", tc.flag, got.String(), err, tc.want)
			}
		})
	}
	var unset Controllers
	if unset.String() != every {
		t.Errorf("a nil set runs %q, want every kind", unset.String())
	}
}

// TestControllerKindsCoverTheWebhookManifest pins the webhook paths each
// kind refuses when disabled to the generated webhook configurations: every
// path there belongs to exactly one kind, the pod webhook's to none.
func TestControllerKindsCoverTheWebhookManifest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var cfg struct {
			Webhooks []admissionregistrationv1.MutatingWebhook `json:"webhooks"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			t.Fatal(err)
		}
		for _, h := range cfg.Webhooks {
			if p := *h.ClientConfig.Service.Path; p != inject.PodWebhookPath {
				manifest = append(manifest, p)
			}
		}
	}
	var table []string
	for _, k := range controllerKinds {
		table = append(table, k.paths...)
	}
	slices.Sort(manifest)
	slices.Sort(table)
	if !slices.Equal(manifest, table) {
		t.Errorf("the webhook paths of the kinds are\n%v\nthe webhook configurations have\n%v", table, manifest)
	}
}

func TestDisabledKindRefusesNewObjectsAndSpecChanges(t *testing.T) {
	h := disabledKind{kind: "PodSet", controllers: "restartschedule"}
	obj := func(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
	cases := map[string]struct {
		op       admissionv1.Operation
		old, new string
		allowed  bool
	}{
		"create":             {op: admissionv1.Create, new: `{"spec":{"replicas":1}}`},
		"spec change":        {op: admissionv1.Update, old: `{"spec":{"replicas":1}}`, new: `{"spec":{"replicas":2}}`},
		"label change":       {op: admissionv1.Update, old: `{"metadata":{"labels":{"a":"1"}},"spec":{"replicas":1}}`, new: `{"metadata":{"labels":{"a":"2"}},"spec":{"replicas":1}}`, allowed: true},
		"finalizers removed": {op: admissionv1.Update, old: `{"metadata":{"finalizers":["x"]},"spec":{}}`, new: `{"metadata":{},"spec":{}}`, allowed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: tc.op, Object: obj(tc.new)}}
			if tc.old != "" {
				req.OldObject = obj(tc.old)
			}
			resp := h.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, "--controllers=restartschedule") {
				t.Errorf("the refusal does not name the flag: %q", resp.Result.Message)
			}
		})
	}
}
