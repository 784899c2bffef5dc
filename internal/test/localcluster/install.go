package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// InstallCRDs creates or updates every CustomResourceDefinition in dir and
// waits until the API server serves them.
func InstallCRDs(cfg *rest.Config, dir string) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	return err
}

// LocalWebhooks are the webhook configurations of a manager that runs on
// this host rather than behind a Service.
type LocalWebhooks struct {
	// ManifestPath is the generated webhook manifest (config/webhook/manifests.yaml).
	ManifestPath string
	// URL is the webhook server's base URL, e.g. https://127.0.0.1:9443.
	URL string
	// CABundle is the PEM CA the API server uses to verify the webhook server.
	CABundle []byte
	// Serves, if set, keeps only the webhooks whose path it returns true for,
	// so that a manager running a subset of Deckhand never has the API server
	// calling paths it does not serve.
	Serves func(path string) bool
}

// Install rewrites every webhook's clientConfig from a Service reference to
// URL+path with CABundle, keeps pod webhooks out of podutil.ProtectedNamespaces, and
// creates or replaces the configurations.
func (w LocalWebhooks) Install(ctx context.Context, cs kubernetes.Interface) error {
	mutating, validating, err := w.Render()
	if err != nil {
		return err
	}
	if err := replaceEach(ctx, cs.AdmissionregistrationV1().MutatingWebhookConfigurations(), "MutatingWebhookConfiguration", mutating); err != nil {
		return err
	}
	return replaceEach(ctx, cs.AdmissionregistrationV1().ValidatingWebhookConfigurations(), "ValidatingWebhookConfiguration", validating)
}

// replacer is the part of a typed client-go API that replaceEach uses.
type replacer[T any] interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// replaceEach deletes each of objs of kind if it exists and creates it anew.
func replaceEach[T metav1.Object](ctx context.Context, api replacer[T], kind string, objs []T) error {
	for _, o := range objs {
		if err := api.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := api.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s: %w", kind, o.GetName(), err)
		}
	}
	return nil
}

// Render returns the rewritten configurations without installing them.
func (w LocalWebhooks) Render() ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(w.ManifestPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	err = EachDocument(data, func(doc []byte) error {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if kept, err := decodeServed(w, doc, cfg, &cfg.Webhooks, mutatingParts); err != nil || !kept {
				return err
			}
			mutating = append(mutating, cfg)
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if kept, err := decodeServed(w, doc, cfg, &cfg.Webhooks, validatingParts); err != nil || !kept {
				return err
			}
			validating = append(validating, cfg)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return mutating, validating, nil
}

// webhookParts are the fields rewrite needs of a mutating or validating webhook.
type webhookParts struct {
	clientConfig *admissionregistrationv1.WebhookClientConfig
	rules        []admissionregistrationv1.RuleWithOperations
	nsSelector   **metav1.LabelSelector
}

func mutatingParts(h *admissionregistrationv1.MutatingWebhook) webhookParts {
	return webhookParts{&h.ClientConfig, h.Rules, &h.NamespaceSelector}
}

func validatingParts(h *admissionregistrationv1.ValidatingWebhook) webhookParts {
	return webhookParts{&h.ClientConfig, h.Rules, &h.NamespaceSelector}
}

// decodeServed decodes the webhook configuration doc into cfg, whose
// webhooks are *hooks, keeps those the local server serves (rewritten for
// it) and reports whether any is left.
func decodeServed[H any](w LocalWebhooks, doc []byte, cfg any, hooks *[]H, parts func(*H) webhookParts) (bool, error) {
	if err := yaml.UnmarshalStrict(doc, cfg); err != nil {
		return false, err
	}
	*hooks = keepServed(w, *hooks, parts)
	return len(*hooks) > 0, nil
}

// keepServed rewrites every webhook of hooks for the local server and keeps
// those it serves.
func keepServed[H any](w LocalWebhooks, hooks []H, parts func(*H) webhookParts) []H {
	kept := hooks[:0]
	for i := range hooks {
		if w.rewrite(parts(&hooks[i])) {
			kept = append(kept, hooks[i])
		}
	}
	return kept
}

// rewrite points the webhook at the local server and reports whether it is served.
func (w LocalWebhooks) rewrite(p webhookParts) bool {
	cc, rules, nsSel := p.clientConfig, p.rules, p.nsSelector
	path := "/"
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	if w.Serves != nil && !w.Serves(path) {
		return false
	}
	url := strings.TrimRight(w.URL, "/") + path
	cc.Service = nil
	cc.URL = &url
	cc.CABundle = w.CABundle
	if *nsSel == nil && coversPods(rules) {
		*nsSel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: slices.Clone(podutil.ProtectedNamespaces),
		}, podutil.SidecarSetOptOut()}}
	}
	return true
}

func coversPods(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		for _, res := range r.Resources {
			if res == "pods" || res == "*" {
				return true
			}
		}
	}
	return false
}

// ApplyManifests creates every object of the YAML files in paths (files or
// directories, in name order) with server-side apply as fieldManager.
func ApplyManifests(ctx context.Context, cfg *rest.Config, fieldManager string, paths ...string) error {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			// kustomization.yaml describes the directory; it is no object.
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) && !strings.HasPrefix(e.Name(), "kustomization.") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	sort.Strings(files)
	applier, err := newApplier(cfg, fieldManager)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := applier.applyFile(ctx, f); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}
