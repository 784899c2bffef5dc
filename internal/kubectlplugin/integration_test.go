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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	var out, errOut lockedBuffer
	if err := runDeckhand(ctx, t, &out, &errOut, args...); err != nil {
		t.Fatalf("kubectl deckhand %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// runDeckhand runs the plugin with args against the test cluster, writing
// to out and errOut, and returns the error it would exit with.
func runDeckhand(ctx context.Context, t *testing.T, out, errOut *lockedBuffer, args ...string) error {
	t.Helper()
	root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
	root.SetArgs(append([]string{"--kubeconfig", env.Cluster.KubeconfigPath}, args...))
	err := root.ExecuteContext(ctx)
	t.Logf("kubectl deckhand %s: exit %d\n%s%s", strings.Join(args, " "), ExitCode(err), out.String(), errOut.String())
	return err
}

// lockedBuffer is a buffer a running command writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
		p.OwnerReferences = []metav1.OwnerReference{controllerRef(t, owner)}
	}
	testutil.Create(ctx, t, env.Client, p)
	return p
}

// controllerRef is a controller reference to owner.
func controllerRef(t *testing.T, owner client.Object) metav1.OwnerReference {
	t.Helper()
	gvk, err := env.Client.GroupVersionKindFor(owner)
	if err != nil {
		t.Fatal(err)
	}
	return *metav1.NewControllerRef(owner, gvk)
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

// newWebServer creates a WebServer named web in ns.
func newWebServer(ctx context.Context, t *testing.T, ns string) *deckhandv1alpha1.WebServer {
	t.Helper()
	ws := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: deckhandv1alpha1.WebServerSpec{Image: "registry.example/web:1"}}
	testutil.Create(ctx, t, env.Client, ws)
	return ws
}

// setConditions writes obj's status: observed generation and conditions,
// through a status update of the real API server.
func setConditions(ctx context.Context, t *testing.T, obj client.Object, observed int64, conds ...metav1.Condition) {
	t.Helper()
	switch o := obj.(type) {
	case *deckhandv1alpha1.SidecarSet:
		o.Status.ObservedGeneration, o.Status.Conditions = observed, conds
	case *deckhandv1alpha1.PodSet:
		o.Status.ObservedGeneration, o.Status.Conditions = observed, conds
	case *deckhandv1alpha1.WebServer:
		o.Status.ObservedGeneration, o.Status.Conditions = observed, conds
	case *deckhandv1alpha1.RestartSchedule:
		o.Status.ObservedGeneration, o.Status.Conditions = observed, conds
	}
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// TestStatusWatch follows an object of each kind with status --watch and
// checks the exit code: 0 once Ready turns True (written while the watch
// runs), 1 for a Stalled, Degraded or ProgressDeadlineExceeded condition, 2
// when --timeout passes first, here because the status is for an older
// generation than the spec's.
func TestStatusWatch(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	scs := newSidecarSet(ctx, t, ns, "log", "web")
	setConditions(ctx, t, scs, scs.Generation, condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RollingOut"))
	ws := newWebServer(ctx, t, ns)
	setConditions(ctx, t, ws, ws.Generation, condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "Degraded"),
		condition(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, "NameConflict"))
	ps := testutil.PodSet(ns, "web", 2, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, ps)
	setConditions(ctx, t, ps, ps.Generation, condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RollingOut"),
		condition(deckhandv1alpha1.PodSetProgressingCondition, metav1.ConditionFalse, "ProgressDeadlineExceeded"))
	stalled := newRestartSchedule(ctx, t, ns)
	setConditions(ctx, t, stalled, stalled.Generation, condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "InvalidSchedule"),
		condition(deckhandv1alpha1.StalledCondition, metav1.ConditionTrue, "InvalidSchedule"))
	stale := testutil.PodSet(ns, "stale", 1, map[string]string{"app": "stale"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, stale)
	setConditions(ctx, t, stale, stale.Generation-1, condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "Complete"))

	t.Run("done once Ready turns True", func(t *testing.T) {
		var out, errOut lockedBuffer
		var err error
		watchCtx, cancel := context.WithCancel(ctx)
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			err = runDeckhand(watchCtx, t, &out, &errOut, "status", "sset", scs.Name, "--watch", "--timeout", "30s")
		}()
		// The command logs through t: it must end before the test does.
		defer func() { cancel(); <-exited }()
		testutil.Eventually(t, 20*time.Second, func(context.Context) (bool, error) {
			return strings.Contains(out.String(), "Ready False RollingOut"), nil
		}, "status --watch prints the Ready False condition it starts from")
		setConditions(ctx, t, scs, scs.Generation, condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "Complete"))
		if <-exited; ExitCode(err) != 0 {
			t.Fatalf("exit %d (%v), want 0", ExitCode(err), err)
		}
		wantContains(t, out.String(), "sidecarset/"+scs.Name+": Ready False RollingOut: RollingOut message",
			"sidecarset/"+scs.Name+": Ready True Complete: Complete message")
	})
	for name, tc := range map[string]struct {
		args []string
		exit int
		want string
	}{
		"failed: a WebServer Degraded":                {[]string{"ws", ws.Name, "-n", ns}, ExitFailed, "webserver/web failed: Degraded True NameConflict"},
		"failed: a PodSet past its progress deadline": {[]string{"pset", ps.Name, "-n", ns}, ExitFailed, "Progressing False ProgressDeadlineExceeded"},
		"failed: a RestartSchedule Stalled":           {[]string{"rsched", stalled.Name, "-n", ns}, ExitFailed, "Stalled True InvalidSchedule"},
		"timed out: the status is for an older spec":  {[]string{"pset", stale.Name, "-n", ns, "--timeout", "1s"}, ExitTimedOut, "timed out after 1s: waiting for the controller to observe generation 1"},
		"a missing object is an error, not a timeout": {[]string{"pset", "missing", "-n", ns, "--timeout", "1s"}, 1, `"missing" not found`},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut lockedBuffer
			// A default --timeout that a failure must beat; the rows that
			// time out give a shorter one after it.
			err := runDeckhand(ctx, t, &out, &errOut, append([]string{"status", "--watch", "--timeout", "20s"}, tc.args...)...)
			if ExitCode(err) != tc.exit || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exit %d (%v), want %d with %q", ExitCode(err), err, tc.exit, tc.want)
			}
		})
	}

	t.Run("-o json prints the object, the wait on standard error", func(t *testing.T) {
		var out, errOut lockedBuffer
		if err := runDeckhand(ctx, t, &out, &errOut, "status", "sset", scs.Name, "--watch", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		var got deckhandv1alpha1.SidecarSet
		if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
			t.Fatalf("-o json: %v\n%s", err, out.String())
		}
		if got.Kind != "SidecarSet" || got.Name != scs.Name || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "Complete" {
			t.Errorf("-o json printed %+v", got)
		}
		wantContains(t, errOut.String(), "Ready True Complete")
	})
}

