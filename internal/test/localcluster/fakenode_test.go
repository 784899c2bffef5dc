package localcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeRestartsChangedContainers changes the images of a running
// pod's regular container, init container and native sidecar at once and
// follows the pod from a watch: it must turn not Ready, then Ready again with
// every status reporting its new image, an imageID with a digest and one
// more restart, as a kubelet reports an in-place update. The pod keeps its UID.
func TestFakeNodeRestartsChangedContainers(t *testing.T) {
	c, ctx := startCluster(t, Options{FakeNodes: 1}) // no scheduler: pods name their node
	pods := c.Clientset().CoreV1().Pods(metav1.NamespaceDefault)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "inplace"},
		Spec: corev1.PodSpec{
			NodeName: "kwok-node-0",
			InitContainers: []corev1.Container{
				{Name: "init", Image: "init:1"},
				{Name: "sidecar", Image: "example.com/team/sidecar:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			},
			Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "other", Image: "other:1"}},
		},
	}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := waitPod(t, ctx, pods, created.Name, "", podutil.IsPodReady)

	patch := `{"spec":{"containers":[{"name":"app","image":"app:2"}],"initContainers":[{"name":"init","image":"init:2"},{"name":"sidecar","image":"example.com/team/sidecar@sha256:` + strings.Repeat("ab", 32) + `"}]}}`
	if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sawNotReady := false
	final := waitPod(t, ctx, pods, pod.Name, ready.ResourceVersion, func(p *corev1.Pod) bool {
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
		"init":    {"init:2", "docker.io/library/init@sha256:", 1},
		"sidecar": {"example.com/team/sidecar@sha256:" + strings.Repeat("ab", 32), "example.com/team/sidecar@sha256:" + strings.Repeat("ab", 32), 1},
	}
	statuses := append(append([]corev1.ContainerStatus(nil), final.Status.ContainerStatuses...), final.Status.InitContainerStatuses...)
	if len(statuses) != len(want) {
		t.Fatalf("%d container statuses, want %d: %+v", len(statuses), len(want), statuses)
	}
	for _, cs := range statuses {
		w := want[cs.Name]
		if cs.Image != w.image || !strings.HasPrefix(cs.ImageID, w.imageID) || cs.RestartCount != w.restarts {
			t.Errorf("container %s: image %q imageID %q restarts %d; want image %q, imageID %q..., restarts %d",
				cs.Name, cs.Image, cs.ImageID, cs.RestartCount, w.image, w.imageID, w.restarts)
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

// waitPod watches the pod from resourceVersion rv (empty: its current state)
// until done holds.
func waitPod(t *testing.T, ctx context.Context, pods interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}, name, rv string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if rv == "" {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if done(p) {
			return p
		}
		rv = p.ResourceVersion
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last *corev1.Pod
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
			if done(p) {
				return p
			}
		}
	}
	t.Fatalf("pod %s: condition not reached within 60s; last status: %+v", name, last)
	return nil
}
