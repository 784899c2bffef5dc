package restartschedule_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func TestIntegrationAnnotationLifecycle(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	c := ctx(t)

	// A cron value: the annotation owns spec.schedule (and the time zone
	// annotation spec.timeZone).
	create(t, newDeployment(ns, "cron", 1, nil, map[string]string{
		deckhandv1alpha1.RestartScheduleAnnotation: "30 2 * * *",
		deckhandv1alpha1.RestartTimeZoneAnnotation: "Europe/Paris",
	}))
	// "true": the manager's default schedule, owned by the user afterwards.
	create(t, newDeployment(ns, "default", 1, nil, map[string]string{deckhandv1alpha1.RestartScheduleAnnotation: "true"}))
	// No annotation: never touched.
	create(t, newDeployment(ns, "plain", 1, nil, map[string]string{"unrelated": "x"}))

	gen := waitGenerated(t, ns, "cron-deployment")
	dep := getDeploy(t, ns, "cron")
	if gen.Spec.Schedule != "30 2 * * *" || gen.Spec.TimeZone != "Europe/Paris" {
		t.Fatalf("generated spec %+v", gen.Spec)
	}
	if gen.Labels[deckhandv1alpha1.RestartScheduleGeneratedLabel] != "true" || !metav1.IsControlledBy(gen, dep) {
		t.Fatalf("generated object not labelled/owned: labels %v owners %v", gen.Labels, gen.OwnerReferences)
	}
	if r := gen.Spec.Target.TargetRef; r == nil || r.Kind != "Deployment" || r.Name != "cron" {
		t.Fatalf("target %+v", gen.Spec.Target)
	}
	def := waitRS(t, ns, "default-deployment", 30*time.Second, `the "true" annotation generates it with the default schedule`, func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Spec.Schedule == testDefaultSchedule
	})

	// User edits: a field the annotation does not set (historyLimit) on the
	// cron one, and the schedule of the "true" one.
	patchRS(t, ns, "cron-deployment", `{"spec":{"historyLimit":3}}`)
	patchRS(t, ns, "default-deployment", `{"spec":{"schedule":"15 4 * * *"}}`)

	// Changing the annotation updates the generated object and keeps the
	// user's edit.
	patchDeploy(t, ns, "cron", fmt.Sprintf(`{"metadata":{"annotations":{%q:"0 5 * * 1-5"}}}`, deckhandv1alpha1.RestartScheduleAnnotation))
	waitRS(t, ns, "cron-deployment", 30*time.Second, "the annotation change reaches spec.schedule and the user's historyLimit is kept", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Spec.Schedule == "0 5 * * 1-5" && rs.Spec.HistoryLimit == 3 && rs.Spec.TimeZone == "Europe/Paris"
	})
	// A change of the "true" workload's annotations does not take the
	// schedule back from the user.
	patchDeploy(t, ns, "default", `{"metadata":{"annotations":{"touched":"1"}}}`)
	consistently(t, 2*time.Second, func(ctx context.Context) error {
		rs, err := getRS(ctx, ns, "default-deployment")
		if err == nil && rs.Spec.Schedule != "15 4 * * *" {
			return fmt.Errorf("the user's schedule was overwritten: %q", rs.Spec.Schedule)
		}
		return err
	})

	// A user deleting the generated object is not fought: it stays deleted
	// until the annotation changes.
	if err := env.Client.Delete(c, def); err != nil {
		t.Fatal(err)
	}
	patchDeploy(t, ns, "default", `{"metadata":{"annotations":{"touched":"2"}}}`)
	consistently(t, 2*time.Second, func(ctx context.Context) error {
		if _, err := getRS(ctx, ns, "default-deployment"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the deleted generated object came back (err %v)", err)
		}
		return nil
	})
	patchDeploy(t, ns, "default", fmt.Sprintf(`{"metadata":{"annotations":{%q:"0 6 * * *"}}}`, deckhandv1alpha1.RestartScheduleAnnotation))
	waitRS(t, ns, "default-deployment", 30*time.Second, "a new annotation value generates the object again", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Spec.Schedule == "0 6 * * *"
	})

	// Removing the annotation deletes the generated object.
	patchDeploy(t, ns, "cron", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, deckhandv1alpha1.RestartScheduleAnnotation))
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := getRS(ctx, ns, "cron-deployment")
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "removing the annotation deletes the generated RestartSchedule")
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cron"}, d)
		_, marked := d.Annotations[deckhandv1alpha1.RestartScheduleGeneratedAnnotation]
		return err == nil && !marked, err
	}, "the generated marker leaves the workload with the annotation")

	// The workload without the annotation: no RestartSchedule, and Deckhand
	// never wrote to it.
	if _, err := getRS(c, ns, "plain-deployment"); !apierrors.IsNotFound(err) {
		t.Fatalf("a RestartSchedule exists for the unannotated Deployment (err %v)", err)
	}
	plain := testutil.Get(c, t, env.Client, types.NamespacedName{Namespace: ns, Name: "plain"}, &appsv1.Deployment{})
	for _, mf := range plain.ManagedFields {
		if mf.Manager == deckhandv1alpha1.FieldManager {
			t.Fatalf("Deckhand wrote to a Deployment without the annotation: %+v", mf)
		}
	}
}

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
	s := testutil.Get(ctx(t), t, env.Client, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.StatefulSet{})
	return s.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
}

