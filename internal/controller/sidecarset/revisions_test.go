package sidecarset_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/revisionhistory"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// revisionsOf lists the SidecarSet's ControllerRevisions from the API
// server, oldest revision number first.
func revisionsOf(ctx context.Context, name string) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	err := env.Client.List(ctx, list, client.InNamespace(suiteLister.RevisionNamespace()),
		client.MatchingLabels{deckhandv1alpha1.SidecarSetNameLabel: sidecarcontrol.NameLabelValue(name)})
	slices.SortFunc(list.Items, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return list.Items, err
}

// revisionNamed reads the ControllerRevision called name from the API server.
func revisionNamed(ctx context.Context, name string) (*appsv1.ControllerRevision, error) {
	cr := &appsv1.ControllerRevision{}
	return cr, env.Client.Get(ctx, client.ObjectKey{Namespace: suiteLister.RevisionNamespace(), Name: name}, cr)
}

func revisionNames(revs []appsv1.ControllerRevision) []string {
	var out []string
	for _, cr := range revs {
		out = append(out, fmt.Sprintf("%s(#%d)", cr.Name, cr.Revision))
	}
	return out
}

func hashOf(spec *deckhandv1alpha1.SidecarSetSpec) string {
	h, _ := sidecarcontrol.Hashes(spec)
	return h
}

// The history keeps a ControllerRevision per revision, owned by the
// SidecarSet, labelled with its name, revision and custom version, and
// prunes it down to revisionHistoryLimit, never a revision a pod carries.
func TestRevisionHistoryLimitKeepsRevisionsInUse(t *testing.T) {
	sc := newScenario(t, "hist", func(s *deckhandv1alpha1.SidecarSet) {
		s.Labels = map[string]string{deckhandv1alpha1.SidecarSetCustomVersionLabel: "v1"}
		s.Spec.RevisionHistoryLimit = ptr.To[int32](3)
		// Running pods keep the revision they were created with.
		s.Spec.UpdateStrategy.Type = deckhandv1alpha1.NotUpdateSidecarSetStrategy
	})
	first := sc.waitStatus(time.Minute, "the first revision is recorded", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevisionName != ""
	})
	h1 := first.Status.LatestRevision
	if want := revisionhistory.Name(sc.name, h1); first.Status.LatestRevisionName != want {
		t.Fatalf("latestRevisionName = %s, want %s", first.Status.LatestRevisionName, want)
	}
	cr, err := revisionNamed(ctxT(t), first.Status.LatestRevisionName)
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(cr)
	if ref == nil || ref.UID != first.UID || ref.Kind != "SidecarSet" {
		t.Fatalf("ControllerRevision %s is controlled by %+v, want the SidecarSet", cr.Name, ref)
	}
	if cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel] != h1 || cr.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] != "v1" {
		t.Fatalf("ControllerRevision labels = %v, want revision %s and custom version v1", cr.Labels, h1)
	}
	spec, err := sidecarcontrol.DecodeRevision(cr)
	if err != nil || len(spec.Containers) != 1 || spec.Containers[0].Image != "proxy:1" {
		t.Fatalf("ControllerRevision data = %+v (%v), want the proxy:1 container", spec, err)
	}

	// A pod on the first revision, which NotUpdate never moves.
	pod := sc.create(sc.pod("old"))
	if rev, _ := sidecarcontrol.ReadPodRecord(pod.Annotations).Revisions(sc.name); rev != h1 {
		t.Fatalf("pod revision %s, want %s", rev, h1)
	}

	var latest string
	for i := 2; i <= 6; i++ {
		s := sc.update(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = fmt.Sprintf("proxy:%d", i)
			s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] = fmt.Sprintf("v%d", i)
		})
		latest = hashOf(&s.Spec)
		sc.waitStatus(time.Minute, "the new revision is recorded", func(s *deckhandv1alpha1.SidecarSet) bool {
			return s.Status.LatestRevision == latest && s.Status.LatestRevisionName == revisionhistory.Name(sc.name, latest)
		})
	}
	var revs []appsv1.ControllerRevision
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		revs, err = revisionsOf(ctx, sc.name)
		return len(revs) == 3, err
	}, "3 ControllerRevisions remain (have %v)", lazy(func() any { return revisionNames(revs) }))
	got := revisionNames(revs)
	want := []string{}
	for _, cr := range revs {
		want = append(want, cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel])
	}
	// Kept: the one the pod carries (oldest), and the two newest.
	if want[0] != h1 || want[2] != latest {
		t.Fatalf("remaining revisions %v: want the pod's %s first and the latest %s last", got, h1, latest)
	}
	if revs[2].Revision != 6 || revs[1].Revision != 5 {
		t.Fatalf("remaining revisions %v: want numbers 1, 5, 6", got)
	}
	if v := revs[2].Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel]; v != "v6" {
		t.Fatalf("latest ControllerRevision custom version %q, want v6", v)
	}
}

