package sidecarset

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
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
	var pod podView
	if err := decodePodView(req.Object.Raw, &pod); err != nil {
		podInjectionErrors.Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	if ns == "" {
		ns = pod.namespace
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

func podName(p *podView) string {
	if p.name != "" {
		return p.name
	}
	return p.generateName
}

// injection is the outcome of inject.
type injection struct {
	patch    []byte   // a JSON patch, or nil
	injected []string // SidecarSets that added something
	// warnings tell the pod's creator which SidecarSets were not injected
	// because of a container name clash.
	warnings []string
}

// pendingContainer is a sidecar chosen for the pod, encoded when the patch is written.
type pendingContainer struct {
	sc  *deckhandv1alpha1.SidecarContainer
	enc *encodedContainer
}

// inject computes the JSON patch that injects every matching SidecarSet into pod.
func inject(l *sidecarcontrol.Lister, ns string, pod *podView) (injection, error) {
	var res injection
	if pod.annotations[deckhandv1alpha1.AnnotationSidecarSetSkipInjection] == "true" {
		return res, nil
	}
	cands, err := l.Candidates(ns)
	if err != nil || len(cands) == 0 {
		return res, err
	}
	var matched [8]*deckhandv1alpha1.SidecarSet
	sets := matched[:0]
	for _, s := range cands {
		if s.Spec.InjectionStrategy.Paused {
			continue
		}
		if sidecarcontrol.Compile(s).Matches(s, ns, pod.labels, l.NamespaceLabels) {
			sets = append(sets, s)
		}
	}
	if len(sets) == 0 {
		return res, nil
	}

	taken := func(name string) bool {
		for i := range pod.containers {
			if pod.containers[i].name == name {
				return true
			}
		}
		for i := range pod.initContainers {
			if pod.initContainers[i].name == name {
				return true
			}
		}
		return false
	}
	var beforeInit, afterInit, before, after []pendingContainer
	var newVolumes, newSecrets [][]byte
	var addedNames, addedVolumes, addedSecrets []string

	var record sidecarcontrol.PodRecord
	if pod.annotations[deckhandv1alpha1.AnnotationSidecarSetHash] != "" {
		record = sidecarcontrol.ParsePodRecord(pod.annotations)
	}
	if record.Hash == nil {
		record.Hash = make(map[string]sidecarcontrol.HashEntry, len(sets))
	}
	if record.HashWithoutImage == nil {
		record.HashWithoutImage = make(map[string]sidecarcontrol.HashWithoutImageEntry, len(sets))
	}
	changed := false
	for _, s := range sets {
		c := sidecarcontrol.Compile(s)
		// A SidecarSet is injected whole or not at all, and only where every
		// container it names is its own: a container of the same name that
		// the pod brought itself (or that a SidecarSet earlier in name order
		// adds) wins, and the SidecarSet is then neither injected nor
		// recorded. Recorded, its controller would count the pod as its own
		// and roll its image onto a container it did not inject. The
		// controller reports such pods as not injected, naming the container.
		if name := clash(c.ContainerNames, record.Hash[s.Name].Containers, taken, addedNames); name != "" {
			res.warnings = append(res.warnings, fmt.Sprintf("SidecarSet %s was not injected: the pod already has a container named %q", s.Name, name))
			continue
		}
		enc := encoded(s, c)
		added := false
		for i := range s.Spec.InitContainers {
			sc := &s.Spec.InitContainers[i]
			if taken(sc.Name) || contains(addedNames, sc.Name) {
				continue
			}
			addedNames = append(addedNames, sc.Name)
			pc := pendingContainer{sc: sc, enc: &enc.initContainers[i]}
			if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
				afterInit = append(afterInit, pc)
			} else {
				beforeInit = append(beforeInit, pc)
			}
			added = true
		}
		for i := range s.Spec.Containers {
			sc := &s.Spec.Containers[i]
			if taken(sc.Name) || contains(addedNames, sc.Name) {
				continue
			}
			addedNames = append(addedNames, sc.Name)
			pc := pendingContainer{sc: sc, enc: &enc.containers[i]}
			if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
				after = append(after, pc)
			} else {
				before = append(before, pc)
			}
			added = true
		}
		for i := range s.Spec.Volumes {
			name := s.Spec.Volumes[i].Name
			if !contains(pod.volumes, name) && !contains(addedVolumes, name) {
				addedVolumes = append(addedVolumes, name)
				newVolumes = append(newVolumes, enc.volumes[i])
				added = true
			}
		}
		for i, ps := range s.Spec.ImagePullSecrets {
			if !contains(pod.imagePullSecrets, ps.Name) && !contains(addedSecrets, ps.Name) {
				addedSecrets = append(addedSecrets, ps.Name)
				newSecrets = append(newSecrets, enc.imagePullSecrets[i])
				added = true
			}
		}
		old, had := record.Hash[s.Name]
		if added || !had || old.Hash != c.Hash {
			record.Hash[s.Name] = sidecarcontrol.HashEntry{Hash: c.Hash, Containers: c.ContainerNames}
			record.HashWithoutImage[s.Name] = sidecarcontrol.HashWithoutImageEntry{Hash: c.HashWithoutImage}
			changed = true
		}
		if added {
			res.injected = append(res.injected, s.Name)
		}
	}
	if !changed {
		return res, nil
	}

	size := 512
	for _, list := range [][]pendingContainer{beforeInit, afterInit, before, after} {
		for _, pc := range list {
			size += len(pc.enc.full) + 64
			if pc.sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
				for i := range pod.containers {
					size += len(pod.containers[i].volumeMounts)
				}
			}
		}
	}
	for _, v := range newVolumes {
		size += len(v) + 48
	}
	w := patchWriter{buf: make([]byte, 0, size+size/4+1024)}
	apps := &appContainers{pod: pod}
	if err := w.containers("/spec/initContainers", !pod.hasInitContainers, beforeInit, afterInit, apps); err != nil {
		return res, err
	}
	if err := w.containers("/spec/containers", len(pod.containers) == 0, before, after, apps); err != nil {
		return res, err
	}
	w.list("/spec/volumes", !pod.hasVolumes, newVolumes)
	w.list("/spec/imagePullSecrets", !pod.hasImagePullSecrets, newSecrets)
	injected, hash, hashWithoutImage := record.Annotations()
	if !pod.hasAnnotations {
		w.begin("/metadata/annotations")
		w.buf = append(w.buf, '{')
		w.buf = appendJSONString(w.buf, deckhandv1alpha1.AnnotationSidecarSetInjected)
		w.buf = append(w.buf, ':')
		w.buf = appendJSONString(w.buf, injected)
		w.buf = append(w.buf, ',')
		w.buf = appendJSONString(w.buf, deckhandv1alpha1.AnnotationSidecarSetHash)
		w.buf = append(w.buf, ':')
		w.buf = appendJSONString(w.buf, hash)
		w.buf = append(w.buf, ',')
		w.buf = appendJSONString(w.buf, deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage)
		w.buf = append(w.buf, ':')
		w.buf = appendJSONString(w.buf, hashWithoutImage)
		w.buf = append(w.buf, "}}"...)
	} else {
		w.stringOp(annotationPathInjected, injected)
		w.stringOp(annotationPathHash, hash)
		w.stringOp(annotationPathHashWithoutImage, hashWithoutImage)
	}
	res.patch = w.done()
	return res, nil
}

// clash returns the first of a SidecarSet's container names that is taken
// by a container it does not own ("" if none): the pod's own (present, and
// not among the containers the pod's injection record already lists for the
// SidecarSet) or one another SidecarSet adds in this admission.
func clash(names, recorded []string, taken func(string) bool, added []string) string {
	for _, n := range names {
		if contains(added, n) || (taken(n) && !contains(recorded, n)) {
			return n
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

var (
	annotationPathInjected         = annotationPath(deckhandv1alpha1.AnnotationSidecarSetInjected)
	annotationPathHash             = annotationPath(deckhandv1alpha1.AnnotationSidecarSetHash)
	annotationPathHashWithoutImage = annotationPath(deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage)
)

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func annotationPath(key string) string {
	return "/metadata/annotations/" + pointerEscaper.Replace(key)
}
