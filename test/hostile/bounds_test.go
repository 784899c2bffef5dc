package hostile

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// app is the container of every workload the bounds tests create; nothing
// runs it (there is no scheduler or kubelet in this suite).
var app = corev1.Container{Name: "app", Image: "registry.example/app:1"}

func restartSchedule(ns, name, schedule string) *deckhandv1alpha1.RestartSchedule {
	return &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: schedule,
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "web"}}},
	}
}

// wantInvalid fails t unless err is the API server's Invalid answer naming
// the field path.
func wantInvalid(t *testing.T, what string, err error, path string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: accepted, want it refused naming %s", what, path)
	case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), path):
		t.Errorf("%s: refused with %v, want an Invalid answer naming %s", what, err, path)
	default:
		t.Logf("%s: %v", what, err)
	}
}

// A schedule firing more often than once a minute is refused at admission,
// written directly or through the workload annotation; the annotation's
// refusal is told on the workload, in an Event.
func TestBoundsScheduleInterval(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.client)
	c := ctx(t, 2*time.Minute)

	wantInvalid(t, "@every 1s", suite.client.Create(c, restartSchedule(ns, "fast", "@every 1s")), "spec.schedule")
	wantInvalid(t, "@every 59s", suite.client.Create(c, restartSchedule(ns, "almost", "@every 59s")), "spec.schedule")
	testutil.Create(c, t, suite.client, restartSchedule(ns, "minutely", "@every 1m"))
	testutil.Create(c, t, suite.client, restartSchedule(ns, "cron", "* * * * *"))

	d := testutil.Deployment(ns, "web", 1, map[string]string{"app": "web"}, app)
	d.Annotations = map[string]string{deckhandv1alpha1.RestartScheduleAnnotation: "@every 1s"}
	testutil.Create(c, t, suite.client, d)
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := suite.clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Deployment" && e.Regarding.Name == "web" && e.Reason == "InvalidRestartSchedule" && strings.Contains(e.Note, "spec.schedule") {
				t.Logf("Event on the Deployment: %s", e.Note)
				return true, nil
			}
		}
		return false, nil
	}, "a Warning Event on the Deployment says its annotation's schedule was refused")
	var list deckhandv1alpha1.RestartScheduleList
	if err := suite.client.List(c, &list, client.InNamespace(ns), client.MatchingLabels{deckhandv1alpha1.RestartScheduleGeneratedLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("a RestartSchedule was generated from a too-frequent annotation: %s %q", list.Items[0].Name, list.Items[0].Spec.Schedule)
	}
}

// A name that cannot be a label value is refused where the kind puts its
// name in a label (the PodSet's revisions, the WebServer's pods and
// Service), naming metadata.name.
func TestBoundsNames(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.client)
	c := ctx(t, time.Minute)
	labels := map[string]string{"app": "web"}
	long := strings.Repeat("a", 70)

	wantInvalid(t, "a PodSet named with 70 characters", suite.client.Create(c, testutil.PodSet(ns, long, 0, labels, app)), "metadata.name")
	testutil.Create(c, t, suite.client, testutil.PodSet(ns, strings.Repeat("a", 63), 0, labels, app))
	ws := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: long}, Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx"}}
	wantInvalid(t, "a WebServer named with 70 characters", suite.client.Create(c, ws), "metadata.name")
}