func waitGenerated(t *testing.T, ns, name string) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	return waitRS(t, ns, name, 30*time.Second, "is generated", func(*deckhandv1alpha1.RestartSchedule) bool { return true })
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
	waitRS(t, ns, "web-deployment", 30*time.Second, "the Deployment's schedule no longer fires and its last run is over", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Spec.Schedule == never && rs.Status.ObservedGeneration == rs.Generation && len(rs.Status.Active)+len(rs.Status.Pending) == 0
	})
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
				deckhandv1alpha1.ManagedByLabel:                deckhandv1alpha1.ManagedByValue,
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

func TestIntegrationRestartOnSchedule(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	c := ctx(t)
	create(t, newDeployment(ns, "web", 3, nil, nil))
	before := waitRolledOut(t, ns, "web")
	oldPods := podNames(t, ns, "web")

	// Watch the Deployment from now on: the lowest availableReplicas seen
	// during the restart shows the rollout kept to maxUnavailable 1.
	w, err := watchDeployments(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	minAvailable := make(chan int32, 1)
	go func() {
		lowest := int32(3)
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] != "" && d.Status.AvailableReplicas < lowest {
				lowest = d.Status.AvailableReplicas
			}
		}
		minAvailable <- lowest
	}()

	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec:       deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 5s", Target: targetRef("web"), HistoryLimit: 50},
	})
	rs := waitHistory(t, ns, "nightly", "a Succeeded restart of Deployment/web", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSucceeded && h.Workload == "Deployment/web"
	})
	w.Stop()
	if low := <-minAvailable; low < 2 {
		t.Fatalf("availableReplicas fell to %d during the restart: the rollout did not keep to maxUnavailable 1", low)
	}
	var first deckhandv1alpha1.RestartRecord
	for _, h := range rs.Status.History {
		if h.Result == deckhandv1alpha1.RestartSucceeded {
			first = h
		}
	}
	created := rs.CreationTimestamp.Time
	if !first.ScheduledTime.After(created) {
		t.Fatalf("the first run's slot %s is not after the creation %s", first.ScheduledTime, created)
	}
	if rs.Status.LastScheduleTime == nil || rs.Status.LastSuccessfulTime == nil || rs.Status.NextScheduleTime == nil {
		t.Fatalf("status times not set: %+v", rs.Status)
	}

	// Every pod was replaced through a new ReplicaSet (the template
	// annotation changed), with the restart's slot on the template.
	after := waitRolledOut(t, ns, "web")
	if after.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] == "" || after.Generation <= before.Generation {
		t.Fatalf("the template was not restarted: %v", after.Spec.Template.Annotations)
	}
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		for p := range podNames(t, ns, "web") {
			if oldPods[p] {
				return false, nil
			}
		}
		return true, nil
	}, "every pod that existed before the restart has been replaced")

	// The patch was Deckhand's, through its field manager.
	found := false
	for _, mf := range after.ManagedFields {
		if mf.Manager == deckhandv1alpha1.FieldManager && strings.Contains(mf.FieldsV1.GetRawString(), deckhandv1alpha1.RestartedAtAnnotation) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no %q managed-fields entry owns the restarted-at annotation", deckhandv1alpha1.FieldManager)
	}
}

