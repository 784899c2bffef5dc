package sidecarset

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
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
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		podInjectionErrors.Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	if ns == "" {
		ns = pod.Metadata.Namespace
	}
	res, err := inject(p.Lister, ns, &pod)
	if err != nil {
		podInjectionErrors.Inc()
		logf.FromContext(ctx).Error(err, "injecting sidecars", "namespace", ns, "name", podName(&pod))
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(res.ops) == 0 {
		return admission.Allowed("")
	}
	if req.DryRun == nil || !*req.DryRun {
		for _, name := range res.injected {
			podsInjected.WithLabelValues(name).Inc()
		}
	}
	pt := admissionv1.PatchTypeJSONPatch
	return admission.Response{
		Patches:           res.ops,
		AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt},
	}
}

func podName(p *podView) string {
	if p.Metadata.Name != "" {
		return p.Metadata.Name
	}
	return p.Metadata.GenerateName
}

// podView is the part of a pod the injector reads. Decoding only this much
// (and the app containers' env and mounts only when a sidecar needs them)
// keeps the webhook cheap; the patch is built from these paths so fields
// the injector does not know are never touched.
type podView struct {
	Metadata struct {
		Name         string            `json:"name"`
		GenerateName string            `json:"generateName"`
		Namespace    string            `json:"namespace"`
		Labels       map[string]string `json:"labels"`
		Annotations  map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		InitContainers   []containerView `json:"initContainers"`
		Containers       []containerView `json:"containers"`
		Volumes          []namedView     `json:"volumes"`
		ImagePullSecrets []namedView     `json:"imagePullSecrets"`
	} `json:"spec"`
}

type containerView struct {
	Name         string          `json:"name"`
	Env          json.RawMessage `json:"env"`
	VolumeMounts json.RawMessage `json:"volumeMounts"`
}

type namedView struct {
	Name string `json:"name"`
}

// injection is the outcome of inject.
type injection struct {
	ops      []jsonpatch.Operation
	injected []string // SidecarSets that added something
}

// inject computes the JSON patch that injects every matching SidecarSet into pod.
func inject(l *sidecarcontrol.Lister, ns string, pod *podView) (injection, error) {
	var res injection
	if pod.Metadata.Annotations[deckhandv1alpha1.AnnotationSidecarSetSkipInjection] == "true" {
		return res, nil
	}
	cands, err := l.Candidates(ns)
	if err != nil || len(cands) == 0 {
		return res, err
	}
	var matched []*deckhandv1alpha1.SidecarSet
	var compiled []*sidecarcontrol.Compiled
	for _, s := range cands {
		if s.Spec.InjectionStrategy.Paused {
			continue
		}
		c := sidecarcontrol.Compile(s)
		if c.Matches(s, ns, pod.Metadata.Labels, l.NamespaceLabels) {
			matched = append(matched, s)
			compiled = append(compiled, c)
		}
	}
	if len(matched) == 0 {
		return res, nil
	}

	names := make(map[string]bool, len(pod.Spec.Containers)+len(pod.Spec.InitContainers)+4)
	for i := range pod.Spec.Containers {
		names[pod.Spec.Containers[i].Name] = true
	}
	for i := range pod.Spec.InitContainers {
		names[pod.Spec.InitContainers[i].Name] = true
	}
	volumes := make(map[string]bool, len(pod.Spec.Volumes)+4)
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = true
	}
	var secrets map[string]bool

	apps := &appContainers{pod: pod}
	var beforeInit, afterInit, before, after []*corev1.Container
	var newVolumes []*corev1.Volume
	var newSecrets []corev1.LocalObjectReference
	record := sidecarcontrol.ParsePodRecord(pod.Metadata.Annotations)
	if record.Hash == nil {
		record.Hash = make(map[string]sidecarcontrol.HashEntry, len(matched))
	}
	if record.HashWithoutImage == nil {
		record.HashWithoutImage = make(map[string]sidecarcontrol.HashWithoutImageEntry, len(matched))
	}
	changed := false
	for k, s := range matched {
		c := compiled[k]
		added := false
		for i := range s.Spec.InitContainers {
			sc := &s.Spec.InitContainers[i]
			if names[sc.Name] {
				continue
			}
			names[sc.Name] = true
			ctr, err := apps.build(sc)
			if err != nil {
				return res, err
			}
			if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
				afterInit = append(afterInit, ctr)
			} else {
				beforeInit = append(beforeInit, ctr)
			}
			added = true
		}
		for i := range s.Spec.Containers {
			sc := &s.Spec.Containers[i]
			if names[sc.Name] {
				continue
			}
			names[sc.Name] = true
			ctr, err := apps.build(sc)
			if err != nil {
				return res, err
			}
			if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
				after = append(after, ctr)
			} else {
				before = append(before, ctr)
			}
			added = true
		}
		for i := range s.Spec.Volumes {
			v := &s.Spec.Volumes[i]
			if !volumes[v.Name] {
				volumes[v.Name] = true
				newVolumes = append(newVolumes, v)
				added = true
			}
		}
		if len(s.Spec.ImagePullSecrets) > 0 && secrets == nil {
			secrets = make(map[string]bool, len(pod.Spec.ImagePullSecrets)+len(s.Spec.ImagePullSecrets))
			for i := range pod.Spec.ImagePullSecrets {
				secrets[pod.Spec.ImagePullSecrets[i].Name] = true
			}
		}
		for _, ps := range s.Spec.ImagePullSecrets {
			if !secrets[ps.Name] {
				secrets[ps.Name] = true
				newSecrets = append(newSecrets, ps)
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

	ops := make([]jsonpatch.Operation, 0, len(beforeInit)+len(afterInit)+len(before)+len(after)+len(newVolumes)+len(newSecrets)+3)
	ops = appendListOps(ops, "/spec/initContainers", pod.Spec.InitContainers == nil, beforeInit, afterInit)
	ops = appendListOps(ops, "/spec/containers", pod.Spec.Containers == nil, before, after)
	ops = appendListOps(ops, "/spec/volumes", pod.Spec.Volumes == nil, nil, newVolumes)
	if len(newSecrets) > 0 {
		if pod.Spec.ImagePullSecrets == nil {
			ops = append(ops, jsonpatch.NewOperation("add", "/spec/imagePullSecrets", newSecrets))
		} else {
			for i := range newSecrets {
				ops = append(ops, jsonpatch.NewOperation("add", "/spec/imagePullSecrets/-", newSecrets[i]))
			}
		}
	}
	injected, hash, hashWithoutImage := record.Annotations()
	if pod.Metadata.Annotations == nil {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{
			deckhandv1alpha1.AnnotationSidecarSetInjected:         injected,
			deckhandv1alpha1.AnnotationSidecarSetHash:             hash,
			deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage: hashWithoutImage,
		}))
	} else {
		ops = append(ops,
			jsonpatch.NewOperation("add", annotationPath(deckhandv1alpha1.AnnotationSidecarSetInjected), injected),
			jsonpatch.NewOperation("add", annotationPath(deckhandv1alpha1.AnnotationSidecarSetHash), hash),
			jsonpatch.NewOperation("add", annotationPath(deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage), hashWithoutImage),
		)
	}
	res.ops = ops
	return res, nil
}

