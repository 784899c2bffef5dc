package walkthrough

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// blockTimeout bounds one block: the longest wait a walkthrough asks for
// (a restart on the next minute, then its rollout) plus margin.
const blockTimeout = 3 * time.Minute

// marker is the info string of a runnable block: ```sh walkthrough.
const marker = "walkthrough"

// block is one runnable fenced block of a doc.
type block struct {
	line int // of the opening fence, for messages
	text string
}

// parseBlocks returns the ```sh walkthrough blocks of a Markdown document,
// in order. Only fences at the start of a line count, as CommonMark reads
// them in these docs; the closing fence is the next line of backticks at
// least as long as the opening one.
func parseBlocks(markdown string) ([]block, error) {
	var (
		blocks []block
		cur    *block
		fence  string
		body   []string
	)
	sc := bufio.NewScanner(strings.NewReader(markdown))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence == "" {
			if !strings.HasPrefix(line, "```") {
				continue
			}
			fence = line[:len(line)-len(strings.TrimLeft(line, "`"))]
			if fields := strings.Fields(line[len(fence):]); len(fields) >= 2 && fields[0] == "sh" && slices.Contains(fields[1:], marker) {
				cur, body = &block{line: n}, nil
			}
			continue
		}
		if strings.HasPrefix(line, fence) && strings.TrimSpace(line[len(fence):]) == "" {
			if cur != nil {
				cur.text = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, *cur)
			}
			cur, fence = nil, ""
			continue
		}
		if cur != nil {
			body = append(body, line)
		}
	}
	if fence != "" {
		return nil, fmt.Errorf("unterminated code block")
	}
	return blocks, sc.Err()
}

// walkthrough runs one doc's blocks. The first block sets the shell up
// (KUBECONFIG, the kubectl alias); every later block runs in a fresh bash
// after it, as if typed in the terminal the doc opened.
type walkthrough struct {
	doc    string
	dir    string // laid out like the repository root
	setup  block
	blocks []block
	next   int
}

// newWalkthrough reads the walkthrough of doc: its first block sets the
// shell up, and the steps are the blocks of the section under heading (a
// whole Markdown heading line, with its #s), or every later block when
// heading is empty.
func newWalkthrough(t *testing.T, doc, heading string) *walkthrough {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, doc))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseBlocks(string(data))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	if len(blocks) < 2 {
		t.Fatalf("%s has %d ```sh %s blocks; want a set-up block and at least one step", doc, len(blocks), marker)
	}
	if !strings.Contains(blocks[0].text, "KUBECONFIG") {
		t.Fatalf("%s:%d: the first walkthrough block must set KUBECONFIG up:\n%s", doc, blocks[0].line, blocks[0].text)
	}
	steps := blocks[1:]
	if heading != "" {
		first, end := sectionLines(string(data), heading)
		if first == 0 {
			t.Fatalf("%s has no heading %q", doc, heading)
		}
		steps = slices.DeleteFunc(steps, func(b block) bool { return b.line < first || b.line >= end })
		if len(steps) == 0 {
			t.Fatalf("%s: the section %q has no ```sh %s block", doc, heading, marker)
		}
	}
	// What the doc's commands expect in their working directory at the
	// root of a checkout after `make run`: .dev/kubeconfig,
	// .dev/prometheus-url and bin/k8s.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubeconfig", "prometheus-url"} {
		if err := os.Symlink(filepath.Join(filepath.Dir(suite.kubeconfig), name), filepath.Join(dir, ".dev", name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(suite.k8sBin, filepath.Join(dir, "bin", "k8s")); err != nil {
		t.Fatal(err)
	}
	return &walkthrough{doc: doc, dir: dir, setup: blocks[0], blocks: steps}
}

// sectionLines returns the line of heading in markdown and the line of the
// next heading of the same or a higher level (one past the last line when
// there is none); 0 and 0 when markdown has no such heading. Lines inside
// fenced blocks are not headings.
func sectionLines(markdown, heading string) (first, end int) {
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	lines := strings.Split(markdown, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		switch l := len(line) - len(strings.TrimLeft(line, "#")); {
		case first == 0 && line == heading:
			first = i + 1
		case first != 0 && l <= level:
			return first, i + 1
		}
	}
	if first == 0 {
		return 0, 0
	}
	return first, len(lines) + 1
}

// runUntil runs the blocks up to, not including, the first remaining block
// that contains step, so that a test can look at the cluster at that point
// of the walkthrough. It fails if no remaining block contains step: the
// doc no longer has the step the test checks around.
func (w *walkthrough) runUntil(t *testing.T, step string) {
	t.Helper()
	i := slices.IndexFunc(w.blocks[w.next:], func(b block) bool { return strings.Contains(b.text, step) })
	if i < 0 {
		t.Fatalf("%s: no walkthrough block after line %d contains %q", w.doc, w.lineOfNext(), step)
	}
	for end := w.next + i; w.next < end; w.next++ {
		w.run(t, w.blocks[w.next])
	}
}

// runRest runs the remaining blocks.
func (w *walkthrough) runRest(t *testing.T) {
	t.Helper()
	for ; w.next < len(w.blocks); w.next++ {
		w.run(t, w.blocks[w.next])
	}
}

func (w *walkthrough) lineOfNext() int {
	if w.next < len(w.blocks) {
		return w.blocks[w.next].line
	}
	return 0
}

func (w *walkthrough) run(t *testing.T, b block) {
	t.Helper()
	// expand_aliases: the set-up block's `alias kubectl=...` must work as
	// it does in an interactive shell. set -x after the set-up prints each
	// command before its output, so a failure shows which one failed.
	script := "set -euo pipefail\nshopt -s expand_aliases\n" + w.setup.text + "set -x\n" + b.text
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = w.dir
	// kubectl is also on PATH, for commands that run it without the alias
	// (xargs, watch); KUBECONFIG comes from the set-up block only.
	cmd.Env = append(withoutEnv(os.Environ(), "KUBECONFIG", "PATH"),
		"PATH="+suite.k8sBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A block that times out is killed with everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	started := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(started).Round(100 * time.Millisecond)
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", blockTimeout, err)
	}
	if err != nil {
		t.Fatalf("%s:%d: walkthrough block failed (%v, after %s)\n----- block -----\n%s----- output -----\n%s",
			w.doc, b.line, err, took, b.text, out)
	}
	t.Logf("%s:%d: block ran in %s\n%s", w.doc, b.line, took, out)
}

func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// startWalkthrough reads the walkthrough of doc, with the checks every
// walkthrough runs under: no request of the manager may be refused, and objs
// are deleted if the test fails, so that the next walkthrough starts clean.
func startWalkthrough(t *testing.T, doc string, objs ...client.Object) *walkthrough {
	t.Helper()
	return startSection(t, doc, "", objs...)
}

// startSection is startWalkthrough for the blocks of one section of doc,
// under heading.
func startSection(t *testing.T, doc, heading string, objs ...client.Object) *walkthrough {
	t.Helper()
	failOnRefusals(t)
	deleteOnFailure(t, objs...)
	return newWalkthrough(t, doc, heading)
}

// deleteOnFailure removes what a walkthrough creates if it stopped before
// its own clean-up block, so the next walkthrough starts from the samples
// alone.
func deleteOnFailure(t *testing.T, objs ...client.Object) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, obj := range objs {
			if err := suite.client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("cleaning up %T %s: %v", obj, obj.GetName(), err)
			}
		}
	})
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// podUIDs are the UIDs of the active pods of namespace that selector
// matches, by pod name.
func podUIDs(t *testing.T, ns string, labels map[string]string) map[string]types.UID {
	t.Helper()
	pods := listPods(t, ns, labels)
	uids := make(map[string]types.UID, len(pods))
	for _, p := range pods {
		uids[p.Name] = p.UID
	}
	return uids
}

