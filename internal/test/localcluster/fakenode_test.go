package localcluster

import (
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeRestartsChangedContainers changes the images of a running
// pod's regular container, completed init container and native sidecar at
// once and follows the pod from a watch: it must turn not Ready, then Ready
// again with the regular container's and the sidecar's statuses reporting
// their new image, an imageID with a digest and one more restart, as a
// kubelet reports an in-place update; the init container, which a kubelet
// does not run again, still reports its first run. The pod keeps its UID.
func TestFakeNodeRestartsChangedContainers(t *testing.T) {
	_, pods, ctx := fakeNodePods(t)
	created := createOnFakeNode(t, ctx, pods, "inplace", withInitAndSidecar("example.com/team/sidecar:1", corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "other", Image: "other:1"}},
	}))
	ready := waitPod(t, ctx, pods, created.Name, "", podutil.IsPodReady)
	firstInit := ready.Status.InitContainerStatuses[0]
	if !strings.HasPrefix(firstInit.ImageID, "docker.io/library/init@sha256:") {
		t.Fatalf("init container started with imageID %q, want one with a digest", firstInit.ImageID)
	}

	patch := `{"spec":{"containers":[{"name":"app","image":"app:2"}],"initContainers":[{"name":"init","image":"init:2"},{"name":"sidecar","image":"example.com/team/sidecar@sha256:` + strings.Repeat("ab", 32) + `"}]}}`
	patchPod(t, ctx, pods, created.Name, patch)
	sawNotReady := false
	final := waitPod(t, ctx, pods, created.Name, ready.ResourceVersion, func(p *corev1.Pod) bool {
		if !podutil.IsPodReady(p) {
			sawNotReady = true
			return false
		}
		return sawNotReady
	})
	if final.UID != created.UID {
		t.Fatalf("the pod was recreated (UID %s, was %s)", final.UID, created.UID)
	}
	want := map[string]struct {
		image, imageID string
		restarts       int32
	}{
		"app":     {"app:2", "docker.io/library/app@sha256:", 1},
		"other":   {"other:1", "", 0},
		"init":    {"init:1", firstInit.ImageID, 0},
		"sidecar": {"example.com/team/sidecar@sha256:" + strings.Repeat("ab", 32), "example.com/team/sidecar@sha256:" + strings.Repeat("ab", 32), 1},
	}
	statuses := allStatuses(final)
	if len(statuses) != len(want) {
		t.Fatalf("%d container statuses, want %d: %+v", len(statuses), len(want), statuses)
	}
	for _, cs := range statuses {
		w := want[cs.Name]
		if cs.Image != w.image || !strings.HasPrefix(cs.ImageID, w.imageID) || cs.RestartCount != w.restarts {
			t.Errorf("container %s: image %q imageID %q restarts %d; want image %q, imageID %q..., restarts %d",
				cs.Name, cs.Image, cs.ImageID, cs.RestartCount, w.image, w.imageID, w.restarts)
		}
		if cs.Name == "init" && (cs.ImageID != firstInit.ImageID || cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed") {
			t.Errorf("completed init container: %+v, want its first run %+v unchanged", cs, firstInit)
		}
		if w.restarts > 0 && (cs.LastTerminationState.Terminated == nil || len(cs.ImageID) < len("docker.io/library/x@sha256:")+64) {
			t.Errorf("container %s: want the previous run in lastState and a full digest, got %+v / %q", cs.Name, cs.LastTerminationState, cs.ImageID)
		}
	}
	for _, cs := range final.Status.InitContainerStatuses {
		running := cs.State.Running != nil
		if sidecar := cs.Name == "sidecar"; running != sidecar {
			t.Errorf("init container %s: running=%v, want %v (a native sidecar runs, an init container completes)", cs.Name, running, sidecar)
		}
	}
}

// TestFakeNodeKeepsCompletedInitContainers changes the image of a running
// pod's completed plain init container, then of its native sidecar, and
// follows the pod from a watch. A kubelet never runs a completed init
// container again: until the sidecar's change the pod stays Ready, and
// throughout the init container's status reports its only run (terminated
// Completed, the old image and imageID, no restart). The sidecar's change
// restarts the sidecar, as it would on a kubelet. That the fake node has
// reacted to the init container's change by the time the sidecar has
// restarted follows from kwok handling a pod's changes in order.
func TestFakeNodeKeepsCompletedInitContainers(t *testing.T) {
	_, pods, ctx := fakeNodePods(t)
	pod := createOnFakeNode(t, ctx, pods, "init-done", withInitAndSidecar("sidecar:1", corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
	}))
	ready := waitPod(t, ctx, pods, pod.Name, "", podutil.IsPodReady)
	first := ready.Status.InitContainerStatuses[0]
	if first.Name != "init" || first.State.Terminated == nil || first.ImageID == "" {
		t.Fatalf("init container status after start: %+v, want terminated with an imageID", first)
	}

	patched := patchPod(t, ctx, pods, pod.Name, `{"spec":{"initContainers":[{"name":"init","image":"init:2"}]}}`)
	patchPod(t, ctx, pods, pod.Name, `{"spec":{"initContainers":[{"name":"sidecar","image":"sidecar:2"}]}}`)
	final := waitPod(t, ctx, pods, pod.Name, patched.ResourceVersion, func(p *corev1.Pod) bool {
		init := p.Status.InitContainerStatuses[0]
		if init.Image != first.Image || init.ImageID != first.ImageID || init.RestartCount != 0 ||
			init.State.Terminated == nil || init.State.Terminated.Reason != "Completed" {
			t.Fatalf("the completed init container ran again: %+v, want %+v", init, first)
		}
		if p.Spec.InitContainers[1].Image == "sidecar:1" && !podutil.IsPodReady(p) {
			t.Fatalf("the pod turned not Ready on the init container's image change: %+v", p.Status.Conditions)
		}
		sidecar := p.Status.InitContainerStatuses[1]
		return sidecar.Image == "sidecar:2" && sidecar.RestartCount == 1 && sidecar.State.Running != nil && podutil.IsPodReady(p)
	})
	if init := final.Status.InitContainerStatuses[0]; init.Image != "init:1" {
		t.Errorf("init container reports image %q, want the one it ran, init:1", init.Image)
	}
}

// TestOwnerReferencesPermissionEnforcement: every local API server runs the
// admission plugins hardened clusters add, so an owner reference with
// blockOwnerDeletion needs update on the owner's finalizers.
func TestOwnerReferencesPermissionEnforcement(t *testing.T) {
	c, ctx := startCluster(t, Options{FakeNodes: 1})
	cs := c.Clientset()
	owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "limited"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}}},
	}
	if _, err := cs.RbacV1().Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "limited", Namespace: "default"}},
	}
	if _, err := cs.RbacV1().RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "limited", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = tok.Status.Token
	limited := kubernetes.NewForConfigOrDie(cfg)

	ref := func(block bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(block)}}
	}
	for i, block := range []bool{false, true} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("owned-%d", i), OwnerReferences: ref(block)}}
		_, err := limited.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		switch {
		case !block && err != nil:
			t.Fatalf("owner reference without blockOwnerDeletion: %v", err)
		case block && !apierrors.IsForbidden(err):
			t.Fatalf("blockOwnerDeletion without update on configmaps/finalizers: want Forbidden, got %v", err)
		}
	}
}
