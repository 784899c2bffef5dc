package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/webhookserver"
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

// Handler is the pod mutating webhook: it injects the sidecars of every
// matching, unpaused SidecarSet into a pod being created. It reads
// SidecarSets and namespaces from the informer cache only.
type Handler struct {
	Lister *sidecarcontrol.Lister
	// SyncTimeout bounds how long a request waits for the cache to sync
	// right after the manager starts.
	SyncTimeout time.Duration
	// encoded holds each SidecarSet's injectable parts, encoded once per
	// generation.
	encoded encodings
}

var (
	_ admission.Handler = &Handler{}
	_ http.Handler      = &Handler{}
)

// maxReviewSize bounds a request body: the webhook server's own bound
// (which answers 413 before a larger body gets here).
const maxReviewSize = webhookserver.MaxBodyBytes

// maxReviewPrealloc bounds the buffer allocated from Content-Length before
// any of the body has arrived: the JSON of a large pod. A larger body grows
// the buffer as it arrives, so a caller announcing more than it sends holds
// no more memory than it sent.
const maxReviewPrealloc = 64 << 10

// ServeHTTP serves the webhook: the same answers as controller-runtime's
// admission.Webhook wrapping Handle (TestServeHTTPAnswersAsControllerRuntime
// holds it to that), without its generic AdmissionReview decoding (the
// whole review into Go types, after a first pass to find its kind) and its
// per-request logger: it reads only the review's fields Handle needs
// (podjson.DecodeReview, which FuzzReviewDecoderMatchesTypedDecoding holds
// to typed decoding) and the pod stays raw bytes until Handle scans it.
// docs/sidecarset.md records what this saves.
func (p *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rev podjson.Review
	resp := readReview(r, &rev)
	if resp == nil {
		resp = p.handleRecovering(r.Context(), admissionRequest(&rev))
	}
	resp.UID = types.UID(rev.UID)
	if resp.Result == nil {
		resp.Result = &metav1.Status{}
	}
	if resp.Result.Code == 0 {
		resp.Result.Code = http.StatusOK
	}
	ar := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	ar.APIVersion, ar.Kind = rev.APIVersion, rev.Kind
	if ar.APIVersion == "" || ar.Kind == "" {
		ar.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(ar); err != nil {
		podLog.Error(err, "writing the admission response", "requestID", rev.UID)
	}
}

// admissionRequest is the admission.Request Handle reads, from rev.
func admissionRequest(rev *podjson.Review) admission.Request {
	var req admission.Request
	req.UID = types.UID(rev.UID)
	req.Kind.Kind = rev.ObjectKind
	req.Operation = admissionv1.Operation(rev.Operation)
	req.SubResource = rev.SubResource
	req.Namespace = rev.Namespace
	req.Name = rev.Name
	req.DryRun = &rev.DryRun
	req.UserInfo.Username = rev.UserName
	req.Object.Raw = rev.Object
	return req
}

var podLog = logf.Log.WithName("admission").WithValues("webhook", PodWebhookPath)

// readReview reads and decodes the request's AdmissionReview into rev, or
// returns the error response to send instead.
func readReview(r *http.Request, rev *podjson.Review) *admission.Response {
	fail := func(code int32, err error, msg string) *admission.Response {
		podInjectionErrors.Inc()
		podLog.Error(err, msg)
		resp := admission.Errored(code, err)
		return &resp
	}
	if r.Body == nil || r.Body == http.NoBody {
		return fail(http.StatusBadRequest, errors.New("request body is empty"), "bad request")
	}
	defer func() { _ = r.Body.Close() }()
	size := min(max(r.ContentLength, 0), maxReviewPrealloc)
	// Sized from Content-Length, a pod's review is read with one allocation.
	var body bytes.Buffer
	body.Grow(int(size) + bytes.MinRead)
	limited := &io.LimitedReader{R: r.Body, N: maxReviewSize}
	if _, err := body.ReadFrom(limited); err != nil {
		return fail(http.StatusBadRequest, err, "unable to read the body from the incoming request")
	}
	if limited.N <= 0 {
		return fail(http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize), "unable to read the body from the incoming request; limit reached")
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return fail(http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct), "unable to process a request with unknown content type")
	}
	if err := podjson.DecodeReview(body.Bytes(), rev); err != nil {
		return fail(http.StatusBadRequest, err, "unable to decode the request")
	}
	return nil
}

// handleRecovering is Handle, answering a panic with an error (the pod is
// then admitted without sidecars: failurePolicy Ignore) instead of
// dropping the connection.
func (p *Handler) handleRecovering(ctx context.Context, req admission.Request) (resp *admission.Response) {
	defer func() {
		if v := recover(); v != nil {
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, v)
			}
			podInjectionErrors.Inc()
			errResp := admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", v))
			resp = &errResp
		}
	}()
	r := p.Handle(ctx, req)
	return &r
}

// Handle implements admission.Handler.
func (p *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Kind.Kind != "Pod" {
		return admission.Allowed("")
	}
	ns := req.Namespace
	if p.Lister.IsProtectedNamespace(ns) {
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
	res, err := inject(p.Lister, &p.encoded, ns, req.UserInfo.Username, req.DryRun != nil && *req.DryRun, &pod)
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