func listPods(t *testing.T, ns string, labels map[string]string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := suite.client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// survivors are the names of the pods of after whose UIDs were in before:
// the pods that a change which replaces every pod left in place.
func survivors(before, after map[string]types.UID) []string {
	var out []string
	for name, uid := range after {
		if slices.Contains(slices.Collect(maps.Values(before)), uid) {
			out = append(out, name)
		}
	}
	return out
}

func containerStatus(p corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

func get(t *testing.T, obj client.Object, ns, name string) {
	t.Helper()
	if err := suite.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until the object ns/name, read into obj, satisfies cond.
func waitFor(t *testing.T, timeout time.Duration, obj client.Object, ns, name, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return false, err
		}
		return cond(), nil
	}, "%T %s %s", obj, name, what)
}

// waitDeleted waits until every object of objs (read by name in ns) is
// gone.
func waitDeleted(t *testing.T, timeout time.Duration, ns, what string, objs ...client.Object) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		for _, obj := range objs {
			if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	}, "%s", what)
}

// kubectl runs kubectl as the cluster admin of `make run`.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return testutil.Kubectl(t, suite.k8sBin, suite.kubeconfig, args...)
}

func TestSidecarSetWalkthrough(t *testing.T) {
	const ns, name = "sidecarset-demo", "shop-logger"
	w := startWalkthrough(t, "docs/sidecarset.md", &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "shop-metrics"}},
		&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "shop-mesh"}},
		&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "shop-annotator"}},
		&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "shop-sneaky"}}, namespace(ns),
		&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "shop-history"}}, namespace("sidecarset-history"))
	shop := map[string]string{"app": "shop"}

	w.runUntil(t, "kubectl patch scs")
	before := podUIDs(t, ns, shop)
	if len(before) != 3 {
		t.Fatalf("before the image change: %d pods, want the Deployment's 3: %v", len(before), before)
	}
	for _, p := range listPods(t, ns, shop) {
		if _, ok := containerStatus(p, "logger"); !ok {
			t.Errorf("pod %s has no logger sidecar", p.Name)
		}
	}

	w.runUntil(t, "create poddisruptionbudget")
	var scs deckhandv1alpha1.SidecarSet
	get(t, &scs, "", name)
	if s := scs.Status; s.ObservedGeneration != scs.Generation || s.MatchedPods != 3 || s.UpdatedPods != s.MatchedPods {
		t.Errorf("SidecarSet status: observedGeneration %d (generation %d), matchedPods %d, updatedPods %d; want the latest generation and 3 of 3 updated",
			s.ObservedGeneration, scs.Generation, s.MatchedPods, s.UpdatedPods)
	}
	if after := podUIDs(t, ns, shop); !maps.Equal(before, after) {
		t.Errorf("the image change replaced pods (an in-place update keeps them):\nbefore %v\nafter  %v", before, after)
	}
	for _, p := range listPods(t, ns, shop) {
		if s, ok := containerStatus(p, "logger"); !ok || s.Image != "busybox:1.37" || s.RestartCount != 1 || !s.Ready {
			t.Errorf("pod %s: logger status %+v; want busybox:1.37, ready, restarted once", p.Name, s)
		}
	}

	// The env change under recreate: Evict, followed from a watch from the
	// moment the PodDisruptionBudget is created: never more than one of the
	// Deployment's three pods unavailable, each old pod deleted once.
	disruptions := testutil.WatchDisruptions(t, suite.clientset, ns, labels.SelectorFromSet(shop), 3)
	inPlace := podUIDs(t, ns, shop)
	w.runUntil(t, "name: shop-metrics")
	disruptions.Stop()
	get(t, &scs, "", name)
	if s := scs.Status; s.ObservedGeneration != scs.Generation || s.MatchedPods != 3 || s.UpdatedReadyPods != 3 || s.NotUpdatablePods != 0 || s.EvictingPods != 0 {
		t.Errorf("SidecarSet status after the env change: %+v; want the latest generation, 3 of 3 updated and ready, none not updatable or evicting", s)
	}
	old := map[types.UID]bool{}
	for _, uid := range inPlace {
		old[uid] = true
	}
	pods := listPods(t, ns, shop)
	if len(pods) != 3 {
		t.Errorf("%d pods after the env change, want 3", len(pods))
	}
	for _, p := range pods {
		var env []corev1.EnvVar
		for _, c := range p.Spec.Containers {
			if c.Name == "logger" {
				env = c.Env
			}
		}
		if old[p.UID] || len(env) != 1 || env[0].Name != "LOG_LEVEL" || env[0].Value != "debug" {
			t.Errorf("pod %s (old: %v): logger env %v; want a new pod with LOG_LEVEL=debug", p.Name, old[p.UID], env)
		}
	}
	if m := disruptions.MaxUnavailable(); m > 1 {
		t.Errorf("%d of the 3 pods were unavailable at once; the PodDisruptionBudget allows 1:\n%s", m, disruptions.History())
	}
	for _, name := range disruptions.UnexpectedDeletions(old) {
		t.Errorf("pod %s deleted: want each old pod evicted once, no new pod deleted", name)
	}

	w.runUntil(t, "name: shop-mesh")
	// Policy mode: the policy and binding exist, owned by the SidecarSet,
	// and the API server injected the pod created after them.
	var metrics deckhandv1alpha1.SidecarSet
	get(t, &metrics, "", "shop-metrics")
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingAdmissionPolicy{}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}} {
		get(t, obj, "", "deckhand-sidecarset-shop-metrics")
		if !metav1.IsControlledBy(obj, &metrics) {
			t.Errorf("%T deckhand-sidecarset-shop-metrics is not controlled by SidecarSet shop-metrics: %v", obj, obj.GetOwnerReferences())
		}
	}
	var api corev1.Pod
	get(t, &api, ns, "shop-api")
	if len(api.Spec.Containers) != 2 || api.Spec.Containers[0].Name != "metrics" || api.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation] != "shop-metrics" {
		t.Errorf("pod shop-api: containers %v, injection record %q; want the metrics sidecar first and the record naming shop-metrics",
			api.Spec.Containers, api.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation])
	}
	// The env change and its revert: the pod condition went False and is
	// True again, and the SidecarSet counts no pod not updatable.
	var podCond *corev1.PodCondition
	for i := range api.Status.Conditions {
		if api.Status.Conditions[i].Type == deckhandv1alpha1.SidecarSetsUpdatablePodCondition {
			podCond = &api.Status.Conditions[i]
		}
	}
	if podCond == nil || podCond.Status != corev1.ConditionTrue || podCond.Reason != "UpdatableInPlace" {
		t.Errorf("pod shop-api: condition %s = %+v; want True, UpdatableInPlace, after the revert", deckhandv1alpha1.SidecarSetsUpdatablePodCondition, podCond)
	}
	if metrics.Status.NotUpdatablePods != 0 {
		t.Errorf("SidecarSet shop-metrics: notUpdatablePods %d after the revert, want 0", metrics.Status.NotUpdatablePods)
	}

	// HotUpgrade: two containers injected, and the image change leaves the
	// same pod with the new image working and the old container on the
	// empty image.
	w.runUntil(t, "kubectl patch scs shop-mesh")
	var mesh corev1.Pod
	get(t, &mesh, ns, "shop-mesh")
	if got := fmt.Sprint(containerNames(mesh)); got != "[proxy-1 proxy-2 shop-mesh]" {
		t.Errorf("pod shop-mesh: containers %s; want proxy-1 proxy-2 shop-mesh", got)
	}
	meshUID := mesh.UID
	w.runUntil(t, "kubectl delete")
	get(t, &mesh, ns, "shop-mesh")
	images := map[string]string{}
	for _, c := range mesh.Spec.Containers {
		images[c.Name] = c.Image
	}
	if mesh.UID != meshUID || mesh.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation] != `{"proxy":"proxy-2"}` ||
		images["proxy-2"] != "ghcr.io/example/mesh-proxy:1.1" || images["proxy-1"] != "ghcr.io/example/mesh-empty:1.0" {
		t.Errorf("pod shop-mesh after the hot upgrade: UID %s (before %s), working %s, images %v; want the same pod working in proxy-2 with mesh-proxy:1.1, proxy-1 on the empty image",
			mesh.UID, meshUID, mesh.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation], images)
	}
	if s, ok := containerStatus(mesh, "proxy-2"); !ok || !s.Ready || s.Image != "ghcr.io/example/mesh-proxy:1.1" {
		t.Errorf("pod shop-mesh: proxy-2 status %+v; want mesh-proxy:1.1 ready", s)
	}
	var meshSet deckhandv1alpha1.SidecarSet
	get(t, &meshSet, "", "shop-mesh")
	if st := meshSet.Status; st.ObservedGeneration != meshSet.Generation || st.UpdatedPods != 1 || st.HotUpgradingPods != 0 {
		t.Errorf("SidecarSet shop-mesh status %+v; want the latest generation, 1 pod updated, none hot-upgrading", st)
	}

	// patchPodMetadata: the pod carries the allowed annotations, policies
	// applied to its own values; the SidecarSet naming a key outside the
	// allowlist was never stored.
	var web corev1.Pod
	get(t, &web, ns, "shop-web")
	if got := web.Annotations["example.com/log-format"]; got != "json" {
		t.Errorf("pod shop-web: annotation example.com/log-format %q, want json (Overwrite)", got)
	}
	if got := web.Annotations["example.com/scrape"]; got != `{"path":"/metrics","port":9090}` {
		t.Errorf("pod shop-web: annotation example.com/scrape %q, want the merge of the pod's and the SidecarSet's", got)
	}
	if err := suite.client.Get(testutil.Context(t, time.Minute), client.ObjectKey{Name: "shop-sneaky"}, &deckhandv1alpha1.SidecarSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("SidecarSet shop-sneaky (a key outside the allowlist): %v, want NotFound", err)
	}

	w.runUntil(t, "kubectl delete scs shop-history")
	checkSidecarSetHistory(t)
	w.runRest(t)
}

