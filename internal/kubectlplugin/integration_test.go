package kubectlplugin

// Integration tests: each subcommand runs, through the cobra root as
// kubectl would run the binary, against a real kube-apiserver and etcd with
// Deckhand's CRDs and no manager. The tests write the objects, and their
// status, themselves. `go test -short` runs only the unit tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

// cluster returns the test environment, skipping t in -short mode.
func cluster(t *testing.T) (*testenv.Env, context.Context) {
	t.Helper()
	if env == nil {
		t.Skip("needs the local control plane (not in -short mode)")
	}
	return env, testutil.Context(t, 60*time.Second)
}

// kubectlDeckhand runs the plugin with args against the test cluster and
// returns what it printed.
func kubectlDeckhand(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(append([]string{"--kubeconfig", env.Cluster.KubeconfigPath}, args...))
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("kubectl deckhand %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	t.Logf("kubectl deckhand %s\n%s", strings.Join(args, " "), out.String())
	return out.String()
}

// wantContains checks that out contains every want, with runs of blanks
// (table padding) read as one space.
func wantContains(t *testing.T, out string, want ...string) {
	t.Helper()
	var squeezed []string
	for _, line := range strings.Split(out, "\n") {
		squeezed = append(squeezed, strings.Join(strings.Fields(line), " "))
	}
	flat := strings.Join(squeezed, "\n")
	for _, w := range want {
		if !strings.Contains(flat, w) {
			t.Errorf("output does not contain %q:\n%s", w, out)
		}
	}
}

// newSidecarSet creates a SidecarSet named after ns (SidecarSets are
// cluster-scoped), limited to ns, selecting app=app and injecting one
// container.
func newSidecarSet(ctx context.Context, t *testing.T, ns, suffix, app string) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + suffix},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:  ns,
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: suffix, Image: "registry.example/" + suffix + ":1"}}},
		},
	}
	testutil.Create(ctx, t, env.Client, s)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
	return s
}

func newRestartSchedule(ctx context.Context, t *testing.T, ns string) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule: "0 3 * * *",
			Target:   deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "web"}},
		},
	}
	testutil.Create(ctx, t, env.Client, rs)
	return rs
}

// newPod creates a pod of ns labelled app=app, with annotations, owned by
// owner when it is set.
func newPod(ctx context.Context, t *testing.T, ns, name string, podLabels, annotations map[string]string, owner client.Object, containers ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podLabels, Annotations: annotations}}
	for _, c := range append([]string{"app"}, containers...) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "registry.example/" + c + ":1"})
	}
	if owner != nil {
		gvk, err := env.Client.GroupVersionKindFor(owner)
		if err != nil {
			t.Fatal(err)
		}
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)}
	}
	testutil.Create(ctx, t, env.Client, p)
	return p
}

// recordOf returns the annotations the pod webhook writes on a pod that s
// injected at revision hash.
func recordOf(s *deckhandv1alpha1.SidecarSet, hash string) map[string]string {
	var rec sidecarcontrol.PodRecord
	_, withoutImage := sidecarcontrol.Hashes(&s.Spec)
	rec.Set(s.Name, hash, withoutImage, []string{s.Spec.Containers[0].Name})
	p := &corev1.Pod{}
	rec.Apply(p)
	return p.Annotations
}

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message", LastTransitionTime: metav1.Now()}
}

func TestPauseAndResume(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	s := newSidecarSet(ctx, t, ns, "log", "web")
	ps := testutil.PodSet(ns, "web", 1, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, ps)
	rs := newRestartSchedule(ctx, t, ns)

	cases := []struct {
		kind, name, namespace string
		obj                   client.Object
		paused                func() bool
		pausedWord            string
	}{
		{kind: "scs", name: s.Name, obj: s, paused: func() bool { return s.Spec.UpdateStrategy.Paused }, pausedWord: "paused"},
		{kind: "pset", name: ps.Name, namespace: ns, obj: ps, paused: func() bool { return ps.Spec.Paused }, pausedWord: "paused"},
		{kind: "restartschedule", name: rs.Name, namespace: ns, obj: rs, paused: func() bool { return rs.Spec.Suspend }, pausedWord: "suspended"},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			run := func(verb string) string {
				args := []string{verb, tc.kind, tc.name}
				if tc.namespace != "" {
					args = append(args, "-n", tc.namespace)
				}
				out := kubectlDeckhand(ctx, t, args...)
				if err := e.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.obj); err != nil {
					t.Fatal(err)
				}
				return out
			}
			full, _ := parseKind(tc.kind, kindSidecarSet, kindPodSet, kindRestartSchedule)
			ref := string(full) + "/" + tc.name
			if out := run("pause"); out != ref+" "+tc.pausedWord+"\n" || !tc.paused() {
				t.Errorf("pause: printed %q, paused=%v", out, tc.paused())
			}
			if out := run("pause"); out != ref+" already "+tc.pausedWord+"\n" || !tc.paused() {
				t.Errorf("pause again: printed %q, paused=%v", out, tc.paused())
			}
			if out := run("resume"); out != ref+" resumed\n" || tc.paused() {
				t.Errorf("resume: printed %q, paused=%v", out, tc.paused())
			}
		})
	}
}