func TestIntegrationPausedDeploymentSkipped(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	d := newDeployment(ns, "paused", 1, nil, nil)
	d.Spec.Paused = true
	create(t, d)
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		Spec:       deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 2s", Target: targetRef("paused")},
	})
	rs := waitHistory(t, ns, "s", "a Skipped run", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSkipped
	})
	h := rs.Status.History[len(rs.Status.History)-1]
	if h.Workload != "Deployment/paused" || !strings.Contains(h.Message, "paused") {
		t.Fatalf("skip entry %+v does not give the reason", h)
	}
	if a := getDeploy(t, ns, "paused").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; a != "" {
		t.Fatalf("a paused Deployment was patched: %q", a)
	}
}

// A selector over 3 Deployments with maxConcurrent 1: each one is patched
// only after the previous one's rollout completed. The proof comes from one
// watch on the namespace's Deployments, whose events arrive in etcd
// revision order.
func TestIntegrationSelectorRestartsOneAfterAnother(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	c := ctx(t)
	labels := map[string]string{"tier": "web"}
	for _, n := range []string{"a", "b", "c"} {
		create(t, newDeployment(ns, n, 2, labels, nil))
	}
	create(t, newDeployment(ns, "other", 1, nil, nil))
	for _, n := range []string{"a", "b", "c"} {
		waitRolledOut(t, ns, n)
	}

	w, err := watchDeployments(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type step struct{ name, what string }
	steps := make(chan step, 100)
	go func() {
		defer close(steps)
		patched, done := map[string]bool{}, map[string]bool{}
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] == "" {
				continue
			}
			if !patched[d.Name] {
				patched[d.Name] = true
				steps <- step{d.Name, "patched"}
			}
			if !done[d.Name] && rolledOut(d) && d.Status.AvailableReplicas == *d.Spec.Replicas {
				done[d.Name] = true
				steps <- step{d.Name, "done"}
			}
		}
	}()

	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 4s", HistoryLimit: 100, MaxConcurrent: 1,
			Target: deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	})

	var seq []string
	timeout := time.After(90 * time.Second)
	for len(seq) < 6 {
		select {
		case s := <-steps:
			seq = append(seq, s.name+" "+s.what)
		case <-timeout:
			t.Fatalf("timed out; saw %v", seq)
		}
	}
	want := []string{"a patched", "a done", "b patched", "b done", "c patched", "c done"}
	if strings.Join(seq, ",") != strings.Join(want, ",") {
		t.Fatalf("restart order %v, want %v (one at a time)", seq, want)
	}

	// The recorded history tells the same story for the run's slot.
	rs := waitHistory(t, ns, "fleet", "Succeeded for Deployment/c", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "Deployment/c" && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	var run []deckhandv1alpha1.RestartRecord
	var slot metav1.Time
	for _, h := range rs.Status.History {
		if h.Workload == "Deployment/c" && h.Result == deckhandv1alpha1.RestartSucceeded {
			slot = h.ScheduledTime
		}
	}
	for _, h := range rs.Status.History {
		if h.ScheduledTime.Equal(&slot) && h.Workload != "" {
			run = append(run, h)
		}
	}
	// History is newest first, in the order results were recorded:
	// reversed, it is the order the workloads completed.
	slices.Reverse(run)
	if len(run) != 3 {
		t.Fatalf("run of %s has %d workload entries, want 3: %+v", slot, len(run), run)
	}
	for i := 1; i < len(run); i++ {
		if run[i].StartTime.Before(run[i-1].CompletionTime) {
			t.Fatalf("%s started at %s before %s completed at %s", run[i].Workload, run[i].StartTime, run[i-1].Workload, run[i-1].CompletionTime)
		}
	}
	if a := getDeploy(t, ns, "other").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; a != "" {
		t.Fatalf("a Deployment outside the selector was restarted")
	}
}

