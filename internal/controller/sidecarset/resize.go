package sidecarset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// resizePod asks the pod resize subresource for the SidecarSet's CPU and
// memory on every sidecar container and native sidecar the pod's record
// says s injected. The JSON patch tests each container's name at its
// index, so a pod whose containers moved is refused rather than resized
// wrongly. With dryRun the API server only validates it (a resize that
// would change the pod's QoS class, for example, is refused).
func (r *Reconciler) resizePod(ctx context.Context, sc *scope, p *podState, dryRun bool) error {
	pod := p.pod
	ops, err := resizeOps(sc.set, pod, p.record.Containers(sc.set.Name))
	if err != nil || len(ops) == 0 {
		return err
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	target := &corev1.Pod{}
	target.Namespace, target.Name = pod.Namespace, pod.Name
	opts := []client.SubResourcePatchOption{client.FieldOwner(deckhandv1alpha1.FieldManager)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	return r.Client.SubResource("resize").Patch(ctx, target, client.RawPatch(types.JSONPatchType, data), opts...)
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// resizeOps returns the JSON patch that sets the CPU and memory of the
// owned sidecars of pod to s's, keeping their other resources.
func resizeOps(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod, owned []string) ([]jsonPatchOp, error) {
	var ops []jsonPatchOp
	add := func(list string, i int, have *corev1.Container, want *deckhandv1alpha1.SidecarContainer) {
		if podutil.SameCPUMemory(&have.Resources, &want.Resources) {
			return
		}
		res := corev1.ResourceRequirements{
			Requests: withCPUMemory(have.Resources.Requests, want.Resources.Requests),
			Limits:   withCPUMemory(have.Resources.Limits, want.Resources.Limits),
			Claims:   have.Resources.Claims,
		}
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: fmt.Sprintf("/spec/%s/%d/name", list, i), Value: have.Name},
			jsonPatchOp{Op: "add", Path: fmt.Sprintf("/spec/%s/%d/resources", list, i), Value: res})
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if want := sidecarOf(s.Spec.Containers, c.Name); want != nil && slices.Contains(owned, c.Name) {
			add("containers", i, c, want)
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		want := sidecarOf(s.Spec.InitContainers, c.Name)
		if want == nil || !slices.Contains(owned, c.Name) {
			continue
		}
		if !podutil.IsNativeSidecar(c) {
			if !podutil.SameCPUMemory(&c.Resources, &want.Resources) {
				return nil, fmt.Errorf("init container %s is not a native sidecar: its resources cannot change in place", c.Name)
			}
			continue
		}
		add("initContainers", i, c, want)
	}
	return ops, nil
}

// withCPUMemory returns have with its CPU and memory entries replaced by
// want's (removed where want has none).
func withCPUMemory(have, want corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range have {
		if k != corev1.ResourceCPU && k != corev1.ResourceMemory {
			out[k] = v
		}
	}
	for _, k := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if v, ok := want[k]; ok {
			out[k] = v
		}
	}
	return out
}

func sidecarOf(list []deckhandv1alpha1.SidecarContainer, name string) *deckhandv1alpha1.SidecarContainer {
	if i := slices.IndexFunc(list, func(c deckhandv1alpha1.SidecarContainer) bool { return c.Name == name }); i >= 0 {
		return &list[i]
	}
	return nil
}

// resizeRefused reports an error with which the API server refuses a
// resize for good: invalid (the QoS class would change, a resource that
// cannot be resized), forbidden, or no resize subresource at all (an API
// server older than in-place resize).
func resizeRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// withResizeAnnotation records in pod's resize annotation that the
// SidecarSet called name brings it to revision hash through a resize.
func withResizeAnnotation(pod *corev1.Pod, name, hash string) {
	m := map[string]string{}
	if raw := pod.Annotations[deckhandv1alpha1.SidecarSetResizeAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &m) // a malformed value is replaced
	}
	m[name] = hash
	data, _ := json.Marshal(m)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[deckhandv1alpha1.SidecarSetResizeAnnotation] = string(data)
}