// checkSidecarSetHistory checks the end state of the revision-history
// walkthrough: at most revisionHistoryLimit (3) ControllerRevisions after
// five image changes, the latest among them, and a pod created while the
// 1.39 revision was pinned carrying that revision's image and hash.
func checkSidecarSetHistory(t *testing.T) {
	t.Helper()
	var scs deckhandv1alpha1.SidecarSet
	get(t, &scs, "", "shop-history")
	var revs appsv1.ControllerRevisionList
	if err := suite.client.List(context.Background(), &revs, client.InNamespace("deckhand-system"),
		client.MatchingLabels{deckhandv1alpha1.SidecarSetNameLabel: "shop-history"}); err != nil {
		t.Fatal(err)
	}
	byVersion := map[string]appsv1.ControllerRevision{}
	for _, cr := range revs.Items {
		if !metav1.IsControlledBy(&cr, &scs) {
			t.Errorf("ControllerRevision %s is not controlled by SidecarSet shop-history: %v", cr.Name, cr.OwnerReferences)
		}
		byVersion[cr.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel]] = cr
	}
	if len(revs.Items) > 3 {
		t.Errorf("%d ControllerRevisions of shop-history (revisionHistoryLimit 3): %v", len(revs.Items), slices.Collect(maps.Keys(byVersion)))
	}
	latest, ok := byVersion["1.41"]
	if !ok || latest.Name != scs.Status.LatestRevisionName || latest.Labels[deckhandv1alpha1.SidecarSetRevisionLabel] != scs.Status.LatestRevision {
		t.Errorf("the latest ControllerRevision (custom version 1.41) is %q; status names %q at %s", latest.Name, scs.Status.LatestRevisionName, scs.Status.LatestRevision)
	}
	pinned, ok := byVersion["1.39"]
	if !ok {
		t.Fatalf("no ControllerRevision of custom version 1.39 (the pinned one): %v", slices.Collect(maps.Keys(byVersion)))
	}
	var pod corev1.Pod
	get(t, &pod, "sidecarset-history", "shop-history")
	image := ""
	for _, c := range pod.Spec.Containers {
		if c.Name == "logger" {
			image = c.Image
		}
	}
	record := pod.Annotations[deckhandv1alpha1.SidecarSetHashAnnotation]
	if image != "busybox:1.39" || !strings.Contains(record, pinned.Labels[deckhandv1alpha1.SidecarSetRevisionLabel]) {
		t.Errorf("pod shop-history: logger image %s, record %s; want busybox:1.39 at the pinned revision %s",
			image, record, pinned.Labels[deckhandv1alpha1.SidecarSetRevisionLabel])
	}
}

