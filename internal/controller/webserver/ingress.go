package webserver

import (
	"context"
	"errors"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

const kindIngress = "Ingress"

// The annotations through which cert-manager's ingress-shim issues the
// certificate of an Ingress.
const (
	certManagerIssuerAnnotation        = "cert-manager.io/issuer"
	certManagerClusterIssuerAnnotation = "cert-manager.io/cluster-issuer"
)

// reconcileIngress keeps the Ingress of spec.ingress, and deletes the one
// the WebServer controls once spec.ingress is removed.
func (r *Reconciler) reconcileIngress(ctx context.Context, s *scope) (ctrl.Result, error) {
	var err error
	switch in := s.ws.Spec.Ingress; {
	case in == nil:
		err = deleteOwned(ctx, r, s, kindIngress, &networkingv1.Ingress{}, ReasonIngressDeleted, "spec.ingress is unset")
	case in.Gateway != nil:
		err = deleteOwned(ctx, r, s, kindIngress, &networkingv1.Ingress{}, ReasonIngressDeleted, "an HTTPRoute to spec.ingress.gateway takes its place")
	default:
		err = reconcileChild(ctx, r, s, kindIngress, &networkingv1.Ingress{}, &networkingv1.Ingress{}, &s.observed.ingress, desiredIngress, nil)
	}
	return ctrl.Result{}, errors.Join(err, r.reconcileRoute(ctx, s))
}

// desiredIngress is the Ingress configuration Deckhand applies: one rule
// for the host and path prefix to the Service's http port, TLS from the
// Secret, and cert-manager's issuer annotation when one is named.
func desiredIngress(ws *deckhandv1alpha1.WebServer) (*networkingv1ac.IngressApplyConfiguration, error) {
	in := ws.Spec.Ingress
	prefix := networkingv1.PathTypePrefix
	spec := networkingv1ac.IngressSpec().WithRules(networkingv1ac.IngressRule().
		WithHost(in.Host).
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().WithPaths(networkingv1ac.HTTPIngressPath().
			WithPath(ingressPath(in)).
			WithPathType(prefix).
			WithBackend(networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
				WithName(ws.Name).
				WithPort(networkingv1ac.ServiceBackendPort().WithName(deckhandv1alpha1.WebServerPortName)))))))
	if in.ClassName != nil {
		spec.WithIngressClassName(*in.ClassName)
	}
	annotations := map[string]string{}
	if tls := in.TLS; tls != nil {
		spec.WithTLS(networkingv1ac.IngressTLS().WithHosts(in.Host).WithSecretName(tls.SecretName))
		switch {
		case tls.Issuer != "":
			annotations[certManagerIssuerAnnotation] = tls.Issuer
		case tls.ClusterIssuer != "":
			annotations[certManagerClusterIssuerAnnotation] = tls.ClusterIssuer
		}
	}
	ing := networkingv1ac.Ingress(ws.Name, ws.Namespace).
		WithLabels(objectLabels(ws.Name)).
		WithOwnerReferences(ownerReference(ws)).
		WithSpec(spec)
	h, err := hashOf(ing)
	if err != nil {
		return nil, fmt.Errorf("hashing the %s: %w", kindIngress, err)
	}
	annotations[deckhandv1alpha1.WebServerAppliedHashAnnotation] = h
	return ing.WithAnnotations(annotations), nil
}

func ingressPath(in *deckhandv1alpha1.WebServerIngress) string {
	if in.Path == "" { // the CRD defaults it; only unit tests see ""
		return "/"
	}
	return in.Path
}

// ExternalURL is the address of a WebServer's Ingress.
func ExternalURL(ws *deckhandv1alpha1.WebServer) string {
	scheme := "http"
	if ws.Spec.Ingress.TLS != nil {
		scheme = "https"
	}
	return externalURL(ws, scheme)
}

func externalURL(ws *deckhandv1alpha1.WebServer, scheme string) string {
	return scheme + "://" + ws.Spec.Ingress.Host + ingressPath(ws.Spec.Ingress)
}
