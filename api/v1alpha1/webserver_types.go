package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels, annotations and condition types of the WebServer kind.
const (
	// WebServerNameLabel is the selector label every WebServer's pods carry,
	// with the value WebServerNameLabelValue.
	WebServerNameLabel = "app.kubernetes.io/name"
	// WebServerNameLabelValue is the value of WebServerNameLabel.
	WebServerNameLabelValue = "webserver"
	// WebServerInstanceLabel is the selector label that tells the pods of one
	// WebServer from another's; its value is the WebServer's name, which can
	// never change, so the Deployment's immutable selector never has to.
	WebServerInstanceLabel = "app.kubernetes.io/instance"

	// WebServerAppliedHashAnnotation is set on the Deployment and Service a
	// WebServer owns: a hash of the configuration Deckhand last applied. It
	// lets the controller skip applies that would change nothing.
	WebServerAppliedHashAnnotation = "apps.deckhand.dev/webserver-applied-hash"
	// WebServerConfigHashAnnotation is set on the pod template of a
	// WebServer's Deployment with spec.configVolumes: a hash of the content
	// of the ConfigMaps and Secrets it mounts, so that a change of them rolls
	// the pods.
	WebServerConfigHashAnnotation = "apps.deckhand.dev/config-hash"
	// WebServerOwnsReplicasAnnotation is set to "true" on a Deployment while
	// Deckhand owns its spec.replicas (because the WebServer sets
	// spec.replicas). When the user unsets spec.replicas, Deckhand hands the
	// field over to WebServerReplicasHandoffManager so that the Deployment
	// keeps its size instead of falling back to the default of 1.
	WebServerOwnsReplicasAnnotation = "apps.deckhand.dev/webserver-owns-replicas"
	// WebServerReplicasHandoffManager is the field manager that holds a
	// Deployment's spec.replicas after Deckhand let go of it. Whoever scales
	// the Deployment next (kubectl scale, an autoscaler) takes it over.
	WebServerReplicasHandoffManager = "deckhand-replicas-handoff"

	// WebServerContainerName is the name of the web server container in the
	// pod template.
	WebServerContainerName = "web"
	// WebServerPortName is the name of the container port and Service port.
	WebServerPortName = "http"

	// WebServerAvailableCondition is True when the Deployment reports
	// minimum availability and the Service exists.
	WebServerAvailableCondition = "Available"
	// WebServerProgressingCondition is True while a rollout of the
	// Deployment is under way.
	WebServerProgressingCondition = "Progressing"
	// WebServerDegradedCondition is True when something needs attention: a
	// name conflict, a failed apply, a stuck rollout or failing replicas.
	WebServerDegradedCondition = "Degraded"
)