// Every number a tenant sets has a maximum, and a PodSet's replicas a
// ceiling (--max-podset-replicas, 10000 by default) that holds through its
// scale subresource too.
func TestBoundsNumbers(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.client)
	c := ctx(t, 2*time.Minute)
	labels := map[string]string{"app": "web"}

	rs := func(mutate func(*deckhandv1alpha1.RestartScheduleSpec)) client.Object {
		r := restartSchedule(ns, "r", "0 3 * * *")
		mutate(&r.Spec)
		return r
	}
	ps := func(mutate func(*deckhandv1alpha1.PodSetSpec)) client.Object {
		p := testutil.PodSet(ns, "p", 1, labels, app)
		mutate(&p.Spec)
		return p
	}
	cases := []struct {
		what string
		obj  client.Object
		path string
	}{
		{"startingDeadlineSeconds at the int64 limit", rs(func(s *deckhandv1alpha1.RestartScheduleSpec) {
			s.StartingDeadlineSeconds = ptr.To[int64](math.MaxInt64)
		}), "spec.startingDeadlineSeconds"},
		{"maxConcurrent 101", rs(func(s *deckhandv1alpha1.RestartScheduleSpec) { s.MaxConcurrent = 101 }), "spec.maxConcurrent"},
		{"rolloutTimeout 169h", rs(func(s *deckhandv1alpha1.RestartScheduleSpec) {
			s.RolloutTimeout = &metav1.Duration{Duration: 169 * time.Hour}
		}), "spec.rolloutTimeout"},
		{"historyLimit 101", rs(func(s *deckhandv1alpha1.RestartScheduleSpec) { s.HistoryLimit = 101 }), "spec.historyLimit"},
		{"jitter 25h", rs(func(s *deckhandv1alpha1.RestartScheduleSpec) { s.Jitter = &metav1.Duration{Duration: 25 * time.Hour} }), "spec.jitter"},
		{"PodSet replicas 10001", ps(func(s *deckhandv1alpha1.PodSetSpec) { s.Replicas = ptr.To[int32](10001) }), "spec.replicas"},
		{"PodSet replicas at the int32 limit", ps(func(s *deckhandv1alpha1.PodSetSpec) { s.Replicas = ptr.To[int32](math.MaxInt32) }), "spec.replicas"},
		{"minReadySeconds 86401", ps(func(s *deckhandv1alpha1.PodSetSpec) {
			s.MinReadySeconds, s.ProgressDeadlineSeconds = 86401, ptr.To[int32](86402)
		}), "spec.minReadySeconds"},
		{"progressDeadlineSeconds 604801", ps(func(s *deckhandv1alpha1.PodSetSpec) { s.ProgressDeadlineSeconds = ptr.To[int32](604801) }), "spec.progressDeadlineSeconds"},
		{"revisionHistoryLimit 101", ps(func(s *deckhandv1alpha1.PodSetSpec) { s.RevisionHistoryLimit = ptr.To[int32](101) }), "spec.revisionHistoryLimit"},
		{"partition 1000001", ps(func(s *deckhandv1alpha1.PodSetSpec) { s.UpdateStrategy.Partition = ptr.To[int32](1000001) }), "spec.updateStrategy.partition"},
		{"WebServer replicas 10001", &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"},
			Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx", Replicas: ptr.To[int32](10001)}}, "spec.replicas"},
	}
	for i, tc := range cases {
		// Names of their own: one accepted by mistake refuses no other.
		tc.obj.SetName(fmt.Sprintf("n%d", i))
		wantInvalid(t, tc.what, suite.client.Create(c, tc.obj), tc.path)
	}

	// The scale subresource, as `kubectl scale` and the
	// HorizontalPodAutoscaler write it.
	testutil.Create(c, t, suite.client, testutil.PodSet(ns, "scaled", 0, labels, app))
	testutil.Create(c, t, suite.client, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"},
		Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx", Replicas: ptr.To[int32](0)}})
	for _, obj := range []client.Object{&deckhandv1alpha1.PodSet{}, &deckhandv1alpha1.WebServer{}} {
		obj.SetNamespace(ns)
		obj.SetName("scaled")
		scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"}, Spec: autoscalingv1.ScaleSpec{Replicas: 10001}}
		err := suite.client.SubResource("scale").Update(c, obj, client.WithSubResourceBody(scale))
		wantInvalid(t, "scaling a "+typeName(obj)+" to 10001", err, "spec.replicas")
	}
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *deckhandv1alpha1.PodSet:
		return "PodSet"
	case *deckhandv1alpha1.WebServer:
		return "WebServer"
	}
	return "object"
}