func containerNames(p corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

func TestPodSetWalkthrough(t *testing.T) {
	const ns, name = "podset-demo", "web"
	w := startWalkthrough(t, "docs/podset.md", namespace(ns), namespace("podset-tutorial"))
	web := map[string]string{"app": "web"}

	w.runUntil(t, `"path":"/spec/template/spec/containers/0/env"`)
	if n := len(podUIDs(t, ns, web)); n != 5 {
		t.Fatalf("after scaling: %d pods, want 5", n)
	}
	beforeEnv := podUIDs(t, ns, web)

	w.runUntil(t, `"path":"/spec/template/spec/containers/0/image"`)
	beforeImage := podUIDs(t, ns, web)
	for _, podName := range survivors(beforeEnv, beforeImage) {
		t.Errorf("pod %s survived an env change, which needs a new pod", podName)
	}

	w.runUntil(t, `{"spec":{"paused":true}}`)
	var ps deckhandv1alpha1.PodSet
	get(t, &ps, ns, name)
	if s := ps.Status; s.ObservedGeneration != ps.Generation || s.Replicas != 5 || s.UpdatedReplicas != 5 || s.ReadyReplicas != 5 {
		t.Errorf("PodSet status: observedGeneration %d (generation %d), replicas %d, updated %d, ready %d; want 5 of 5",
			s.ObservedGeneration, ps.Generation, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas)
	}
	if after := podUIDs(t, ns, web); !maps.Equal(beforeImage, after) {
		t.Errorf("the image change replaced pods (an in-place update keeps them):\nbefore %v\nafter  %v", beforeImage, after)
	}
	for _, p := range listPods(t, ns, web) {
		if s, ok := containerStatus(p, "web"); !ok || s.Image != "nginx:1.28" || !s.Ready {
			t.Errorf("pod %s: container status %+v; want nginx:1.28, ready", p.Name, s)
		}
	}
	rolledOut := ps.Status.UpdateRevision

	// Paused, the template change reaches no pod.
	w.runUntil(t, `{"spec":{"paused":false}}`)
	get(t, &ps, ns, name)
	if s := ps.Status; !ps.Spec.Paused || s.ObservedGeneration != ps.Generation || s.UpdatedReplicas != 0 || s.Replicas != 5 ||
		s.UpdateRevision == rolledOut {
		t.Errorf("paused PodSet: paused %v, observedGeneration %d (generation %d), replicas %d, updated %d, updateRevision %s (was %s); want 0 of 5 updated to a new revision",
			ps.Spec.Paused, s.ObservedGeneration, ps.Generation, s.Replicas, s.UpdatedReplicas, s.UpdateRevision, rolledOut)
	}
	if paused := podUIDs(t, ns, web); !maps.Equal(beforeImage, paused) {
		t.Errorf("a template change while paused replaced pods:\nbefore %v\nafter  %v", beforeImage, paused)
	}
	for _, p := range listPods(t, ns, web) {
		if v := envOf(p, "web", "GREETING"); v != "hello" {
			t.Errorf("pod %s: GREETING=%q while paused, want the old hello", p.Name, v)
		}
	}

	// Resumed, the rollout finishes; then the rollback returns to hello.
	w.runUntil(t, "apps.deckhand.dev/rollback-to=previous")
	for _, p := range listPods(t, ns, web) {
		if v := envOf(p, "web", "GREETING"); v != "bonjour" {
			t.Errorf("pod %s: GREETING=%q after the resume, want bonjour", p.Name, v)
		}
	}

	w.runUntil(t, "kubectl delete namespace")
	get(t, &ps, ns, name)
	if s := ps.Status; s.ObservedGeneration != ps.Generation || s.Replicas != 5 || s.UpdatedReplicas != 5 || s.ReadyReplicas != 5 ||
		s.UpdateRevision != rolledOut {
		t.Errorf("after the rollback: observedGeneration %d (generation %d), replicas %d, updated %d, ready %d, updateRevision %s; want 5 of 5 on %s",
			s.ObservedGeneration, ps.Generation, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.UpdateRevision, rolledOut)
	}
	if _, ok := ps.Annotations[deckhandv1alpha1.PodSetRollbackToAnnotation]; ok {
		t.Errorf("the rollback-to annotation is still there: %v", ps.Annotations)
	}
	for _, p := range listPods(t, ns, web) {
		if v := envOf(p, "web", "GREETING"); v != "hello" || p.Labels[deckhandv1alpha1.PodSetRevisionLabel] != rolledOut {
			t.Errorf("pod %s: GREETING=%q, revision %s after the rollback; want hello on %s", p.Name, v, p.Labels[deckhandv1alpha1.PodSetRevisionLabel], rolledOut)
		}
	}
	var revs appsv1.ControllerRevisionList
	if err := suite.client.List(context.Background(), &revs, client.InNamespace(ns), client.MatchingLabels{deckhandv1alpha1.PodSetNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	var newest appsv1.ControllerRevision
	for _, cr := range revs.Items {
		if cr.Revision > newest.Revision {
			newest = cr
		}
	}
	if len(revs.Items) != 4 || newest.Revision != 5 || newest.Name != name+"-"+rolledOut {
		t.Errorf("ControllerRevisions: %d, newest %s (revision %d); want 4 templates, the rolled-back one renumbered 5 as %s-%s",
			len(revs.Items), newest.Name, newest.Revision, name, rolledOut)
	}

	w.runRest(t)
}

// envOf is the value of the variable name in container c of pod p.
func envOf(p corev1.Pod, c, name string) string {
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != c {
			continue
		}
		for _, e := range ctr.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

func TestWebServerWalkthrough(t *testing.T) {
	const ns, name = "webserver-demo", "webapp"
	w := startWalkthrough(t, "docs/webserver.md", namespace(ns), namespace("webserver-restricted"))

	// spec.ingress: an Ingress of the WebServer's own, with TLS from the
	// Secret, and the external address in status.url.
	w.runUntil(t, "kind: Gateway")
	var ws deckhandv1alpha1.WebServer
	get(t, &ws, ns, name)
	var ing networkingv1.Ingress
	get(t, &ing, ns, name)
	if !metav1.IsControlledBy(&ing, &ws) || len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "webapp.example.com" ||
		len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "webapp-tls" || ws.Status.URL != "https://webapp.example.com/" {
		t.Errorf("Ingress %s: owners %v, rules %+v, tls %+v; WebServer status.url %q; want the WebServer's Ingress for webapp.example.com with TLS from webapp-tls, and https://webapp.example.com/",
			name, ing.OwnerReferences, ing.Spec.Rules, ing.Spec.TLS, ws.Status.URL)
	}

	w.runUntil(t, "kubectl delete namespace")
	get(t, &ws, ns, name)
	if ws.Spec.Image != "nginx:1.28" || ws.Spec.Port != 8080 || ws.Spec.Replicas == nil || *ws.Spec.Replicas != 3 {
		t.Errorf("WebServer spec: %+v; want the walkthrough's edit (nginx:1.28, port 8080, 3 replicas)", ws.Spec)
	}
	var deploy appsv1.Deployment
	get(t, &deploy, ns, name)
	c := deploy.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Image != "nginx:1.28" || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != 8080 ||
		deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 3 {
		t.Errorf("Deployment does not follow the WebServer: replicas %v, containers %+v", deploy.Spec.Replicas, c)
	}
	var svc corev1.Service
	get(t, &svc, ns, name)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("Service ports %+v; want 8080", svc.Spec.Ports)
	}

	w.runRest(t)
}

func TestRestartScheduleWalkthrough(t *testing.T) {
	const ns, generated = "restart-demo", "web-deployment"
	w := startSection(t, "docs/restartschedule.md", "## Walkthrough on `make run`", namespace(ns))
	web := map[string]string{"app": "web"}

	w.runUntil(t, "--for=jsonpath='{.status.history[0].result}'=Succeeded")
	before := podUIDs(t, ns, web)

	w.runUntil(t, "apps.deckhand.dev/restart-schedule-")
	var rs deckhandv1alpha1.RestartSchedule
	get(t, &rs, ns, generated)
	if len(rs.Status.History) == 0 {
		t.Fatalf("RestartSchedule %s has no history", generated)
	}
	run := rs.Status.History[0]
	if run.Workload != "Deployment/web" || run.Result != deckhandv1alpha1.RestartSucceeded {
		t.Errorf("latest run %+v; want Deployment/web Succeeded", run)
	}
	var deploy appsv1.Deployment
	get(t, &deploy, ns, "web")
	restartedAt := deploy.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
	if want := run.ScheduledTime.UTC().Format(time.RFC3339); restartedAt != want {
		t.Errorf("Deployment's %s = %q; want the run's slot %q", deckhandv1alpha1.RestartedAtAnnotation, restartedAt, want)
	}
	// A restart replaces every pod.
	for _, podName := range survivors(before, podUIDs(t, ns, web)) {
		t.Errorf("pod %s was not replaced by the restart", podName)
	}

	// The blackout: every scheduled slot skipped, the overridden run-now
	// restarted the Deployment once.
	w.runUntil(t, "kubectl delete namespace restart-demo")
	var frozen deckhandv1alpha1.RestartSchedule
	get(t, &frozen, ns, "frozen")
	var runNow []deckhandv1alpha1.RestartRecord
	skipped := 0
	for _, h := range frozen.Status.History {
		switch {
		case h.Trigger == deckhandv1alpha1.RestartTriggerRunNow:
			runNow = append(runNow, h)
		case h.Result == deckhandv1alpha1.RestartSkipped && strings.Contains(h.Message, "is a blackout date"):
			skipped++
		default:
			t.Errorf("a scheduled slot on the blackout date was not skipped: %+v", h)
		}
	}
	if skipped == 0 {
		t.Errorf("no slot recorded as skipped for the blackout: %+v", frozen.Status.History)
	}
	if len(runNow) != 1 || runNow[0].Result != deckhandv1alpha1.RestartSucceeded || runNow[0].Workload != "Deployment/api" {
		t.Fatalf("run-now entries %+v; want one Succeeded restart of Deployment/api", runNow)
	}
	var api appsv1.Deployment
	get(t, &api, ns, "api")
	if api.Generation != 2 {
		t.Errorf("Deployment api at generation %d; want 2 (created, then restarted once by the run-now)", api.Generation)
	}
	if got, want := api.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation], runNow[0].ScheduledTime.UTC().Format(time.RFC3339); got != want {
		t.Errorf("Deployment api's %s = %q; want the run-now's start time %q", deckhandv1alpha1.RestartedAtAnnotation, got, want)
	}
	if frozen.Status.NextRunTime == nil || !frozen.Status.NextRunTime.After(time.Now().Add(time.Hour)) {
		t.Errorf("status.nextRunTime %v; want the first slot after the blackout", frozen.Status.NextRunTime)
	}

	w.runRest(t)
}

func TestRestartOnNeedWalkthrough(t *testing.T) {
	const ns = "leak-demo"
	w := startSection(t, "docs/restartschedule.md", "### Restart on need on `make run`", namespace(ns))

	w.runUntil(t, "name: web-leak")
	memory := findLeak(t, ns, "web", localcluster.SimMemoryLeakPerSecondAnnotation, "4Mi")
	w.runUntil(t, "name: gpu\n")
	memory.expectReplaced(t, "web-leak", deckhandv1alpha1.RestartTriggerMemory, "128Mi")

	w.runUntil(t, "name: gpu-leak")
	gpu := findLeak(t, ns, "gpu", localcluster.SimGPUMemoryLeakAnnotation, "200")
	w.runUntil(t, "kubectl delete namespace leak-demo")
	gpu.expectReplaced(t, "gpu-leak", deckhandv1alpha1.RestartTriggerQuery, "4096")

	w.runRest(t)
}

// walkthroughLeak is a two-pod Deployment of the restart-on-need
// walkthrough: the pod labelled leak=true leaks, the other is flat.
type walkthroughLeak struct {
	ns, app string
	leaking corev1.Pod
	flat    map[string]types.UID
}

// findLeak finds the pods of the Deployment labelled app=app: one labelled
// leak=true with annotation set to value, and the flat one.
func findLeak(t *testing.T, ns, app, annotation, value string) walkthroughLeak {
	t.Helper()
	leaking := listPods(t, ns, map[string]string{"app": app, "leak": "true"})
	if len(leaking) != 1 || leaking[0].Annotations[annotation] != value {
		t.Fatalf("%d pods of %s labelled leak=true, want one with %s=%s: %+v", len(leaking), app, annotation, value, leaking)
	}
	flat := podUIDs(t, ns, map[string]string{"app": app})
	delete(flat, leaking[0].Name)
	if len(flat) != 1 {
		t.Fatalf("pods of %s besides the leaking one: %v, want the flat one", app, flat)
	}
	return walkthroughLeak{ns: ns, app: app, leaking: leaking[0], flat: flat}
}

// expectReplaced checks that RestartSchedule name's history has one entry
// of trigger, the leaking pod evicted with a value above above, that the
// leaking pod is gone and replaced, and that the flat pod is the same pod.
func (l walkthroughLeak) expectReplaced(t *testing.T, name string, trigger deckhandv1alpha1.RestartTrigger, above string) {
	t.Helper()
	var rs deckhandv1alpha1.RestartSchedule
	get(t, &rs, l.ns, name)
	var entries []deckhandv1alpha1.RestartRecord
	for _, h := range rs.Status.History {
		if h.Trigger == trigger {
			entries = append(entries, h)
		}
	}
	if len(entries) != 1 || entries[0].Pod != l.leaking.Name || entries[0].Workload != "Deployment/"+l.app || entries[0].Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("%s history %+v; want one %s entry: the leaking pod %s of Deployment/%s evicted", name, rs.Status.History, trigger, l.leaking.Name, l.app)
	}
	if v, err := resource.ParseQuantity(entries[0].Value); err != nil || v.Cmp(resource.MustParse(above)) <= 0 {
		t.Errorf("%s history value %q; want what the trigger saw, above %s", name, entries[0].Value, above)
	}
	after := podUIDs(t, l.ns, map[string]string{"app": l.app})
	if slices.Contains(slices.Collect(maps.Values(after)), l.leaking.UID) {
		t.Errorf("the leaking pod %s (%s) is still there: %v", l.leaking.Name, l.leaking.UID, after)
	}
	for flat, uid := range l.flat {
		if after[flat] != uid {
			t.Errorf("the flat pod %s (%s) was replaced: %v", flat, uid, after)
		}
	}
	if len(after) != 2 {
		t.Errorf("%d pods of %s after the eviction, want the flat one and the replacement: %v", len(after), l.app, after)
	}
}

// tutorialTimeout bounds a wait of the tutorials' checks but the restart's.
const tutorialTimeout = 90 * time.Second

// tutorialFile is the path of an example object of the operator tutorials
// Deckhand's kinds come from, kept in testdata/tutorials as the tutorial
// writes it (each file says which tutorial, and what was adapted).
func tutorialFile(name string) string { return filepath.Join("testdata", "tutorials", name) }

// TestTutorialExamples applies the example object of each of the four
// operator tutorials Deckhand's kinds come from with kubectl, in one
// namespace, on `make run`'s cluster where the manager runs as its
// ServiceAccount, and checks what the tutorial says happens to it (see
// docs/tutorials.md). The four are applied together and checked at once,
// the restart (which waits for a minute's slot) started first.
func TestTutorialExamples(t *testing.T) {
	failOnRefusals(t)
	ns := testutil.Namespace(t, suite.client)
	// The SidecarSet is cluster-scoped: the namespace's deletion leaves it.
	t.Cleanup(func() { kubectl(t, "delete", "scs", "tutorial-sidecarset", "--ignore-not-found") })

	kubectl(t, "apply", "-n", ns, "-f", tutorialFile("deployment.yaml"), "-f", tutorialFile("sidecarset.yaml"),
		"-f", tutorialFile("webserver.yaml"), "-f", tutorialFile("podset.yaml"))

	t.Run("RestartSchedule", func(t *testing.T) { t.Parallel(); checkTutorialRestart(t, ns) })
	t.Run("PodSet", func(t *testing.T) { t.Parallel(); checkTutorialPodSet(t, ns) })
	t.Run("WebServer", func(t *testing.T) { t.Parallel(); checkTutorialWebServer(t, ns) })
	t.Run("SidecarSet", func(t *testing.T) { t.Parallel(); checkTutorialSidecarSet(t, ns) })
}

// The ERU tutorial: the annotated Deployment gets a RestartSchedule of its
// own; the cron expression set on it restarts the Deployment on schedule,
// through a pod-template annotation, as a rolling update.
func checkTutorialRestart(t *testing.T, ns string) {
	const name = "eru-demo-deployment"
	app := map[string]string{"app": "eru-demo"}
	var rs deckhandv1alpha1.RestartSchedule
	waitFor(t, tutorialTimeout, &rs, ns, name, "generated", func() bool { return true })
	var deploy appsv1.Deployment
	get(t, &deploy, ns, "eru-demo")
	if rs.Labels[deckhandv1alpha1.RestartScheduleGeneratedLabel] != "true" || !metav1.IsControlledBy(&rs, &deploy) ||
		rs.Spec.Target.TargetRef == nil || *rs.Spec.Target.TargetRef != (deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "eru-demo"}) ||
		rs.Spec.Schedule != "0 3 * * *" {
		t.Fatalf("RestartSchedule %s: labels %v, owners %v, targetRef %v, schedule %q; want generated for and controlled by Deployment eru-demo, on the default 0 3 * * *",
			name, rs.Labels, rs.OwnerReferences, rs.Spec.Target.TargetRef, rs.Spec.Schedule)
	}
	waitFor(t, tutorialTimeout, &deploy, ns, "eru-demo", "rolled out", func() bool {
		return deploy.Status.ObservedGeneration == deploy.Generation && deploy.Status.UpdatedReplicas == 2 && deploy.Status.ReadyReplicas == 2 && deploy.Status.Replicas == 2
	})
	before := podUIDs(t, ns, app)

	// The tutorial's "this custom resource can be given a cron expression": every
	// minute, so that the test sees a slot.
	kubectl(t, "patch", "-n", ns, "rsched", name, "--type=merge", "-p", `{"spec":{"schedule":"* * * * *"}}`)
	waitFor(t, 3*time.Minute, &rs, ns, name, "has a Succeeded run", func() bool {
		return len(rs.Status.History) > 0 && rs.Status.History[0].Result == deckhandv1alpha1.RestartSucceeded
	})
	run := rs.Status.History[0]
	get(t, &deploy, ns, "eru-demo")
	if got, want := deploy.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation], run.ScheduledTime.UTC().Format(time.RFC3339); run.Workload != "Deployment/eru-demo" || got != want {
		t.Errorf("run %+v, Deployment's %s = %q; want Deployment/eru-demo restarted at the run's slot %q", run, deckhandv1alpha1.RestartedAtAnnotation, got, want)
	}
	after := podUIDs(t, ns, app)
	for _, pod := range survivors(before, after) {
		t.Errorf("pod %s was not replaced by the restart", pod)
	}
	if len(after) != 2 {
		t.Errorf("%d pods after the restart, want the Deployment's 2: %v", len(after), after)
	}
}