// WebServerSpec is the desired state of a WebServer.
// +kubebuilder:validation:XValidation:rule="!has(self.podLabels) || !self.podLabels.exists(k, k == 'app.kubernetes.io/name' || k == 'app.kubernetes.io/instance' || k == 'app.kubernetes.io/managed-by')",message="podLabels must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: Deckhand sets them",fieldPath=".podLabels"
type WebServerSpec struct {
	// Image is the container image to serve, as a reference such as
	// "nginx", "nginx:1.27" or "registry.example.com/team/site@sha256:<digest>".
	// Changing it rolls the Deployment out.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(?:(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$')`,message="must be a valid image reference such as nginx, nginx:1.27 or registry.example.com/team/site@sha256:<digest> (lower-case repository, optional :tag and @digest)"
	Image string `json:"image"`

	// Port is the TCP port the server listens on; the container port, the
	// Service port and the default readiness probe all use it.
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// Replicas is the number of pods. Leave it unset to start with 1 and let
	// something else decide the size: `kubectl scale deployment/<name>`, or a
	// HorizontalPodAutoscaler targeting the Deployment. When set, Deckhand
	// owns the Deployment's replicas and restores them if they are changed
	// there; scale the WebServer itself (its /scale subresource) instead.
	// At most 10000, through the spec or the scale subresource.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas *int32 `json:"replicas,omitempty"`

	// ServiceType is the type of the Service in front of the pods.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// Env is the environment of the web server container.
	// +optional
	// +listType=map
	// +listMapKey=name
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources are the compute resources of the web server container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodAnnotations are added to the pod template's annotations. Changing
	// them rolls the Deployment out.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// PodLabels are added to the pod template's labels. They cannot replace
	// the selector labels app.kubernetes.io/name and app.kubernetes.io/instance,
	// nor app.kubernetes.io/managed-by.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// ReadinessProbe replaces the default readiness probe, a TCP connect to
	// Port every 10 seconds.
	// +optional
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`

	// LivenessProbe restarts the container when it fails (none by default:
	// a liveness probe that is too strict restarts a server that is only
	// slow). An HTTP GET of a health path on Port is the usual choice.
	// +optional
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`

	// StartupProbe holds the other probes back until it succeeds, for a
	// server that takes long to start (none by default).
	// +optional
	StartupProbe *corev1.Probe `json:"startupProbe,omitempty"`

	// Command replaces the image's entrypoint.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// Args replaces the image's arguments.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// EnvFrom adds every key of ConfigMaps and Secrets to the container's
	// environment, as in a Pod.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// ConfigVolumes mount ConfigMaps and Secrets of the WebServer's
	// namespace into the container, read-only. A change of their content
	// rolls the pods out: Deckhand keeps a hash of what they hold in the pod
	// template (the apps.deckhand.dev/config-hash annotation) and looks at
	// them on every reconcile and at least every 30 seconds.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	ConfigVolumes []WebServerConfigVolume `json:"configVolumes,omitempty"`

	// ImagePullSecrets name the Secrets, in the WebServer's namespace, that
	// hold the registry credentials to pull Image.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// ServiceAccountName is the ServiceAccount the pods run as (the
	// namespace's default one if unset).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// DrainSeconds is how long a pod that is being stopped keeps serving
	// before the server gets SIGTERM (a preStop sleep), so that the Service's
	// endpoints and the load balancers behind it stop sending it requests
	// first. 0 turns the drain off. It must be less than
	// TerminationGracePeriodSeconds.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`

	// TerminationGracePeriodSeconds is how long a stopping pod has, drain
	// included, before it is killed (the Pod default, 30, if unset).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Ingress makes the WebServer reachable from outside the cluster through
	// a networking.k8s.io/v1 Ingress of the same name, kept like the
	// Deployment and the Service; status.url is then its external address.
	// Removing it deletes the Ingress.
	// +optional
	Ingress *WebServerIngress `json:"ingress,omitempty"`

	// DisruptionBudget shapes the PodDisruptionBudget Deckhand keeps for the
	// pods while there is more than one replica, so that a node drain never
	// takes them all at once. With one replica there is none: a budget would
	// block every drain.
	// +optional
	DisruptionBudget *WebServerDisruptionBudget `json:"disruptionBudget,omitempty"`

	// SecurityContext replaces the web server container's default security
	// context, which meets the restricted Pod Security Standard: run as a
	// non-root user, no privilege escalation, every capability dropped, a
	// read-only root filesystem (a writable emptyDir is mounted at /tmp).
	// Set it for an image that must run as root or write to its root
	// filesystem; what it leaves unset is unset, not defaulted.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// PodSecurityContext replaces the pod's default security context:
	// runAsNonRoot and the RuntimeDefault seccomp profile.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// AutomountServiceAccountToken mounts the pod's ServiceAccount token. A
	// web server rarely calls the Kubernetes API, so it is not mounted unless
	// this is true.
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
}

// WebServerConfigVolume is a ConfigMap or Secret mounted into a
// WebServer's container.
// +kubebuilder:validation:XValidation:rule="has(self.configMap) != has(self.secret)",message="set exactly one of configMap and secret"
type WebServerConfigVolume struct {
	// Name is the volume's name: a DNS label, not "tmp" (the writable
	// volume a read-only root filesystem gets).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self != 'tmp'",message="must be a DNS label (lower-case letters, digits and '-') other than tmp"
	Name string `json:"name"`

	// MountPath is the absolute path the files appear under.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains(':') && self != '/tmp'",message="must be an absolute path without ':', other than /tmp"
	MountPath string `json:"mountPath"`

	// ConfigMap is the name of the ConfigMap whose keys become files.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ConfigMap string `json:"configMap,omitempty"`

	// Secret is the name of the Secret whose keys become files.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Secret string `json:"secret,omitempty"`
}