// appendListOps adds the operations that put before at the head of the list
// at path and after at its tail, or that create the list when it is absent.
func appendListOps[T any](ops []jsonpatch.Operation, path string, absent bool, before, after []*T) []jsonpatch.Operation {
	if len(before)+len(after) == 0 {
		return ops
	}
	if absent {
		all := make([]*T, 0, len(before)+len(after))
		all = append(append(all, before...), after...)
		return append(ops, jsonpatch.NewOperation("add", path, all))
	}
	for i, c := range before {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/"+strconv.Itoa(i), c))
	}
	for _, c := range after {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/-", c))
	}
	return ops
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func annotationPath(key string) string {
	return "/metadata/annotations/" + pointerEscaper.Replace(key)
}

// appContainers gives lazy access to the env and mounts of the pod's own
// containers, decoded only when a sidecar transfers env or shares volumes.
type appContainers struct {
	pod          *podView
	env          map[string][]corev1.EnvVar
	mounts       []corev1.VolumeMount
	mountsLoaded bool
}

func (a *appContainers) envOf(container string) ([]corev1.EnvVar, error) {
	if env, ok := a.env[container]; ok {
		return env, nil
	}
	if a.env == nil {
		a.env = map[string][]corev1.EnvVar{}
	}
	var raw json.RawMessage
	found := false
	for _, list := range [][]containerView{a.pod.Spec.Containers, a.pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == container {
				raw, found = list[i].Env, true
				break
			}
		}
		if found {
			break
		}
	}
	var env []corev1.EnvVar
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &env); err != nil {
			return nil, fmt.Errorf("decoding the env of container %q: %w", container, err)
		}
	}
	a.env[container] = env
	return env, nil
}

func (a *appContainers) allMounts() ([]corev1.VolumeMount, error) {
	if a.mountsLoaded {
		return a.mounts, nil
	}
	a.mountsLoaded = true
	for i := range a.pod.Spec.Containers {
		raw := a.pod.Spec.Containers[i].VolumeMounts
		if len(raw) == 0 {
			continue
		}
		var ms []corev1.VolumeMount
		if err := json.Unmarshal(raw, &ms); err != nil {
			return nil, fmt.Errorf("decoding the volumeMounts of container %q: %w", a.pod.Spec.Containers[i].Name, err)
		}
		a.mounts = append(a.mounts, ms...)
	}
	return a.mounts, nil
}

// build returns the container to inject for sc: sc's own container when no
// policy changes it (shared with the cache, never modified), otherwise a
// copy with the transferred env and shared mounts.
func (a *appContainers) build(sc *deckhandv1alpha1.SidecarContainer) (*corev1.Container, error) {
	share := sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled
	if len(sc.TransferEnv) == 0 && !share {
		return &sc.Container, nil
	}
	c := sc.Container // shallow copy; only Env and VolumeMounts are replaced
	if len(sc.TransferEnv) > 0 {
		env := make([]corev1.EnvVar, len(c.Env), len(c.Env)+len(sc.TransferEnv))
		copy(env, c.Env)
		for _, t := range sc.TransferEnv {
			src, err := a.envOf(t.SourceContainerName)
			if err != nil {
				return nil, err
			}
			for i := range src {
				if src[i].Name != t.EnvName {
					continue
				}
				replaced := false
				for j := range env {
					if env[j].Name == t.EnvName {
						env[j], replaced = src[i], true
					}
				}
				if !replaced {
					env = append(env, src[i])
				}
				break
			}
		}
		c.Env = env
	}
	if share {
		ms, err := a.allMounts()
		if err != nil {
			return nil, err
		}
		if len(ms) > 0 {
			mounts := make([]corev1.VolumeMount, len(c.VolumeMounts), len(c.VolumeMounts)+len(ms))
			copy(mounts, c.VolumeMounts)
			for _, m := range ms {
				taken := false
				for j := range mounts {
					if mounts[j].MountPath == m.MountPath {
						taken = true
						break
					}
				}
				if !taken {
					mounts = append(mounts, m)
				}
			}
			c.VolumeMounts = mounts
		}
	}
	return &c, nil
}