func TestRestartNow(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	rs := newRestartSchedule(ctx, t, ns)
	annotation := func() string {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			t.Fatal(err)
		}
		return rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowAnnotation]
	}

	out := kubectlDeckhand(ctx, t, "restart-now", rs.Name, "-n", ns, "--token", "before-maintenance")
	wantContains(t, out, "restartschedule/nightly run requested (token before-maintenance)")
	if got := annotation(); got != "before-maintenance" {
		t.Errorf("annotation = %q, want before-maintenance", got)
	}

	out = kubectlDeckhand(ctx, t, "restart-now", rs.Name, "-n", ns)
	token := annotation()
	if token == "" || token == "before-maintenance" {
		t.Fatalf("a run without --token set the annotation to %q, want a new token", token)
	}
	wantContains(t, out, "(token "+token+")")
	if rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation] != "" {
		t.Fatalf("an override set without --ignore-windows: %v", rs.Annotations)
	}

	out = kubectlDeckhand(ctx, t, "restart-now", rs.Name, "-n", ns, "--token", "hotfix", "--ignore-windows")
	wantContains(t, out, "(token hotfix, ignoring windows and blackout dates)")
	if got := annotation(); got != "hotfix" || rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation] != "hotfix" {
		t.Errorf("--ignore-windows: annotations %v, want the token and the override both hotfix", rs.Annotations)
	}
}

func TestRollback(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	ps := testutil.PodSet(ns, "web", 1, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, ps)
	annotation := func() string {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
			t.Fatal(err)
		}
		return ps.Annotations[deckhandv1alpha1.PodSetRollbackToAnnotation]
	}

	out := kubectlDeckhand(ctx, t, "rollback", "podset", ps.Name, "-n", ns)
	wantContains(t, out, "podset/web rollback to the previous revision requested")
	if got := annotation(); got != "previous" {
		t.Errorf("annotation = %q, want previous", got)
	}
	out = kubectlDeckhand(ctx, t, "rollback", "pset", ps.Name, "-n", ns, "--to-revision", "3")
	wantContains(t, out, "podset/web rollback to revision 3 requested")
	if got := annotation(); got != "3" {
		t.Errorf("annotation = %q, want 3", got)
	}
}