// WebServerIngress is how clients outside the cluster reach a WebServer.
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || (!has(self.tls) && !has(self.className))",message="with gateway, TLS and the class are the Gateway's: leave tls and className unset"
type WebServerIngress struct {
	// Host is the DNS name clients use, such as shop.example.com.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be a lower-case DNS name such as shop.example.com (no wildcard, no port)"
	Host string `json:"host"`

	// Path is the URL path prefix served ("/" by default).
	// +optional
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains(' ')",message="must start with / and contain no space"
	Path string `json:"path,omitempty"`

	// ClassName is the IngressClass that serves the Ingress (the cluster's
	// default class if unset).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClassName *string `json:"className,omitempty"`

	// TLS serves Host over HTTPS with the certificate of a Secret.
	// +optional
	TLS *WebServerTLS `json:"tls,omitempty"`

	// Gateway attaches the WebServer to a Gateway of the Gateway API
	// instead: Deckhand keeps an HTTPRoute (gateway.networking.k8s.io/v1)
	// of the same name, for Host and Path, whose parent is this Gateway, in
	// place of an Ingress. TLS and the class are then the Gateway's. Needs
	// the Gateway API's CRDs installed.
	// +optional
	Gateway *WebServerGatewayReference `json:"gateway,omitempty"`
}

// WebServerGatewayReference names the Gateway a WebServer's HTTPRoute
// attaches to.
type WebServerGatewayReference struct {
	// Name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Gateway; the WebServer's if unset. A Gateway of
	// another namespace must allow routes from this one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// SectionName is the Gateway listener to attach to; all that accept the
	// route if unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SectionName string `json:"sectionName,omitempty"`
}

// WebServerTLS is the certificate of a WebServer's Ingress.
// +kubebuilder:validation:XValidation:rule="!(has(self.issuer) && has(self.clusterIssuer))",message="set at most one of issuer and clusterIssuer"
type WebServerTLS struct {
	// SecretName is the kubernetes.io/tls Secret, in the WebServer's
	// namespace, that holds the certificate and key for Host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// Issuer asks cert-manager to issue the certificate into SecretName from
	// the Issuer of this name in the WebServer's namespace (the
	// cert-manager.io/issuer annotation of the Ingress).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Issuer string `json:"issuer,omitempty"`

	// ClusterIssuer asks cert-manager to issue the certificate from the
	// ClusterIssuer of this name (the cert-manager.io/cluster-issuer
	// annotation).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClusterIssuer string `json:"clusterIssuer,omitempty"`
}

// WebServerDisruptionBudget is the PodDisruptionBudget of a WebServer's pods.
type WebServerDisruptionBudget struct {
	// MaxUnavailable is how many pods, or what percentage of them, a
	// voluntary disruption (an eviction, a node drain) may take down at
	// once: 1 if unset.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="must be a positive number of pods or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// WebServerStatus is the observed state of a WebServer.
type WebServerStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods the Deployment has (any version).
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of Ready pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// AvailableReplicas is the number of pods Ready for at least
	// minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// URL is the address clients use: with spec.ingress, once the Ingress
	// exists (or the Gateway has accepted the HTTPRoute),
	// http(s)://<host><path>; otherwise the in-cluster address of the
	// Service, http://<name>.<namespace>.svc:<port>.
	// +optional
	URL string `json:"url,omitempty"`

	// Selector is the label selector of the pods, in string form, for the
	// /scale subresource (and so for HorizontalPodAutoscalers).
	// +optional
	Selector string `json:"selector,omitempty"`

	// Conditions are Available, Progressing and Degraded, derived from the
	// Deployment's own conditions, and the summary conditions Ready,
	// Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WebServer runs a container image behind a Service: Deckhand keeps an owned
// Deployment and Service of the same name in line with the spec, and leaves
// alone the fields others own (kubectl rollout restart annotations,
// allocated Service IPs and node ports, replicas when spec.replicas is unset).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=ws;web;mws;myweb,categories=deckhand
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Ready-Pods",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the WebServer has reached its spec: the status of its Ready condition"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the WebServer is or is not Ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WebServer struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta is the standard object metadata. The name must be a DNS-1035
	// label (it names the Service).
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec WebServerSpec `json:"spec"`
	// Status is the observed state, written by Deckhand.
	// +optional
	Status WebServerStatus `json:"status,omitempty"`
}

// WebServerList is a list of WebServers.
// +kubebuilder:object:root=true
type WebServerList struct {
	metav1.TypeMeta `json:",inline"`
	// ListMeta is the standard list metadata.
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the WebServers.
	Items []WebServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WebServer{}, &WebServerList{})
}
