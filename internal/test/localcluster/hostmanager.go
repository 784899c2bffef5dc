package localcluster

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Names of the webhook configurations an installation of Deckhand creates
// (dist/install.yaml, the Helm chart).
const (
	MutatingWebhookConfiguration   = "deckhand-mutating-webhook-configuration"
	ValidatingWebhookConfiguration = "deckhand-validating-webhook-configuration"
)

// PointWebhooksAt replaces the Service reference of every webhook in
// Deckhand's two installed webhook configurations by base+path, so that a
// manager run on this host serves them (nothing here routes to a Service).
// Their caBundle is left as it is.
func (c *Cluster) PointWebhooksAt(ctx context.Context, base, fieldManager string) error {
	api := c.clientset.AdmissionregistrationV1()
	m, err := api.MutatingWebhookConfigurations().Get(ctx, MutatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return err
	}
	v, err := api.ValidatingWebhookConfigurations().Get(ctx, ValidatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i := range m.Webhooks {
		if err := pointAt(base, m.Webhooks[i].Name, &m.Webhooks[i].ClientConfig); err != nil {
			return err
		}
	}
	for i := range v.Webhooks {
		if err := pointAt(base, v.Webhooks[i].Name, &v.Webhooks[i].ClientConfig); err != nil {
			return err
		}
	}
	if _, err := api.MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return err
	}
	_, err = api.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

// pointAt makes the webhook's client config call base+path instead of its
// Service.
func pointAt(base, webhook string, cc *admissionregistrationv1.WebhookClientConfig) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("webhook %s has no Service path", webhook)
	}
	cc.URL, cc.Service = ptr.To(base+*cc.Service.Path), nil
	return nil
}

// WriteServiceAccountKubeconfig asks the TokenRequest API for a token of
// the ServiceAccount namespace/name, valid for validity, and writes a
// kubeconfig with it to path: a client (a manager on this host) then acts
// with exactly that ServiceAccount's permissions. It returns the user name.
func (c *Cluster) WriteServiceAccountKubeconfig(ctx context.Context, path, namespace, name string, validity time.Duration) (string, error) {
	tok, err := c.clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(validity / time.Second))}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	return user, c.WriteKubeconfig(path, user, tok.Status.Token)
}
