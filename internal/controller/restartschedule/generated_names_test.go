package restartschedule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func newStatefulSet(ns, name string, annotations map[string]string) *appsv1.StatefulSet {
	// Pods of a StatefulSet and a Deployment of the same name must not
	// share labels, or each would count the other's pods.
	sel := map[string]string{"app": name + "-sts"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func stsRestartedAt(t *testing.T, ns, name string) string {
	t.Helper()
	s := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
}

func waitGenerated(t *testing.T, ns, name string) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	var rs *deckhandv1alpha1.RestartSchedule
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		rs, err = getRS(ctx, ns, name)
		return err == nil, client.IgnoreNotFound(err)
	}, "RestartSchedule %s/%s is generated", ns, name)
	return rs
}

// A Deployment and a StatefulSet with the same name, both annotated, each
// get a RestartSchedule of their own, named <workload>-<kind>, and each
// schedule restarts only its own workload.
func TestIntegrationGeneratedNamesDoNotCollideAcrossKinds(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	const never = "0 3 1 1 *"
	create(t, newDeployment(ns, "web", 1, nil, map[string]string{deckhandv1alpha1.RestartScheduleAnnotation: "@every 3s"}))
	create(t, newStatefulSet(ns, "web", map[string]string{deckhandv1alpha1.RestartScheduleAnnotation: never}))

	dep := getDeploy(t, ns, "web")
	for name, want := range map[string]string{"web-deployment": "Deployment", "web-statefulset": "StatefulSet"} {
		rs := waitGenerated(t, ns, name)
		if r := rs.Spec.Target.TargetRef; r == nil || r.Kind != want || r.Name != "web" {
			t.Fatalf("%s targets %+v, want %s/web", name, rs.Spec.Target, want)
		}
		owner := metav1.GetControllerOf(rs)
		if owner == nil || owner.Kind != want || owner.Name != "web" {
			t.Fatalf("%s is controlled by %+v, want %s/web", name, owner, want)
		}
		if want == "Deployment" && owner.UID != dep.UID {
			t.Fatalf("%s is controlled by UID %s, not the Deployment's %s", name, owner.UID, dep.UID)
		}
	}

	// The Deployment's schedule fires; the StatefulSet's does not.
	waitHistory(t, ns, "web-deployment", "Succeeded for Deployment/web", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "Deployment/web" && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	if v := stsRestartedAt(t, ns, "web"); v != "" {
		t.Fatalf("the Deployment's schedule restarted the StatefulSet too (%q)", v)
	}

	// Swap: the Deployment's schedule stops firing, the StatefulSet's fires.
	patchDeploy(t, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, deckhandv1alpha1.RestartScheduleAnnotation, never))
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		rs, err := getRS(ctx, ns, "web-deployment")
		return err == nil && rs.Spec.Schedule == never && rs.Status.ObservedGeneration == rs.Generation &&
			len(rs.Status.Active)+len(rs.Status.Pending) == 0, err
	}, "the Deployment's schedule no longer fires and its last run is over")
	depSlot := getDeploy(t, ns, "web").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := env.Client.Patch(ctx(t), sts, client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"@every 3s"}}}`, deckhandv1alpha1.RestartScheduleAnnotation))); err != nil {
		t.Fatal(err)
	}
	rs := waitHistory(t, ns, "web-statefulset", "Succeeded for StatefulSet/web", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "StatefulSet/web" && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	for _, h := range rs.Status.History {
		if h.Workload != "" && h.Workload != "StatefulSet/web" {
			t.Fatalf("the StatefulSet's schedule recorded %+v", h)
		}
	}
	if v := stsRestartedAt(t, ns, "web"); v == "" {
		t.Fatalf("the StatefulSet was not restarted")
	}
	if v := getDeploy(t, ns, "web").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; v != depSlot {
		t.Fatalf("the StatefulSet's schedule restarted the Deployment too (%q, was %q)", v, depSlot)
	}
	dh, err := getRS(ctx(t), ns, "web-deployment")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range dh.Status.History {
		if h.Workload != "" && h.Workload != "Deployment/web" {
			t.Fatalf("the Deployment's schedule recorded %+v", h)
		}
	}
}

// A RestartSchedule an earlier Deckhand generated under the workload's bare
// name is replaced by <workload>-<kind>: the user's edits carry over, the
// old object is deleted, and no slot is restarted once per object.
func TestIntegrationGeneratedUnderOldNameIsReplaced(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	const value = "@every 3s"
	// What an earlier version left: the workload, annotated and marked as
	// generated from its annotation value, and the object under the bare
	// name, owned by the workload. The workload comes first (it needs a UID
	// for the owner reference); until the old object exists, the marker
	// reads as "deleted on purpose" and nothing is generated.
	create(t, newDeployment(ns, "api", 1, nil, map[string]string{
		deckhandv1alpha1.RestartScheduleAnnotation:          value,
		deckhandv1alpha1.RestartScheduleGeneratedAnnotation: value,
	}))
	dep := getDeploy(t, ns, "api")
	w, err := watchDeployments(ctx(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// generations[v] is every generation of Deployment api seen with the
	// restarted-at value v: two means a second patch for the slot.
	generations := make(chan map[string]map[int64]bool, 1)
	go func() {
		g := map[string]map[int64]bool{}
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && d.Name == "api" {
				if v := d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; v != "" {
					if g[v] == nil {
						g[v] = map[int64]bool{}
					}
					g[v][d.Generation] = true
				}
			}
		}
		generations <- g
	}()
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api",
			Labels: map[string]string{
				deckhandv1alpha1.LabelManagedBy:                deckhandv1alpha1.ManagedByValue,
				deckhandv1alpha1.RestartScheduleGeneratedLabel: "true",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", UID: dep.UID, Controller: ptr.To(true)}},
		},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: value, HistoryLimit: 7,
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "api"}}},
	})
	// A user's schedule of the bare name of another workload is not
	// touched: it is neither labelled as generated nor owned.
	create(t, newDeployment(ns, "jobs", 1, nil, nil))
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"},
		Spec:       deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 3 1 1 *", Target: targetRef("jobs")},
	})
	patchDeploy(t, ns, "jobs", fmt.Sprintf(`{"metadata":{"annotations":{%q:"0 4 1 1 *"}}}`, deckhandv1alpha1.RestartScheduleAnnotation))

	rs := waitGenerated(t, ns, "api-deployment")
	if rs.Spec.HistoryLimit != 7 || rs.Spec.Schedule != value || !metav1.IsControlledBy(rs, dep) {
		t.Fatalf("the replacement does not carry the old object's spec and owner: %+v, owners %+v", rs.Spec, rs.OwnerReferences)
	}
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := getRS(ctx, ns, "api")
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "the RestartSchedule generated under the old name is deleted")
	waitGenerated(t, ns, "jobs-deployment")
	if user, err := getRS(ctx(t), ns, "jobs"); err != nil || user.Spec.Schedule != "0 3 1 1 *" {
		t.Fatalf("a user's RestartSchedule of the workload's bare name was touched: %v", err)
	}
	waitHistory(t, ns, "api-deployment", "Succeeded for Deployment/api", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "Deployment/api" && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	w.Stop()
	for v, gens := range <-generations {
		if len(gens) != 1 {
			t.Errorf("Deployment api was patched %d times for the slot %s", len(gens), v)
		}
	}
}
