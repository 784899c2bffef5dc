package sidecarset_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestNotUpdate checks updateStrategy.type NotUpdate: an image change
// leaves running pods on their sidecar image and revision, the status counts
// them as not updated and says why, and pods created afterwards are injected
// with the new image.
func TestNotUpdate(t *testing.T) {
	ns := env.Namespace(t)
	name := "keep-" + ns
	s := newSidecarSet(name, ns, "keep", "proxy:1")
	s.Spec.UpdateStrategy.Type = deckhandv1alpha1.NotUpdateSidecarSetStrategy
	createSidecarSet(t, s)

	uids := map[string]types.UID{}
	for _, p := range createPods(t, ns, "keep", "pod-%d", 2) {
		uids[p.Name] = p.UID
	}
	before := waitStatus(t, name, 60*time.Second, "2 pods matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 2 && s.Status.UpdatedReadyPods == 2
	})
	oldRevision := before.Status.LatestRevision

	s = updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" })
	newRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	waitStatus(t, name, 30*time.Second, "the new revision reported with no pod updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.LatestRevision == newRevision && s.Status.MatchedPods == 2 && s.Status.UpdatedPods == 0 &&
			c != nil && c.Reason == "NotUpdate"
	})

	// A new pod is injected with the new image. Its reconcile comes after
	// the one that saw the image change, so by the time the status counts
	// it, any update the controller would (wrongly) have made to the old
	// pods has been written.
	fresh := newPod(ns, "fresh", map[string]string{"app": "keep"})
	if err := env.Client.Create(ctxT(t), fresh); err != nil {
		t.Fatal(err)
	}
	if img := containerImage(fresh, "proxy"); img != "proxy:2" {
		t.Fatalf("a pod created after the image change was injected with %q, want proxy:2", img)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(fresh.Annotations).Revisions(name); rev != newRevision {
		t.Errorf("the new pod records revision %s, want %s", rev, newRevision)
	}
	after := waitStatus(t, name, 60*time.Second, "3 pods matched and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 3 && s.Status.ReadyPods == 3
	})
	if after.Status.UpdatedPods != 1 {
		t.Errorf("updatedPods = %d, want 1 (only the new pod): %s", after.Status.UpdatedPods, statusOf(&after))
	}
	if c := condition(after, deckhandv1alpha1.SidecarSetPodsUpdatedCondition); c == nil || c.Reason != "NotUpdate" {
		t.Errorf("PodsUpdated = %+v, want reason NotUpdate", c)
	}

	pods, err := listPods(ctxT(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		p := &pods[i]
		if p.Name == "fresh" {
			continue
		}
		if p.UID != uids[p.Name] {
			t.Errorf("pod %s was recreated: UID %s, want %s", p.Name, p.UID, uids[p.Name])
		}
		if img := containerImage(p, "proxy"); img != "proxy:1" {
			t.Errorf("pod %s: sidecar spec image %s, want proxy:1 under NotUpdate", p.Name, img)
		}
		if rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name); rev != oldRevision {
			t.Errorf("pod %s records revision %s, want the old %s", p.Name, rev, oldRevision)
		}
		if st := containerStatus(p.Status.ContainerStatuses, "proxy"); st == nil || !podutil.ImageMatches("proxy:1", *st) || st.RestartCount != 0 {
			t.Errorf("pod %s: sidecar status %+v, want proxy:1 never restarted", p.Name, st)
		}
	}
}

func containerStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}