// The PodSet tutorial: the PodSet of replicas alone runs 3 pods it owns, names them in
// status.podNames, and its deletion deletes them.
func checkTutorialPodSet(t *testing.T, ns string) {
	const name = "example-podset"
	var ps deckhandv1alpha1.PodSet
	waitFor(t, tutorialTimeout, &ps, ns, name, "with 3 ready replicas", func() bool {
		return ps.Status.ObservedGeneration == ps.Generation && ps.Status.Replicas == 3 && ps.Status.ReadyReplicas == 3
	})
	var names []string
	var owned []client.Object
	for _, p := range listPods(t, ns, ps.Spec.Selector.MatchLabels) {
		names = append(names, p.Name)
		owned = append(owned, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})
		if !metav1.IsControlledBy(&p, &ps) || !podutil.IsPodReady(&p) || !strings.HasPrefix(p.Name, name+"-") {
			t.Errorf("pod %s: owners %v, ready %v; want a Ready pod named after and controlled by PodSet %s", p.Name, p.OwnerReferences, podutil.IsPodReady(&p), name)
		}
	}
	slices.Sort(names)
	if len(names) != 3 || !slices.Equal(names, ps.Status.PodNames) {
		t.Errorf("pods %v, status.podNames %v; want the same 3", names, ps.Status.PodNames)
	}

	kubectl(t, "delete", "-n", ns, "podset", name)
	waitDeleted(t, tutorialTimeout, ns, "the PodSet's pods are deleted with it", owned...)
}