func TestHistory(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	rs := newRestartSchedule(ctx, t, ns)
	older := metav1.NewTime(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
	newer := metav1.NewTime(time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC))
	done := metav1.NewTime(newer.Add(time.Minute))
	// Stored oldest first, to show the command orders them itself.
	rs.Status.History = []deckhandv1alpha1.RestartRecord{
		{ScheduledTime: older, Result: deckhandv1alpha1.RestartMissed, Message: "the manager was down"},
		{ScheduledTime: newer, Workload: "Deployment/web", StartTime: &newer, CompletionTime: &done, Result: deckhandv1alpha1.RestartSucceeded, Message: "rollout complete"},
	}
	if err := e.Client.Status().Update(ctx, rs); err != nil {
		t.Fatal(err)
	}

	out := kubectlDeckhand(ctx, t, "history", rs.Name, "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SCHEDULED") {
		t.Fatalf("want a header and two rows:\n%s", out)
	}
	for i, want := range [][]string{
		{"2026-03-02T03:00:00Z", "Deployment/web", "Succeeded", "2026-03-02T03:01:00Z", "rollout complete"},
		{"2026-03-01T03:00:00Z", "-", "Missed", "the manager was down"},
	} {
		wantContains(t, lines[i+1], want...)
	}

	var fromJSON []deckhandv1alpha1.RestartRecord
	if err := json.Unmarshal([]byte(kubectlDeckhand(ctx, t, "history", rs.Name, "-n", ns, "-o", "json")), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if len(fromJSON) != 2 || fromJSON[0].Result != deckhandv1alpha1.RestartSucceeded {
		t.Errorf("-o json: %+v", fromJSON)
	}
	wantContains(t, kubectlDeckhand(ctx, t, "history", rs.Name, "-n", ns, "-o", "yaml"), "result: Succeeded", "workload: Deployment/web")
}

func TestStatusSidecarSet(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	s := newSidecarSet(ctx, t, ns, "log", "web")
	latest, _ := sidecarcontrol.Hashes(&s.Spec)
	newPod(ctx, t, ns, "web-a", map[string]string{"app": "web"}, recordOf(s, latest), nil, "log")
	newPod(ctx, t, ns, "web-b", map[string]string{"app": "web"}, recordOf(s, "0ldrev"), nil, "log")
	newPod(ctx, t, ns, "web-c", map[string]string{"app": "web"}, nil, nil)
	s.Status = deckhandv1alpha1.SidecarSetStatus{
		ObservedGeneration: s.Generation, MatchedPods: 2, UpdatedPods: 1, ReadyPods: 2, UpdatedReadyPods: 1, NotInjectedPods: 1, LatestRevision: latest,
		Conditions: []metav1.Condition{
			condition(deckhandv1alpha1.SidecarSetPodsUpdatedCondition, metav1.ConditionFalse, "RollingOut"),
			condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RollingOut"),
			condition(deckhandv1alpha1.ReconcilingCondition, metav1.ConditionTrue, "RollingOut"),
		},
	}
	if err := e.Client.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}

	out := kubectlDeckhand(ctx, t, "status", "scs", s.Name)
	wantContains(t, out,
		"Revision: "+latest,
		"matched 2, updated 1, ready 2, updated and ready 1, not injected 1",
		"Injection: active",
		latest+" (latest) 1 "+ns+"/web-a",
		"0ldrev (old) 1 "+ns+"/web-b",
		"Ready False RollingOut",
		"Reconciling True RollingOut",
	)
	if strings.Contains(out, "web-c") {
		t.Errorf("a pod the SidecarSet did not inject is listed under a revision:\n%s", out)
	}
	if strings.Index(out, "Ready ") > strings.Index(out, "PodsUpdated") {
		t.Errorf("the summary conditions are not listed first:\n%s", out)
	}
}

func TestStatusPodSet(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	ps := testutil.PodSet(ns, "web", 3, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, ps)
	for name, rev := range map[string]string{"web-a": "rev2", "web-b": "rev1", "web-c": "rev1"} {
		newPod(ctx, t, ns, name, map[string]string{"app": "web", deckhandv1alpha1.PodSetRevisionLabel: rev}, nil, ps)
	}
	newPod(ctx, t, ns, "stray", map[string]string{"app": "web"}, nil, nil)
	ps.Status = deckhandv1alpha1.PodSetStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3, CurrentRevision: "rev1", UpdateRevision: "rev2",
		ObservedGeneration: ps.Generation, Conditions: []metav1.Condition{condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RollingOut")}}
	if err := e.Client.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}

	out := kubectlDeckhand(ctx, t, "status", "pset", "web", "-n", ns)
	wantContains(t, out,
		"PodSet: "+ns+"/web",
		"update rev2, current rev1",
		"Paused: no",
		"desired 3, current 3, updated 1, ready 3, available 3",
		"rev2 (update revision) 1 web-a",
		"rev1 (current revision) 2 web-b, web-c",
		"Ready False RollingOut",
	)
	if strings.Contains(out, "stray") {
		t.Errorf("a pod the PodSet does not own is listed:\n%s", out)
	}
}

func TestWhy(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	logging := newSidecarSet(ctx, t, ns, "log", "web")
	mesh := newSidecarSet(ctx, t, ns, "mesh", "api")
	hash, _ := sidecarcontrol.Hashes(&logging.Spec)
	ps := testutil.PodSet(ns, "web", 1, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, ps)
	ps.Status = deckhandv1alpha1.PodSetStatus{Replicas: 1, UpdateRevision: "rev1", CurrentRevision: "rev1"}
	if err := e.Client.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}
	newPod(ctx, t, ns, "web-a", map[string]string{"app": "web", deckhandv1alpha1.PodSetRevisionLabel: "rev1"}, recordOf(logging, hash), ps, "log")

	out := kubectlDeckhand(ctx, t, "why", "web-a", "-n", ns)
	wantContains(t, out,
		"Pod: "+ns+"/web-a",
		"Owner: PodSet web, at revision rev1 (the update revision)",
	)
	wantContains(t, out,
		logging.Name+" yes yes injected at revision "+hash+" (the current revision), containers log",
		mesh.Name+" no no selector does not match: app=api is required, the pod has app=web",
	)
}
