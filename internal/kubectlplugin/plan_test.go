package kubectlplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestPlan previews an image change of a SidecarSet over four injected
// pods, one of them not ready and one kept back by partition, and checks
// that nothing was written.
func TestPlan(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	logging := newSidecarSet(ctx, t, ns, "log", "web")
	hash, _ := sidecarcontrol.Hashes(&logging.Spec)
	var pods []*corev1.Pod
	for _, name := range []string{"web-a", "web-b", "web-c", "web-d"} {
		p := newPod(ctx, t, ns, name, map[string]string{"app": "web"}, recordOf(logging, hash), nil, "log")
		ready := corev1.ConditionTrue
		if name == "web-c" {
			ready = corev1.ConditionFalse
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		if err := e.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	newPod(ctx, t, ns, "db-a", map[string]string{"app": "db"}, nil, nil)

	next := logging.DeepCopy()
	next.APIVersion, next.Kind = deckhandv1alpha1.GroupVersion.String(), "SidecarSet"
	next.ObjectMeta = metav1.ObjectMeta{Name: next.Name}
	next.Spec.Containers[0].Image = "registry.example/log:2"
	one := intstr.FromInt32(1)
	next.Spec.UpdateStrategy.MaxUnavailable, next.Spec.UpdateStrategy.Partition = &one, &one
	manifest := writeManifest(t, next)
	nextHash, _ := sidecarcontrol.Hashes(&next.Spec)

	out := kubectlDeckhand(ctx, t, "plan", "-f", manifest)
	// web-c is not ready: it goes first, at no cost to the budget of one,
	// which web-a then uses; once updated, web-c still not ready holds the
	// budget, so web-b waits; web-d is the partition's.
	wantContains(t, out,
		"SidecarSet "+logging.Name+": revision "+nextHash+" (now at revision "+hash+"); maxUnavailable 1, partition 1; 1 step(s)",
		"1 "+ns+"/web-c UpdateInPlace",
		"1 "+ns+"/web-a UpdateInPlace",
		"- "+ns+"/web-b None waiting: maxUnavailable is used up by updated pods that are not ready",
		"- "+ns+"/web-d None kept at its revision by updateStrategy.partition",
	)
	if strings.Contains(out, "db-a") {
		t.Errorf("a pod the selector does not select is listed:\n%s", out)
	}

	var preview sidecarset.RolloutPreview
	if err := json.Unmarshal([]byte(kubectlDeckhand(ctx, t, "plan", "-f", manifest, "-o", "json")), &preview); err != nil {
		t.Fatal(err)
	}
	if preview.Revision != nextHash || len(preview.Pods) != 4 || preview.Pods[0].Name != "web-c" || preview.Pods[0].Step != 1 {
		t.Errorf("json plan: %+v", preview)
	}

	// Nothing was written.
	got := &deckhandv1alpha1.SidecarSet{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(logging), got); err != nil {
		t.Fatal(err)
	}
	if got.Generation != logging.Generation || got.Spec.Containers[0].Image != logging.Spec.Containers[0].Image {
		t.Errorf("the SidecarSet changed: generation %d, image %s", got.Generation, got.Spec.Containers[0].Image)
	}
	for _, p := range pods {
		now := &corev1.Pod{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(p), now); err != nil {
			t.Fatal(err)
		}
		if now.ResourceVersion != p.ResourceVersion {
			t.Errorf("pod %s changed", p.Name)
		}
	}
}

// TestPlanPodSet previews an image change of a PodSet of two ready pods
// with maxUnavailable 1 and no surge: one pod updated in place per sync.
func TestPlanPodSet(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	ps := testutil.PodSet(ns, "web", 2, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	ps.Spec.UpdateStrategy.MaxUnavailable, ps.Spec.UpdateStrategy.MaxSurge = &one, &zero
	testutil.Create(ctx, t, e.Client, ps)
	revision := podset.Revision(&ps.Spec.Template)
	ps.Status = deckhandv1alpha1.PodSetStatus{Replicas: 2, UpdateRevision: revision, CurrentRevision: revision}
	if err := e.Client.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}
	// The controller updates the pod Ready for the shorter time first
	// (upstream's deletion order, on a log2 scale of the time, then by
	// UID): a minute against two hours decides it; two pods made Ready a
	// moment apart would tie, and their UIDs would pick.
	readySince := map[string]time.Duration{"web-a": time.Minute, "web-b": 2 * time.Hour}
	for _, name := range []string{"web-a", "web-b"} {
		p := newPod(ctx, t, ns, name, map[string]string{"app": "web", deckhandv1alpha1.PodSetRevisionLabel: revision},
			map[string]string{deckhandv1alpha1.PodSetInPlaceHashAnnotation: podset.InPlaceHash(&ps.Spec.Template)}, ps)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-readySince[name]))}}
		if err := e.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	next := ps.DeepCopy()
	next.APIVersion, next.Kind = deckhandv1alpha1.GroupVersion.String(), "PodSet"
	next.ObjectMeta = metav1.ObjectMeta{Name: ps.Name}
	next.Status = deckhandv1alpha1.PodSetStatus{}
	next.Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
	out := kubectlDeckhand(ctx, t, "plan", "-f", writeManifest(t, next), "-n", ns)
	wantContains(t, out,
		"PodSet "+ns+"/web: revision "+podset.Revision(&next.Spec.Template)+" (now at revision "+revision+"); maxSurge 0, maxUnavailable 1, partition 0; 2 step(s)",
		"1 web-a UpdateInPlace",
		"2 web-b UpdateInPlace",
	)
}

// writeManifest writes obj as YAML to a file of the test's own and returns
// its path.
func writeManifest(t *testing.T, obj any) string {
	t.Helper()
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
