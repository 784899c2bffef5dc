package webserver_test

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// spec.ingress.gateway attaches a WebServer to a Gateway through an
// HTTPRoute in place of an Ingress; status.url is the external address once
// the Gateway's controller accepts the route (the test plays that
// controller: none runs on the local cluster), https for an HTTPS
// listener; without the gateway the Ingress comes back and the route goes.
func TestGatewayRoute(t *testing.T) {
	ns := env.Namespace(t)
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "public"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: "example",
		Listeners: []gatewayv1.Listener{{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate),
				CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "shop-tls"}}}}},
	}}
	testutil.Create(ctx(t), t, env.Client, gw)
	ws := newWebServer(ns, "shop", ptr.To[int32](1))
	ws.Spec.Ingress = &deckhandv1alpha1.WebServerIngress{Host: "shop.example.com", Path: "/store",
		Gateway: &deckhandv1alpha1.WebServerGatewayReference{Name: "public", SectionName: "https"}}
	testutil.Create(ctx(t), t, env.Client, ws)

	route := &gatewayv1.HTTPRoute{}
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key(ns, "shop"), route)
		return err == nil, client404(err)
	}, "the HTTPRoute")
	rule := route.Spec.Rules[0]
	if p := route.Spec.ParentRefs[0]; string(p.Name) != "public" || p.SectionName == nil || *p.SectionName != "https" ||
		string(route.Spec.Hostnames[0]) != "shop.example.com" || *rule.Matches[0].Path.Value != "/store" ||
		*rule.Matches[0].Path.Type != gatewayv1.PathMatchPathPrefix || string(rule.BackendRefs[0].Name) != "shop" ||
		*rule.BackendRefs[0].Port != 80 || route.OwnerReferences[0].UID != ws.UID {
		t.Errorf("HTTPRoute %+v", route.Spec)
	}
	// A hand edit of what Deckhand owns is undone, as on the Deployment.
	editByHand(t, route, `{"spec":{"hostnames":["evil.example.com"]}}`)
	route = waitFor(t, "HTTPRoute", ns, "shop", "the hostname restored after a hand edit", func(r *gatewayv1.HTTPRoute) bool {
		return len(r.Spec.Hostnames) == 1 && r.Spec.Hostnames[0] == "shop.example.com"
	})
	if err := env.Client.Get(ctx(t), key(ns, "shop"), &networkingv1.Ingress{}); !apierrors.IsNotFound(err) {
		t.Errorf("an Ingress beside the route: %v", err)
	}
	if got := waitWebServer(t, ns, "shop", "the in-cluster URL before the route is accepted", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.ObservedGeneration == ws.Generation
	}); got.Status.URL != "http://shop."+ns+".svc:80" {
		t.Errorf("url %q before the Gateway accepted the route", got.Status.URL)
	}

	// The Gateway's controller accepts the route.
	route.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: route.Spec.ParentRefs[0], ControllerName: "example.com/gateway",
		Conditions: []metav1.Condition{{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(gatewayv1.RouteReasonAccepted), LastTransitionTime: metav1.Now(), ObservedGeneration: route.Generation}}}}
	if err := env.Client.Status().Update(ctx(t), route); err != nil {
		t.Fatal(err)
	}
	waitWebServer(t, ns, "shop", "the external URL of an HTTPS listener", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.URL == "https://shop.example.com/store"
	})

	// Back to an Ingress: the route goes.
	update(t, ns, "shop", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Ingress.Gateway = nil })
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		routeErr := env.Client.Get(ctx, key(ns, "shop"), &gatewayv1.HTTPRoute{})
		ingErr := env.Client.Get(ctx, key(ns, "shop"), &networkingv1.Ingress{})
		return apierrors.IsNotFound(routeErr) && ingErr == nil, client404(ingErr)
	}, "the Ingress back and the route deleted")

	// TLS and the class are the Gateway's.
	bad := newWebServer(ns, "bad", nil)
	bad.Spec.Ingress = &deckhandv1alpha1.WebServerIngress{Host: "bad.example.com", Gateway: &deckhandv1alpha1.WebServerGatewayReference{Name: "public"},
		TLS: &deckhandv1alpha1.WebServerTLS{SecretName: "x"}}
	if err := env.Client.Create(ctx(t), bad); err == nil || !strings.Contains(err.Error(), "spec.ingress") {
		t.Errorf("gateway with tls: %v, want a refusal naming spec.ingress", err)
	}
}
