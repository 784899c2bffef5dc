package webserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// selectorLabels are the per-instance selector of a WebServer's pods. They
// depend on the name only, which never changes, so the Deployment's immutable
// selector never has to change either.
func selectorLabels(name string) map[string]string {
	return map[string]string{
		deckhandv1alpha1.WebServerNameLabel:     deckhandv1alpha1.WebServerNameLabelValue,
		deckhandv1alpha1.WebServerInstanceLabel: name,
	}
}

// objectLabels are the labels of the Deployment, the Service and the pods.
func objectLabels(name string) map[string]string {
	l := selectorLabels(name)
	l[deckhandv1alpha1.ManagedByLabel] = deckhandv1alpha1.ManagedByValue
	return l
}

// URL is the in-cluster address of a WebServer's Service.
func URL(ws *deckhandv1alpha1.WebServer) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", ws.Name, ws.Namespace, port(ws))
}

func port(ws *deckhandv1alpha1.WebServer) int32 {
	if ws.Spec.Port == 0 { // the CRD defaults it; only unit tests see 0
		return 80
	}
	return ws.Spec.Port
}

func ownerReference(ws *deckhandv1alpha1.WebServer) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(deckhandv1alpha1.GroupVersion.String()).
		WithKind("WebServer").
		WithName(ws.Name).
		WithUID(ws.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// desiredDeployment is the Deployment configuration Deckhand applies: exactly
// the fields Deckhand owns. Everything it leaves out (replicas when
// spec.replicas is unset, annotations others add to the pod template,
// defaulted fields) stays with whoever set it.
func desiredDeployment(ws *deckhandv1alpha1.WebServer) (*appsv1ac.DeploymentApplyConfiguration, error) {
	return desiredDeploymentWithConfig(ws, "")
}

// desiredDeploymentWithConfig is desiredDeployment with configHash, the
// hash of the content of spec.configVolumes, in the pod template, so that a
// change of that content rolls the pods.
func desiredDeploymentWithConfig(ws *deckhandv1alpha1.WebServer, configHash string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	podSpec, err := desiredPodSpec(ws)
	if err != nil {
		return nil, err
	}

	podLabels := maps.Clone(ws.Spec.PodLabels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, objectLabels(ws.Name)) // ours win; the CRD forbids overriding them anyway
	template := corev1ac.PodTemplateSpec().
		WithLabels(podLabels).
		WithSpec(podSpec)
	if len(ws.Spec.PodAnnotations) > 0 {
		template.WithAnnotations(ws.Spec.PodAnnotations)
	}
	if configHash != "" {
		template.WithAnnotations(map[string]string{deckhandv1alpha1.WebServerConfigHashAnnotation: configHash})
	}

	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(ws.Name))).
		WithTemplate(template)
	if ws.Spec.Replicas != nil {
		spec.WithReplicas(*ws.Spec.Replicas)
	}

	d := appsv1ac.Deployment(ws.Name, ws.Namespace).
		WithLabels(objectLabels(ws.Name)).
		WithOwnerReferences(ownerReference(ws)).
		WithSpec(spec)
	if ws.Spec.Replicas != nil {
		d.WithAnnotations(map[string]string{deckhandv1alpha1.WebServerOwnsReplicasAnnotation: "true"})
	}
	h, err := hashOf(d)
	if err != nil {
		return nil, err
	}
	d.WithAnnotations(map[string]string{deckhandv1alpha1.WebServerAppliedHashAnnotation: h})
	return d, nil
}

// desiredService is the Service configuration Deckhand applies. It never sets
// clusterIP(s), nodePort or healthCheckNodePort: the API server allocates
// them and they stay as allocated.
func desiredService(ws *deckhandv1alpha1.WebServer) (*corev1ac.ServiceApplyConfiguration, error) {
	svcType := ws.Spec.ServiceType
	if svcType == "" {
		svcType = corev1.ServiceTypeClusterIP
	}
	s := corev1ac.Service(ws.Name, ws.Namespace).
		WithLabels(objectLabels(ws.Name)).
		WithOwnerReferences(ownerReference(ws)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(svcType).
			WithSelector(selectorLabels(ws.Name)).
			WithPorts(corev1ac.ServicePort().
				WithName(deckhandv1alpha1.WebServerPortName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(port(ws)).
				// The named target port follows the container port, so during a
				// port change old and new pods are both reached on their own port.
				WithTargetPort(intstr.FromString(deckhandv1alpha1.WebServerPortName))))
	h, err := hashOf(s)
	if err != nil {
		return nil, err
	}
	s.WithAnnotations(map[string]string{deckhandv1alpha1.WebServerAppliedHashAnnotation: h})
	return s, nil
}

// convert copies a core API value into its apply configuration through JSON:
// the core types omit every unset field, so the result holds exactly what
// the user wrote.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func hashOf(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// upToDate reports whether applying desired to live would change nothing:
// every field of desired is present in live with the same value. Together
// with the applied-hash annotation (part of desired) this also notices
// fields Deckhand stopped setting, because the hash then differs. Objects
// are compared in their JSON form, as the API server would see them.
func upToDate(desired, live any) (bool, error) {
	var d, l any
	if err := convert(desired, &d); err != nil {
		return false, err
	}
	if err := convert(live, &l); err != nil {
		return false, err
	}
	return contains(l, d), nil
}

// contains reports whether live holds everything in desired: maps by key
// (extra keys in live are fine: other managers and defaults own them),
// lists element by element with equal length, scalars by value.
func contains(live, desired any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, dv := range d {
			lv, ok := l[k]
			if !ok || !contains(lv, dv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !contains(l[i], d[i]) {
				return false
			}
		}
		return true
	default:
		return live == desired
	}
}