// A manager stopped across fire times runs only the latest missed slot,
// once, when it starts again; a second stop/start in the middle of that
// restart does not patch again.
func TestIntegrationMissedSlotRunsOnceAfterManagerRestart(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	createRolledOut(t, newDeployment(ns, "web", 2, nil, nil))
	const period = 10 * time.Second
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		Spec:       deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 10s", Target: targetRef("web"), HistoryLimit: 50},
	})
	rs := waitRS(t, ns, "s", 30*time.Second, "the schedule has a next time", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Status.NextScheduleTime != nil
	})
	env.StopManager()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_, _ = env.StartManager()
		}
	})
	created := rs.CreationTimestamp.Time
	missed1, missed2 := created.Add(period), created.Add(2*period)
	// Stay down across two fire times.
	for time.Now().Before(missed2.Add(1500 * time.Millisecond)) {
		time.Sleep(200 * time.Millisecond)
	}
	if a := getDeploy(t, ns, "web").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; a != "" {
		t.Fatalf("restarted while the manager was down: %q", a)
	}
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	slot := missed2.UTC().Format(time.RFC3339)
	var gen int64
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		d := getDeploy(t, ns, "web")
		gen = d.Generation
		return d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] == slot, nil
	}, "the latest missed slot %s runs on start", slot)

	// Stop and start again in the middle of that restart.
	env.StopManager()
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	rs = waitHistory(t, ns, "s", "Succeeded for the missed slot", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.ScheduledTime.UTC().Format(time.RFC3339) == slot && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	count := 0
	for _, h := range rs.Status.History {
		if h.ScheduledTime.Time.Equal(missed1) {
			t.Fatalf("the older missed slot %s was run too: %+v", missed1, h)
		}
		if h.ScheduledTime.UTC().Format(time.RFC3339) == slot {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("slot %s recorded %d times, want once: %+v", slot, count, rs.Status.History)
	}
	// Patched once for the slot: the generation is the one the first patch
	// produced, unless a later slot has since restarted it (with a later value).
	d := getDeploy(t, ns, "web")
	if d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] == slot && d.Generation != gen {
		t.Fatalf("generation moved from %d to %d with the same slot: patched twice", gen, d.Generation)
	}
}

// Invalid RestartSchedules are refused by the real API server (CRD schema,
// CEL and the validating webhook), each with a message naming the field.
func TestIntegrationValidation(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	valid := func() map[string]any {
		return map[string]any{
			"schedule": "0 3 * * *",
			"target":   map[string]any{"targetRef": map[string]any{"kind": "Deployment", "name": "web"}},
		}
	}
	cases := map[string]struct {
		mutate func(spec map[string]any)
		field  string
		msg    string
	}{
		"cron syntax":       {func(s map[string]any) { s["schedule"] = "61 * * * *" }, "spec.schedule", "above maximum"},
		"too few fields":    {func(s map[string]any) { s["schedule"] = "0 3 * *" }, "spec.schedule", "expected exactly 5 fields"},
		"never fires":       {func(s map[string]any) { s["schedule"] = "0 0 31 2 *" }, "spec.schedule", "never fires"},
		"every below 1s":    {func(s map[string]any) { s["schedule"] = "@every 10ms" }, "spec.schedule", "at least 1s"},
		"zone in schedule":  {func(s map[string]any) { s["schedule"] = "CRON_TZ=UTC 0 3 * * *" }, "spec.schedule", "timeZone"},
		"empty schedule":    {func(s map[string]any) { s["schedule"] = "" }, "spec.schedule", ""},
		"unknown time zone": {func(s map[string]any) { s["timeZone"] = "Mars/Olympus_Mons" }, "spec.timeZone", "unknown time zone"},
		"both targets":      {func(s map[string]any) { s["target"].(map[string]any)["selector"] = map[string]any{} }, "spec.target", "exactly one of targetRef or selector"},
		"no target":         {func(s map[string]any) { s["target"] = map[string]any{} }, "spec.target", "exactly one of targetRef or selector"},
		"kind": {func(s map[string]any) {
			s["target"] = map[string]any{"targetRef": map[string]any{"kind": "Pod", "name": "x"}}
		}, "spec.target.targetRef.kind", "Unsupported value"},
		"target name": {func(s map[string]any) {
			s["target"] = map[string]any{"targetRef": map[string]any{"kind": "Deployment", "name": ""}}
		}, "spec.target.targetRef.name", ""},
		"selector operator": {func(s map[string]any) {
			s["target"] = map[string]any{"selector": map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Near"}}}}
		}, "spec.target.selector", "operator"},
		"max concurrent":     {func(s map[string]any) { s["maxConcurrent"] = int64(0) }, "spec.maxConcurrent", "1"},
		"history limit 0":    {func(s map[string]any) { s["historyLimit"] = int64(0) }, "spec.historyLimit", "1"},
		"history limit 101":  {func(s map[string]any) { s["historyLimit"] = int64(101) }, "spec.historyLimit", "100"},
		"starting deadline":  {func(s map[string]any) { s["startingDeadlineSeconds"] = int64(0) }, "spec.startingDeadlineSeconds", "1"},
		"zero timeout":       {func(s map[string]any) { s["rolloutTimeout"] = "0s" }, "spec.rolloutTimeout", "positive"},
		"negative timeout":   {func(s map[string]any) { s["rolloutTimeout"] = "-5m" }, "spec.rolloutTimeout", "positive"},
		"concurrency policy": {func(s map[string]any) { s["concurrencyPolicy"] = "Allow" }, "spec.concurrencyPolicy", "Unsupported value"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := valid()
			tc.mutate(spec)
			err := env.Client.Create(ctx(t), unstructuredRS(ns, "invalid", spec))
			if err == nil {
				t.Fatalf("accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not name %s (with %q)", err, tc.field, tc.msg)
			}
		})
	}

	// A valid one is accepted and defaulted.
	if err := env.Client.Create(ctx(t), unstructuredRS(ns, "ok", valid())); err != nil {
		t.Fatalf("a valid RestartSchedule was refused: %v", err)
	}
	rs, err := getRS(ctx(t), ns, "ok")
	if err != nil {
		t.Fatal(err)
	}
	s := rs.Spec
	if s.TimeZone != "UTC" || s.ConcurrencyPolicy != deckhandv1alpha1.RestartForbid || s.MaxConcurrent != 1 || s.HistoryLimit != 10 ||
		s.RolloutTimeout == nil || s.RolloutTimeout.Duration != 10*time.Minute {
		t.Fatalf("defaults not applied: %+v", s)
	}
	// An update that breaks the schedule is refused too.
	err = env.Client.Patch(ctx(t), rs, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schedule":"0 0 30 2 *"}}`)))
	if err == nil || !strings.Contains(err.Error(), "spec.schedule") {
		t.Fatalf("update to a never-firing schedule: %v", err)
	}
}

// StatefulSets and DaemonSets restart and are followed to completion too; the
// StatefulSet opts in by annotation only.
func TestIntegrationStatefulSetAndDaemonSet(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	podTemplate := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
	}
	create(t, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: map[string]string{deckhandv1alpha1.RestartScheduleAnnotation: "@every 3s"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: podTemplate("db"),
		},
	})
	create(t, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: podTemplate("agent"),
		},
	})
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 3s",
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "DaemonSet", Name: "agent"}}},
	})
	for name, workload := range map[string]string{"db-statefulset": "StatefulSet/db", "agent": "DaemonSet/agent"} {
		waitHistory(t, ns, name, "a Succeeded restart of "+workload, func(h deckhandv1alpha1.RestartRecord) bool {
			return h.Workload == workload && h.Result == deckhandv1alpha1.RestartSucceeded
		})
	}
	sts := testutil.Get(ctx(t), t, env.Client, types.NamespacedName{Namespace: ns, Name: "db"}, &appsv1.StatefulSet{})
	if sts.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] == "" {
		t.Fatalf("StatefulSet template not restarted: %v", sts.Spec.Template.Annotations)
	}
}