// A ControllerRevision of another owner under the latest revision's name
// is a collision: collisionCount goes up, the revision gets another name,
// and the other object is left alone.
func TestRevisionNameCollision(t *testing.T) {
	ns := env.Namespace(t)
	s := newSidecarSet("coll-"+ns, ns, "coll", "proxy:1")
	// The revision of the spec as stored: defaulted by the webhook.
	dry := s.DeepCopy()
	if err := env.Client.Create(ctxT(t), dry, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	hash := hashOf(&dry.Spec)
	squatter := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: suiteLister.RevisionNamespace(), Name: revisionhistory.Name(s.Name, hash)},
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
		Revision:   1,
	}
	if err := env.Client.Create(ctxT(t), squatter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), squatter) })
	createSidecarSet(t, s)
	st := waitStatus(t, s.Name, time.Minute, "the collision is counted", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.CollisionCount != nil && *s.Status.CollisionCount == 1 && s.Status.LatestRevisionName != ""
	})
	want := revisionhistory.Name(s.Name, sidecarcontrol.RevisionNameHash(hash, ptr.To[int32](1)))
	if st.Status.LatestRevisionName != want || st.Status.LatestRevision != hash {
		t.Fatalf("latestRevisionName %s, latestRevision %s; want %s and the unchanged hash %s", st.Status.LatestRevisionName, st.Status.LatestRevision, want, hash)
	}
	if got, err := revisionNamed(ctxT(t), squatter.Name); err != nil || len(got.OwnerReferences) != 0 {
		t.Fatalf("the other ControllerRevision was changed or removed: %+v, %v", got.OwnerReferences, err)
	}
	revs, err := revisionsOf(ctxT(t), s.Name)
	if err != nil || len(revs) != 1 || revs[0].Name != want {
		t.Fatalf("the SidecarSet's ControllerRevisions are %v (%v), want just %s", revisionNames(revs), err, want)
	}
}

// A pod created while injectionStrategy.revision pins an older revision
// gets that revision's image and records its hash; the rollout then treats
// it as a pod behind the latest revision.
func TestPinnedRevisionInjection(t *testing.T) {
	sc := newScenario(t, "pin", func(s *deckhandv1alpha1.SidecarSet) {
		s.Labels = map[string]string{deckhandv1alpha1.SidecarSetCustomVersionLabel: "stable"}
	})
	first := sc.waitStatus(time.Minute, "the first revision is recorded", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevisionName != ""
	})
	h1, rev1 := first.Status.LatestRevision, first.Status.LatestRevisionName

	// Image 2, new pods pinned to the stable version, the rollout paused.
	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] = "canary"
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("stable")}
	})
	h2 := hashOf(&s.Spec)
	sc.waitStatus(time.Minute, "the pin is found", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetInjectionRevisionFoundCondition)
		return s.Status.LatestRevision == h2 && c != nil && c.Status == metav1.ConditionTrue
	})
	waitCached(t, sc.name, s.Generation)
	pinned := sc.create(sc.pod("pinned"))
	if img := containerImage(pinned, "proxy"); img != "proxy:1" {
		t.Fatalf("pod created while pinned has proxy %s, want the pinned proxy:1", img)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(pinned.Annotations).Revisions(sc.name); rev != h1 {
		t.Fatalf("pod created while pinned records revision %s, want the pinned %s", rev, h1)
	}
	sc.waitStatus(time.Minute, "the pinned pod counts as not updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.UpdatedPods == 0
	})

	// The same pin by name.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To(rev1)}
	})
	s = sc.waitStatus(time.Minute, "the pin by name is found", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetInjectionRevisionFoundCondition)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	waitCached(t, sc.name, s.Generation)
	if img := containerImage(sc.create(sc.pod("byname")), "proxy"); img != "proxy:1" {
		t.Fatalf("pod created while pinned by name has proxy %s, want proxy:1", img)
	}

	// A pin to a revision that does not exist is refused.
	err := env.Client.Update(ctxT(t), func() *deckhandv1alpha1.SidecarSet {
		cur, _ := getSidecarSet(ctxT(t), sc.name)
		cur.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("nope")}
		return cur
	}())
	if err == nil || !containsAll(err.Error(), "spec.injectionStrategy.revision.customVersion", "nope") {
		t.Fatalf("pinning a custom version no revision carries: %v, want a refusal naming the field", err)
	}

	// Unpinned: new pods get the latest; resuming moves the pinned ones.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = nil
		s.Spec.UpdateStrategy.Paused = false
	})
	sc.waitStatus(2*time.Minute, "every pod reaches the latest revision", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 2 && s.Status.UpdatedPods == 2 &&
			condition(s, deckhandv1alpha1.SidecarSetInjectionRevisionFoundCondition) == nil
	})
	if img := sc.podImage("pinned", "proxy"); img != "proxy:2" {
		t.Fatalf("the pinned pod has proxy %s after the rollout, want proxy:2", img)
	}
}

