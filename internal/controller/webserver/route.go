package webserver

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

const kindRoute = "HTTPRoute"

// Routes attach a WebServer to a Gateway of the Gateway API; the Gateway is
// read for its listeners' protocol (the URL's scheme), never written.
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get,roleName=manager-webserver-role

// routeGroupKind is the Gateway API's HTTPRoute.
var routeGroupKind = schema.GroupKind{Group: gatewayv1.GroupName, Kind: kindRoute}

// errNoGatewayAPI says that a WebServer asks for an HTTPRoute where the
// Gateway API is not installed.
var errNoGatewayAPI = errors.New("spec.ingress.gateway needs the Gateway API (gateway.networking.k8s.io/v1 HTTPRoute), which this cluster does not serve")

// gatewayAPIInstalled reports whether the API server serves HTTPRoutes.
func gatewayAPIInstalled(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(routeGroupKind, gatewayv1.GroupVersion.Version)
	return err == nil
}

// reconcileRoute keeps the HTTPRoute of spec.ingress.gateway and deletes
// the one the WebServer controls otherwise.
func (r *Reconciler) reconcileRoute(ctx context.Context, s *scope) error {
	installed := gatewayAPIInstalled(r.Client.RESTMapper())
	in := s.ws.Spec.Ingress
	if in == nil || in.Gateway == nil {
		if !installed {
			return nil
		}
		return deleteOwned(ctx, r, s, kindRoute, &gatewayv1.HTTPRoute{}, ReasonRouteDeleted, "spec.ingress.gateway is unset")
	}
	if !installed {
		return r.applyFailed(s, kindRoute, errNoGatewayAPI)
	}
	if err := reconcileChild(ctx, r, s, kindRoute, &gatewayv1.HTTPRoute{}, &gatewayv1.HTTPRoute{}, &s.observed.route, desiredRoute, nil); err != nil {
		return err
	}
	if s.observed.route != nil && routeAccepted(s.observed.route, s.ws) {
		s.observed.routeScheme = r.gatewayScheme(ctx, s.ws)
	}
	return nil
}

// desiredRoute is the HTTPRoute configuration Deckhand applies: Host and
// the Path prefix to the Service's port, attached to the Gateway.
func desiredRoute(ws *deckhandv1alpha1.WebServer) (*gatewayv1ac.HTTPRouteApplyConfiguration, error) {
	in := ws.Spec.Ingress
	parent := gatewayv1ac.ParentReference().WithName(gatewayv1.ObjectName(in.Gateway.Name))
	if in.Gateway.Namespace != "" {
		parent.WithNamespace(gatewayv1.Namespace(in.Gateway.Namespace))
	}
	if in.Gateway.SectionName != "" {
		parent.WithSectionName(gatewayv1.SectionName(in.Gateway.SectionName))
	}
	route := gatewayv1ac.HTTPRoute(ws.Name, ws.Namespace).
		WithLabels(objectLabels(ws.Name)).
		WithOwnerReferences(ownerReference(ws)).
		WithSpec(gatewayv1ac.HTTPRouteSpec().
			WithParentRefs(parent).
			WithHostnames(gatewayv1.Hostname(in.Host)).
			WithRules(gatewayv1ac.HTTPRouteRule().
				WithMatches(gatewayv1ac.HTTPRouteMatch().WithPath(gatewayv1ac.HTTPPathMatch().
					WithType(gatewayv1.PathMatchPathPrefix).WithValue(ingressPath(in)))).
				WithBackendRefs(gatewayv1ac.HTTPBackendRef().WithName(gatewayv1.ObjectName(ws.Name)).WithPort(port(ws)))))
	h, err := hashOf(route)
	if err != nil {
		return nil, fmt.Errorf("hashing the %s: %w", kindRoute, err)
	}
	return route.WithAnnotations(map[string]string{deckhandv1alpha1.WebServerAppliedHashAnnotation: h}), nil
}

// routeAccepted reports whether a controller of the Gateway the WebServer
// names has accepted the route.
func routeAccepted(route *gatewayv1.HTTPRoute, ws *deckhandv1alpha1.WebServer) bool {
	gw := ws.Spec.Ingress.Gateway
	ns := gw.Namespace
	if ns == "" {
		ns = ws.Namespace
	}
	for _, p := range route.Status.Parents {
		pns := route.Namespace
		if p.ParentRef.Namespace != nil {
			pns = string(*p.ParentRef.Namespace)
		}
		if string(p.ParentRef.Name) == gw.Name && pns == ns &&
			meta.IsStatusConditionTrue(p.Conditions, string(gatewayv1.RouteConditionAccepted)) {
			return true
		}
	}
	return false
}

// gatewayScheme is "https" when the listeners the route attaches to serve
// HTTPS (the one named sectionName, or any), else "http".
func (r *Reconciler) gatewayScheme(ctx context.Context, ws *deckhandv1alpha1.WebServer) string {
	ref := ws.Spec.Ingress.Gateway
	ns := ref.Namespace
	if ns == "" {
		ns = ws.Namespace
	}
	gw := &gatewayv1.Gateway{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, gw); err != nil {
		return "http"
	}
	for _, l := range gw.Spec.Listeners {
		if (ref.SectionName == "" || string(l.Name) == ref.SectionName) && l.Protocol == gatewayv1.HTTPSProtocolType {
			return "https"
		}
	}
	return "http"
}