// TestIntegrationPodSetTarget: a PodSet is restarted through its pod
// template like a Deployment, its rollout is followed through the PodSet's
// status, and every pod is replaced.
func TestIntegrationPodSetTarget(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	sel := map[string]string{"app": "cache"}
	create(t, &deckhandv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/cache:1"}}}}},
	})
	var before map[string]bool
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		ps := &deckhandv1alpha1.PodSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cache"}, ps); err != nil {
			return false, err
		}
		return ps.Status.ObservedGeneration == ps.Generation && ps.Status.AvailableReplicas == 2, nil
	}, "the PodSet runs 2 available pods")
	before = podNames(t, ns, "cache")
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 0 1 1 *",
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "PodSet", Name: "cache"}}},
	})
	runNow(t, ns, "cache", "go")
	rs := waitHistory(t, ns, "cache", "a Succeeded PodSet restart", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "PodSet/cache" && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	if !strings.Contains(rs.Status.History[0].Message, "PodSet rolled out") {
		t.Fatalf("history %+v", rs.Status.History[0])
	}
	ps := testutil.Get(ctx(t), t, env.Client, types.NamespacedName{Namespace: ns, Name: "cache"}, &deckhandv1alpha1.PodSet{})
	if got, want := ps.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation], rs.Status.History[0].ScheduledTime.UTC().Format(time.RFC3339); got != want {
		t.Fatalf("PodSet restarted-at %q, want %q", got, want)
	}
	after := podNames(t, ns, "cache")
	if len(after) != 2 {
		t.Fatalf("pods after the restart: %v", after)
	}
	for p := range after {
		if before[p] {
			t.Errorf("pod %s was not replaced by the restart", p)
		}
	}
}