func TestStatusWebServer(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	ws := newWebServer(ctx, t, ns)
	ws.Status = deckhandv1alpha1.WebServerStatus{ObservedGeneration: ws.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, URL: "http://web." + ns + ".svc:8080",
		Conditions: []metav1.Condition{condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "Available")}}
	if err := e.Client.Status().Update(ctx, ws); err != nil {
		t.Fatal(err)
	}
	wantContains(t, kubectlDeckhand(ctx, t, "status", "mws", "web", "-n", ns),
		"WebServer: "+ns+"/web",
		"Image: registry.example/web:1",
		"URL: http://web."+ns+".svc:8080",
		"Replicas: desired 1, current 1, ready 1, available 1",
		"Ready True Available",
	)
	wantContains(t, kubectlDeckhand(ctx, t, "status", "ws", "web", "-n", ns, "-o", "yaml"), "kind: WebServer", "url: http://web."+ns+".svc:8080")
}

func TestList(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	scs := newSidecarSet(ctx, t, ns, "log", "web")
	scs.Status = deckhandv1alpha1.SidecarSetStatus{ObservedGeneration: scs.Generation, MatchedPods: 3, UpdatedReadyPods: 2,
		Conditions: []metav1.Condition{condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RollingOut")}}
	if err := e.Client.Status().Update(ctx, scs); err != nil {
		t.Fatal(err)
	}
	ps := testutil.PodSet(ns, "web", 3, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:1"})
	testutil.Create(ctx, t, e.Client, ps)
	ps.Status = deckhandv1alpha1.PodSetStatus{ObservedGeneration: ps.Generation, Replicas: 3, ReadyReplicas: 3,
		Conditions: []metav1.Condition{condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "Complete")}}
	if err := e.Client.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}
	ws := newWebServer(ctx, t, ns)
	setConditions(ctx, t, ws, ws.Generation, condition(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, "NameConflict"))
	newRestartSchedule(ctx, t, ns)

	out := kubectlDeckhand(ctx, t, "list", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantContains(t, lines[0], "KIND NAMESPACE NAME READY STATUS REASON AGE")
	for i, want := range []string{
		"PodSet " + ns + " web 3/3 Ready Complete",
		"WebServer " + ns + " web 0/1 Failed NameConflict",
		"RestartSchedule " + ns + " nightly - InProgress NotObserved",
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(strings.Join(strings.Fields(l), " "), want) }) {
			t.Errorf("row %d: no line starts with %q:\n%s", i, want, out)
		}
	}
	wantContains(t, out, "SidecarSet - "+scs.Name+" 2/3 InProgress RollingOut")
	if rows := kubectlDeckhand(ctx, t, "list", "pset", "-n", ns); strings.Contains(rows, "WebServer") || !strings.Contains(rows, "PodSet") {
		t.Errorf("list pset printed other kinds:\n%s", rows)
	}

	var all struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(kubectlDeckhand(ctx, t, "list", "-A", "-o", "json")), &all); err != nil {
		t.Fatal(err)
	}
	inNS := map[string]bool{}
	for _, it := range all.Items {
		if it.Metadata.Namespace == ns || it.Metadata.Name == scs.Name {
			inNS[it.Kind+"/"+it.Metadata.Name] = true
		}
	}
	if all.Kind != "List" || len(inNS) != 4 || !inNS["SidecarSet/"+scs.Name] || !inNS["RestartSchedule/nightly"] {
		t.Errorf("-A -o json: kind %s, this test's objects %v", all.Kind, inNS)
	}
}