// A canary: policy Partial with a partition gives new pods the pinned
// (stable) revision while fewer than partition pods are behind the latest,
// the latest otherwise, and the rollout keeps partition pods behind.
func TestPinnedRevisionPartialCanary(t *testing.T) {
	sc := newScenario(t, "canary")
	first := sc.waitStatus(time.Minute, "the first revision is recorded", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevisionName != ""
	})
	h1, rev1 := first.Status.LatestRevision, first.Status.LatestRevisionName
	sc.create(sc.pod("a"))
	sc.waitStatus(time.Minute, "pod a is matched and updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.UpdatedPods == 1
	})
	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Partition = podCount(1)
		s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{
			RevisionName: ptr.To(rev1), Policy: deckhandv1alpha1.PartialInjectRevision}
	})
	h2 := hashOf(&s.Spec)
	// Pod a stays on the stable revision: partition 1.
	s = sc.waitStatus(time.Minute, "the partition holds pod a back", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.LatestRevision == h2 && s.Status.MatchedPods == 1 && s.Status.UpdatedPods == 0 && c != nil && c.Reason == "UpdateHeld"
	})
	waitCachedStatus(t, sc.name, "pod a matched at the latest generation", func(c *deckhandv1alpha1.SidecarSet) bool {
		return c.Status.ObservedGeneration == s.Generation && c.Status.MatchedPods == 1
	})
	// One pod behind already: the canary pod b gets the latest.
	b := sc.create(sc.pod("b"))
	if img, rev := containerImage(b, "proxy"), recorded(b, sc.name); img != "proxy:2" || rev != h2 {
		t.Fatalf("pod b: proxy %s at %s, want the latest proxy:2 at %s (partition 1 is taken by pod a)", img, rev, h2)
	}
	// Partition 2: the next new pod gets the stable revision.
	s = sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = podCount(2) })
	sc.waitStatus(time.Minute, "a held back, b updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 2 && s.Status.UpdatedPods == 1
	})
	waitCachedStatus(t, sc.name, "pod b updated and pod a held back at the latest generation", func(c *deckhandv1alpha1.SidecarSet) bool {
		return c.Status.ObservedGeneration == s.Generation && c.Status.MatchedPods == 2 && c.Status.UpdatedPods == 1
	})
	c := sc.create(sc.pod("c"))
	if img, rev := containerImage(c, "proxy"), recorded(c, sc.name); img != "proxy:1" || rev != h1 {
		t.Fatalf("pod c: proxy %s at %s, want the stable proxy:1 at %s (one pod behind, partition 2)", img, rev, h1)
	}
	// The rollout keeps two pods behind; partition 0 moves them all.
	sc.waitStatus(time.Minute, "a and c held back", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 3 && s.Status.UpdatedPods == 1
	})
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = nil })
	sc.waitStatus(2*time.Minute, "every pod updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 3 && s.Status.UpdatedPods == 3
	})
}

func recorded(p *corev1.Pod, set string) string {
	rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(set)
	return rev
}
