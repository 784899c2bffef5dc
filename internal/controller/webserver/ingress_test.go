package webserver_test

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// spec.ingress gives a WebServer an Ingress to its Service, TLS from a
// Secret or cert-manager, and its external URL in status; removing it
// deletes the Ingress and the URL is the in-cluster one again.
func TestIngress(t *testing.T) {
	ws, ns := createWebServer(t, "shop", ptr.To[int32](1))
	update(t, ns, "shop", func(ws *deckhandv1alpha1.WebServer) {
		ws.Spec.Ingress = &deckhandv1alpha1.WebServerIngress{Host: "shop.example.com", Path: "/store", ClassName: ptr.To("public"),
			TLS: &deckhandv1alpha1.WebServerTLS{SecretName: "shop-tls", ClusterIssuer: "letsencrypt"}}
	})
	waitWebServer(t, ns, "shop", "the external URL", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.URL == "https://shop.example.com/store"
	})
	ing := &networkingv1.Ingress{}
	if err := env.Client.Get(ctx(t), key(ns, "shop"), ing); err != nil {
		t.Fatal(err)
	}
	rule := ing.Spec.Rules[0]
	backend := rule.HTTP.Paths[0].Backend.Service
	if rule.Host != "shop.example.com" || rule.HTTP.Paths[0].Path != "/store" || *rule.HTTP.Paths[0].PathType != networkingv1.PathTypePrefix ||
		backend.Name != "shop" || backend.Port.Name != "http" || *ing.Spec.IngressClassName != "public" ||
		len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "shop-tls" || ing.Spec.TLS[0].Hosts[0] != "shop.example.com" ||
		ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" || ing.OwnerReferences[0].UID != ws.UID {
		t.Errorf("Ingress %+v, annotations %v", ing.Spec, ing.Annotations)
	}
	// A hand edit of what Deckhand owns is undone, as on the Deployment.
	editByHand(t, ing, `{"spec":{"rules":[{"host":"evil.example.com"}],"tls":null}}`)
	waitFor(t, "Ingress", ns, "shop", "the rule and TLS restored after a hand edit", func(i *networkingv1.Ingress) bool {
		r := i.Spec.Rules
		return len(r) == 1 && r[0].Host == "shop.example.com" && r[0].HTTP != nil && len(i.Spec.TLS) == 1 && i.Spec.TLS[0].SecretName == "shop-tls"
	})

	update(t, ns, "shop", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Ingress = nil })
	waitWebServer(t, ns, "shop", "the in-cluster URL again", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.URL == "http://shop."+ns+".svc:80"
	})
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key(ns, "shop"), &networkingv1.Ingress{})
		return apierrors.IsNotFound(err), client404(err)
	}, "the Ingress deleted")

	// What the schema refuses, naming the field.
	for field, ingress := range map[string]*deckhandv1alpha1.WebServerIngress{
		"spec.ingress.host":           {Host: "Shop.Example.com"},
		"spec.ingress.path":           {Host: "shop.example.com", Path: "store"},
		"spec.ingress.tls":            {Host: "shop.example.com", TLS: &deckhandv1alpha1.WebServerTLS{SecretName: "t", Issuer: "a", ClusterIssuer: "b"}},
		"spec.ingress.tls.secretName": {Host: "shop.example.com", TLS: &deckhandv1alpha1.WebServerTLS{}},
	} {
		w := newWebServer(ns, "bad", nil)
		w.Spec.Ingress = ingress
		if err := env.Client.Create(ctx(t), w); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want a refusal naming it", field, err)
		}
	}
}

// client404 passes every error but NotFound.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