// "Kubernetes Operator Demystified": the WebServer gets a Deployment of its
// image, port and replicas and a Service of its port, is listed by `kubectl
// get mws` and described by `kubectl describe mws`, and its deletion deletes
// both.
func checkTutorialWebServer(t *testing.T, ns string) {
	const name = "webapp"
	kubectl(t, "wait", "-n", ns, "mws/"+name, "--for=condition=Available", fmt.Sprintf("--timeout=%s", tutorialTimeout))
	var ws deckhandv1alpha1.WebServer
	get(t, &ws, ns, name)
	var deploy appsv1.Deployment
	waitFor(t, tutorialTimeout, &deploy, ns, name, "with 2 ready replicas", func() bool { return deploy.Status.ReadyReplicas == 2 })
	c := deploy.Spec.Template.Spec.Containers
	if !metav1.IsControlledBy(&deploy, &ws) || deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 2 ||
		len(c) != 1 || c[0].Image != "nginx" || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != 80 {
		t.Errorf("Deployment %s: owners %v, replicas %v, containers %+v; want it controlled by the WebServer, 2 replicas of nginx on port 80",
			name, deploy.OwnerReferences, deploy.Spec.Replicas, c)
	}
	var svc corev1.Service
	get(t, &svc, ns, name)
	if !metav1.IsControlledBy(&svc, &ws) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 {
		t.Errorf("Service %s: owners %v, ports %+v; want it controlled by the WebServer, port 80", name, svc.OwnerReferences, svc.Spec.Ports)
	}

	for _, shortName := range []string{"mws", "myweb"} {
		if out := kubectl(t, "get", "-n", ns, shortName); !strings.Contains(out, name+" ") {
			t.Errorf("kubectl get %s does not list %s:\n%s", shortName, name, out)
		}
	}
	describe := kubectl(t, "describe", "-n", ns, "mws", name)
	for _, field := range []string{`Image:\s+nginx\n`, `Port:\s+80\n`, `Replicas:\s+2\n`} {
		if !regexp.MustCompile(field).MatchString(describe) {
			t.Errorf("kubectl describe mws %s has no line %q:\n%s", name, field, describe)
		}
	}

	kubectl(t, "delete", "-n", ns, "mws", name)
	waitDeleted(t, tutorialTimeout, ns, "the Deployment and the Service are deleted with the WebServer", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// The SidecarSet lecture: the SidecarSet is stored with its defaults (the
// webhook's imagePullPolicy, the schema's RollingUpdate and
// BeforeAppContainer), the webhook injects its sidecar into a pod it selects
// created afterwards, and the controller counts the pod as matched, updated
// and ready.
func checkTutorialSidecarSet(t *testing.T, ns string) {
	const name = "tutorial-sidecarset"
	var scs deckhandv1alpha1.SidecarSet
	waitFor(t, tutorialTimeout, &scs, "", name, "observed", func() bool { return scs.Status.ObservedGeneration == scs.Generation })
	if s := scs.Spec; s.UpdateStrategy.Type != deckhandv1alpha1.RollingUpdateSidecarSetStrategy || len(s.Containers) != 1 ||
		s.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent || s.Containers[0].PodInjectPolicy != deckhandv1alpha1.BeforeAppContainer {
		t.Errorf("stored SidecarSet spec %+v; want the defaults RollingUpdate, IfNotPresent, BeforeAppContainer", s)
	}

	kubectl(t, "apply", "-n", ns, "-f", tutorialFile("pod.yaml"))
	var pod corev1.Pod
	get(t, &pod, ns, "tutorial-sidecar-pod")
	if got := fmt.Sprint(containerNames(pod)); got != "[sidecar1 app]" || pod.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation] != name {
		t.Errorf("pod tutorial-sidecar-pod: containers %s, injection record %q; want sidecar1 injected before app by %s",
			got, pod.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation], name)
	}
	waitFor(t, tutorialTimeout, &scs, "", name, "counting the pod", func() bool {
		s := scs.Status
		return s.MatchedPods == 1 && s.UpdatedPods == 1 && s.ReadyPods == 1
	})
}
