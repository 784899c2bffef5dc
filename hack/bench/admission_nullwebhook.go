package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// nullWebhook is the smallest possible pod mutating webhook (it reads the
// request's uid and admits without a patch): what calling any webhook costs
// the control plane, separate from what Deckhand's handler adds.
type nullWebhook struct {
	srv    *http.Server
	url    string
	calls  atomic.Int64
	inject atomic.Bool // answer with a JSON patch adding sidecarContainer
	// namespaces and objectLabel, if set, are the only namespaces and the
	// pod label (key, any value) whose pods it is called for.
	namespaces  []string
	objectLabel string
}

const nullWebhookName = "bench-null-webhook"

func startNullWebhook(certDir string) (*nullWebhook, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	n := &nullWebhook{url: "https://" + ln.Addr().String() + "/null"}
	sc, err := json.Marshal(sidecarContainer())
	if err != nil {
		return nil, err
	}
	patch := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, `[{"op":"add","path":"/spec/containers/-","value":%s}]`, sc))
	n.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.calls.Add(1)
		var review struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if n.inject.Load() {
			fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true,"patchType":"JSONPatch","patch":%q}}`, review.Request.UID, patch)
			return
		}
		fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, review.Request.UID)
	})}
	go func() { _ = n.srv.Serve(ln) }()
	return n, nil
}

// install creates (on) or deletes (off) the null webhook's configuration.
func (n *nullWebhook) install(ctx context.Context, e *env, on bool) error {
	api := e.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := api.Delete(ctx, nullWebhookName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if !on {
		return nil
	}
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: nullWebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "null.bench.deckhand.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(n.url), CABundle: e.hooks.CABundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	if len(n.namespaces) > 0 {
		cfg.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: n.namespaces,
		}}}
	}
	if n.objectLabel != "" {
		cfg.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: n.objectLabel, Operator: metav1.LabelSelectorOpExists,
		}}}
	}
	_, err := api.Create(ctx, cfg, metav1.CreateOptions{})
	return err
}