func TestSetImage(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	ps := testutil.PodSet(ns, "web", 1, map[string]string{"app": "web"},
		corev1.Container{Name: "app", Image: "registry.example/app:1"}, corev1.Container{Name: "log", Image: "registry.example/log:1"})
	ps.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1"}}
	testutil.Create(ctx, t, e.Client, ps)
	scs := newSidecarSet(ctx, t, ns, "log", "web")

	out := kubectlDeckhand(ctx, t, "set", "image", "pset", "web", "-n", ns, "log=registry.example/log:2", "init=registry.example/init@sha256:"+strings.Repeat("a", 64))
	wantContains(t, out, "podset/web: container log image set to registry.example/log:2", "podset/web: container init image set to registry.example/init@sha256:")
	before := ps.DeepCopy()
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	before.Spec.Template.Spec.Containers[1].Image = "registry.example/log:2"
	before.Spec.Template.Spec.InitContainers[0].Image = "registry.example/init@sha256:" + strings.Repeat("a", 64)
	if !equality.Semantic.DeepEqual(before.Spec, ps.Spec) {
		t.Errorf("set image changed more than the images:\nwant %+v\ngot  %+v", before.Spec, ps.Spec)
	}
	wantContains(t, kubectlDeckhand(ctx, t, "set", "image", "podset", "web", "-n", ns, "log=registry.example/log:2"), "podset/web: container log image already registry.example/log:2")

	wantContains(t, kubectlDeckhand(ctx, t, "set", "image", "sset", scs.Name, "log=registry.example/log:3"), "sidecarset/"+scs.Name+": container log image set to registry.example/log:3")
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(scs), scs); err != nil {
		t.Fatal(err)
	}
	if got := scs.Spec.Containers[0].Image; got != "registry.example/log:3" {
		t.Errorf("SidecarSet image %s, want registry.example/log:3", got)
	}

	for args, want := range map[string]string{
		"pset web app=Registry.example/App:1": `app: "Registry.example/App:1" is not a valid image reference`,
		"pset web app=":                       `app: "" is not a valid image reference`,
		"pset web app":                        `"app": expected CONTAINER=IMAGE`,
		"pset web nope=registry.example/x:1":  "no container nope: the containers are app, log, init",
		"ws web app=registry.example/x:1":     `unknown kind "ws": expected one of sidecarset, podset`,
	} {
		var out, errOut lockedBuffer
		err := runDeckhand(ctx, t, &out, &errOut, append(append([]string{"set", "image"}, strings.Fields(args)...), "-n", ns)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("set image %s: %v, want an error with %q", args, err, want)
		}
	}
}

func TestHistoryPodSet(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	ps := testutil.PodSet(ns, "web", 1, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.example/app:2"})
	testutil.Create(ctx, t, e.Client, ps)
	revision := func(name, hash, image string, number int64, owned bool) {
		tmpl := ps.Spec.Template.DeepCopy()
		tmpl.Spec.Containers[0].Image = image
		data, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
		if err != nil {
			t.Fatal(err)
		}
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{deckhandv1alpha1.PodSetNameLabel: ps.Name, deckhandv1alpha1.PodSetRevisionLabel: hash}},
			Data: runtime.RawExtension{Raw: data}, Revision: number}
		if owned {
			cr.OwnerReferences = []metav1.OwnerReference{controllerRef(t, ps)}
		}
		testutil.Create(ctx, t, e.Client, cr)
	}
	// Created newest first, to show the command orders them itself.
	revision("web-rev2", "rev2", "registry.example/app:2", 2, true)
	revision("web-rev1", "rev1", "registry.example/app:1", 1, true)
	revision("web-foreign", "rev9", "registry.example/other:1", 9, false)
	ps.Status = deckhandv1alpha1.PodSetStatus{UpdateRevision: "rev2", CurrentRevision: "rev1"}
	if err := e.Client.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}

	out := kubectlDeckhand(ctx, t, "history", "pset", "web", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "REVISION") {
		t.Fatalf("want a header and two rows (not the ControllerRevision the PodSet does not control):\n%s", out)
	}
	wantContains(t, lines[1], "1 ", " rev1 app=registry.example/app:1 current")
	wantContains(t, lines[2], "2 ", " rev2 app=registry.example/app:2 update")

	var revs []podSetRevision
	if err := json.Unmarshal([]byte(kubectlDeckhand(ctx, t, "history", "podset", "web", "-n", ns, "-o", "json")), &revs); err != nil {
		t.Fatal(err)
	}
	if len(revs) != 2 || revs[1].Revision != 2 || revs[1].Images[0] != "app=registry.example/app:2" || revs[1].Name != "web-rev2" || revs[1].Created.IsZero() {
		t.Errorf("-o json: %+v", revs)
	}
}
