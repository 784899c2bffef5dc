package sidecarset

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/deckhand-dev/deckhand/internal/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// PodWebhookPath is where the pod injection webhook is served.
const PodWebhookPath = "/mutate-v1-pod-sidecarset"

// The pod webhook's failurePolicy is Ignore: a Deckhand outage must never
// stop pods from being created anywhere in the cluster (Deployments, Jobs
// and DaemonSets would all stall). A pod admitted without its sidecars is
// not lost from sight: the SidecarSet controller counts it in
// status.notInjectedPods and sets the PodsInjected condition to False, so the
// miss is observable and fixable by recreating the pod. timeoutSeconds is
// short for the same reason.
//
// +kubebuilder:webhook:path=/mutate-v1-pod-sidecarset,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=msidecarset-pod.apps.deckhand.dev,admissionReviewVersions=v1,timeoutSeconds=5,reinvocationPolicy=Never

var podsInjected = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_sidecarset_pods_injected_total",
	Help: "Pods the SidecarSet pod webhook injected, by SidecarSet (dry-run requests are not counted).",
}, []string{"sidecarset"})

var podInjectionErrors = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "deckhand_sidecarset_pod_injection_errors_total",
	Help: "Pod admission requests the SidecarSet webhook could not answer (the pod is admitted without sidecars: failurePolicy Ignore).",
})

// PodInjector is the pod mutating webhook: it injects the sidecars of every
// matching, unpaused SidecarSet into a pod being created. It reads
// SidecarSets and namespaces from the informer cache only.
type PodInjector struct {
	Lister *sidecarcontrol.Lister
	// SyncTimeout bounds how long a request waits for the cache to sync
	// right after the manager starts.
	SyncTimeout time.Duration
}

var _ admission.Handler = &PodInjector{}

// Handle implements admission.Handler.
func (p *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Kind.Kind != "Pod" {
		return admission.Allowed("")
	}
	ns := req.Namespace
	if sidecarcontrol.IsProtectedNamespace(ns) {
		return admission.Allowed("protected namespace")
	}
	if !p.Lister.HasSynced() {
		timeout := p.SyncTimeout
		if timeout == 0 {
			timeout = 3 * time.Second
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			return p.Lister.HasSynced(), nil
		})
		if err != nil {
			podInjectionErrors.Inc()
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("the SidecarSet cache has not synced yet"))
		}
	}
	var pod podjson.RawPod
	if err := podjson.DecodePod(req.Object.Raw, &pod); err != nil {
		podInjectionErrors.Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	if ns == "" {
		ns = pod.Namespace
	}
	res, err := inject(p.Lister, ns, &pod)
	if err != nil {
		podInjectionErrors.Inc()
		logf.FromContext(ctx).Error(err, "injecting sidecars", "namespace", ns, "name", podName(&pod))
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(res.patch) == 0 {
		return admission.Allowed("").WithWarnings(res.warnings...)
	}
	if req.DryRun == nil || !*req.DryRun {
		for _, name := range res.injected {
			podsInjected.WithLabelValues(name).Inc()
		}
	}
	pt := admissionv1.PatchTypeJSONPatch
	// Patch is set directly (not Patches): the injector writes the JSON
	// patch itself, which is what keeps it cheap.
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: res.patch, Warnings: res.warnings}}
}

func podName(p *podjson.RawPod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName
}
