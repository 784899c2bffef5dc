package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// retry runs fn until it succeeds, for at most timeout. Writes that go
// through Deckhand's webhooks (failurePolicy Fail) are refused while the
// manager is down, as users would see; the test, like a user, tries again.
func retry(t *testing.T, timeout time.Duration, what string, fn func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = fn(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: still failing after %s: %v", what, timeout, last)
	}
}

// orErr is a condition's answer: done, or not yet because of err.
func orErr(ok bool, err error) (bool, error) {
	if ok {
		return true, nil
	}
	return false, err
}

// killPlan is how many SIGKILLs a crash test waits for, and the range of
// the random gaps between them.
func killPlan() (minKills int, minGap, maxGap time.Duration) {
	if stress() {
		return 20, 2 * time.Second, 8 * time.Second
	}
	return 2, 3 * time.Second, 8 * time.Second
}

// chaos SIGKILLs the main manager at random moments and restarts it.
type chaos struct {
	mu       sync.Mutex
	kills    int
	lastKill time.Time
	downtime time.Duration
	// takeovers are the times from each kill until the restarted manager
	// held the leader Lease.
	takeovers []time.Duration
	err       error
	stop      chan struct{}
	done      chan struct{}
}

// startChaos kills the manager every minGap..maxGap (uniformly random),
// keeps it down 0..500ms, restarts it and waits until it is ready, until
// stopped or maxKills (0: no limit) is reached.
func startChaos(t *testing.T, minGap, maxGap time.Duration, maxKills int) *chaos {
	t.Helper()
	ensureDeckhand(t)
	c := &chaos{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for maxKills == 0 || c.Kills() < maxKills {
			gap := minGap + time.Duration(rand.Int64N(int64(maxGap-minGap)+1))
			select {
			case <-c.stop:
				return
			case <-time.After(gap):
			}
			holder, err := currentLeaseHolder()
			if err != nil {
				c.fail(err)
				return
			}
			start := time.Now()
			suite.deckhand.Kill()
			c.mu.Lock()
			c.lastKill = start
			c.mu.Unlock()
			time.Sleep(time.Duration(rand.Int64N(int64(500 * time.Millisecond))))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			err = suite.deckhand.Restart(ctx)
			if err == nil {
				// The next gap starts once the new process leads: killed
				// before, it would never have reconciled.
				err = waitLeaseTaken(ctx, holder)
			}
			cancel()
			c.mu.Lock()
			c.kills++
			c.downtime += time.Since(start)
			c.takeovers = append(c.takeovers, time.Since(start))
			c.mu.Unlock()
			if err != nil {
				c.fail(err)
				return
			}
		}
	}()
	t.Cleanup(func() { c.Stop(t) })
	return c
}

func (c *chaos) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Takeovers returns the times from each kill until the restarted manager led.
func (c *chaos) Takeovers() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.takeovers...)
}

// currentLeaseHolder returns who holds the leader Lease ("" when nobody
// does yet), retrying reads for a minute.
func currentLeaseHolder() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var holder string
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		holder, last = leaseHolder(ctx)
		if apierrors.IsNotFound(last) {
			holder, last = "", nil
		}
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the leader Lease: %w (%v)", err, last)
	}
	return holder, nil
}

// waitLeaseTaken waits until someone other than prev (the killed process)
// holds the leader Lease.
func waitLeaseTaken(ctx context.Context, prev string) error {
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx)
		return err == nil && h != "" && h != prev, nil
	})
	if err != nil {
		return fmt.Errorf("the restarted manager did not take the leader Lease from %q: %w", prev, err)
	}
	return nil
}

// LastKill is when the manager was last killed (zero: never).
func (c *chaos) LastKill() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.lastKill }

// Kills is how many times the manager was killed (and restarted) so far.
func (c *chaos) Kills() int { c.mu.Lock(); defer c.mu.Unlock(); return c.kills }

// Stop ends the chaos and fails t if a restart failed. The manager runs afterwards.
func (c *chaos) Stop(t *testing.T) int {
	t.Helper()
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatalf("the manager did not come back after a SIGKILL: %v", c.err)
	}
	ensureDeckhand(t)
	return c.kills
}

// Wait blocks until at least n kills happened (or the chaos ended).
func (c *chaos) Wait(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func(context.Context) (bool, error) {
		select {
		case <-c.done:
			return true, nil
		default:
		}
		return c.Kills() >= n, nil
	}, "%d kills happened (%d so far)", n, c.Kills())
}

// podWatch follows every pod of a namespace from an informer and checks an
// invariant on each event, over the whole run.
type podWatch struct {
	mu         sync.Mutex
	pods       map[string]*corev1.Pod
	check      func(pods map[string]*corev1.Pod) error
	violations []string
	events     int
	stop       chan struct{}
}

func watchPods(t *testing.T, ns string) *podWatch {
	t.Helper()
	w := &podWatch{pods: map[string]*corev1.Pod{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(suite.clientset, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj any) { w.observe(obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.observe(p, true)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(w.stop)
	if !toolscache.WaitForCacheSync(w.stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	t.Cleanup(func() { close(w.stop); f.Shutdown() })
	return w
}

func (w *podWatch) observe(p *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if deleted {
		delete(w.pods, p.Name)
	} else {
		w.pods[p.Name] = p
	}
	if w.check == nil {
		return
	}
	if err := w.check(w.pods); err != nil && len(w.violations) < 20 {
		w.violations = append(w.violations, fmt.Sprintf("event %d (%s): %v", w.events, p.Name, err))
	}
}

// setCheck replaces the invariant (nil: none) and checks it at once.
func (w *podWatch) setCheck(check func(pods map[string]*corev1.Pod) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.check = check
	if check != nil {
		if err := check(w.pods); err != nil && len(w.violations) < 20 {
			w.violations = append(w.violations, fmt.Sprintf("at setCheck: %v", err))
		}
	}
}

// assertHeld fails t with every violation seen so far.
func (w *podWatch) assertHeld(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Fatalf("invariant violated %d time(s) (first ones):\n%s", len(w.violations), strings.Join(w.violations, "\n"))
	}
}

func (w *podWatch) Events() int { w.mu.Lock(); defer w.mu.Unlock(); return w.events }

func podActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// bystanderName names the bystanders (the lone pod: bystanderName-other).
const bystanderName = "bystander"

// bystanders are objects Deckhand does not own, placed next to its work
// (some with the very labels its selectors use, a lone pod with other
// labels). At the end none of them may have been modified or deleted.
type bystanders struct {
	ns        string
	versions  map[string]string // kind/name -> resourceVersion (objects nobody else writes)
	depGen    int64
	depPods   []string // UIDs of the bystander Deployment's pods
	depLabels map[string]string
	lonePod   *corev1.Pod
}

func createBystanders(t *testing.T, ns string, labels map[string]string) *bystanders {
	t.Helper()
	ctx := testutil.Context(t, 3*time.Minute)
	b := &bystanders{ns: ns, versions: map[string]string{}, depLabels: map[string]string{"bystander": "deployment"}}
	for k, v := range labels {
		b.depLabels[k] = v
	}
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns, Labels: labels}, Data: map[string]string{"a": "b"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns, Labels: labels}, StringData: map[string]string{"a": "b"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns, Labels: labels},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	for _, o := range objs {
		if err := suite.client.Create(ctx, o); err != nil {
			t.Fatalf("creating bystander: %v", err)
		}
	}
	// A pod of no controller with other labels: what counts pods by
	// selector must leave it out.
	b.lonePod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: bystanderName + "-other", Namespace: ns, Labels: map[string]string{"bystander": "pod"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "bystander:1"}}},
	}
	if err := suite.client.Create(ctx, b.lonePod); err != nil {
		t.Fatalf("creating the bystander pod: %v", err)
	}
	// A Deployment whose pods carry the labels too: a PodSet or SidecarSet
	// selector matches them, but they have a controller of their own.
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: bystanderName, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: b.depLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: b.depLabels, Annotations: map[string]string{"apps.deckhand.dev/sidecarset-skip-injection": "true"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "bystander:1"}}},
			},
		},
	}
	if err := suite.client.Create(ctx, dep); err != nil {
		t.Fatalf("creating bystander Deployment: %v", err)
	}
	// Recorded once the Deployment's controller is done with it: its 2 pods
	// exist and its status has caught up with its spec.
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := b.pods(ctx)
		if err != nil {
			return false, err
		}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return false, err
		}
		st := dep.Status
		return orErr(len(pods) == 2 && st.ObservedGeneration == dep.Generation && st.UpdatedReplicas == 2,
			fmt.Errorf("%d pods, status %+v", len(pods), st))
	}, "the bystander Deployment has 2 pods")
	for _, o := range objs {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		b.versions[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetResourceVersion()
	}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	b.depGen = dep.Generation
	pods, err := b.pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		b.depPods = append(b.depPods, string(p.UID))
	}
	sort.Strings(b.depPods)
	return b
}

func (b *bystanders) pods(ctx context.Context) ([]corev1.Pod, error) {
	return testutil.LivePods(ctx, suite.client, b.ns, b.depLabels)
}

// assertUntouched fails t if a bystander was modified or deleted, or the
// bystander Deployment's pods were adopted, changed or deleted.
func (b *bystanders) assertUntouched(t *testing.T) {
	t.Helper()
	ctx := testutil.Context(t, time.Minute)
	for key, rv := range b.versions {
		kind, name, _ := strings.Cut(key, "/")
		var o client.Object
		switch kind {
		case "*v1.ConfigMap":
			o = &corev1.ConfigMap{}
		case "*v1.Secret":
			o = &corev1.Secret{}
		case "*v1.Service":
			o = &corev1.Service{}
		}
		if err := suite.client.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: name}, o); err != nil {
			t.Errorf("bystander %s: %v", key, err)
			continue
		}
		if o.GetResourceVersion() != rv {
			t.Errorf("bystander %s was modified (resourceVersion %s -> %s)", key, rv, o.GetResourceVersion())
		}
	}
	dep := &appsv1.Deployment{}
	if err := suite.client.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: bystanderName}, dep); err != nil {
		t.Errorf("bystander Deployment: %v", err)
	} else if dep.Generation != b.depGen {
		t.Errorf("the bystander Deployment's spec was modified (generation %d -> %d)", b.depGen, dep.Generation)
	}
	pods, err := b.pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range pods {
		uids = append(uids, string(p.UID))
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "ReplicaSet" {
			t.Errorf("bystander pod %s changed controller: %+v", p.Name, ref)
		}
		if len(p.Spec.Containers) != 1 {
			t.Errorf("bystander pod %s has %d containers", p.Name, len(p.Spec.Containers))
		}
	}
	sort.Strings(uids)
	if strings.Join(uids, ",") != strings.Join(b.depPods, ",") {
		t.Errorf("the bystander Deployment's pods were deleted or replaced: %v -> %v", b.depPods, uids)
	}
	lone := &corev1.Pod{}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(b.lonePod), lone); err != nil {
		t.Errorf("the bystander pod: %v", err)
	} else if lone.UID != b.lonePod.UID || lone.DeletionTimestamp != nil || len(lone.OwnerReferences) > 0 || len(lone.Spec.Containers) != 1 {
		t.Errorf("the bystander pod was replaced, deleted, adopted or changed: %+v", lone.ObjectMeta)
	}
}

// deletedOwner is a PodSet, WebServer or SidecarSet that a test deleted,
// and what would be its leftovers.
type deletedOwner struct {
	what string
	uid  types.UID
	// name: a Deployment or Service so named, or a pod named name-..., is
	// one of its objects.
	name string
	// selector: a pod it matches, or a Deployment or Service it labels so,
	// is one of its objects unless another object controls it (the
	// bystanders' pods, with the very labels, have their ReplicaSet).
	selector labels.Selector
	// podsOnly: only pods are its objects by selector (a PodSet makes
	// nothing else, and the bystander Deployment and Service carry its
	// labels on purpose).
	podsOnly bool
}

// leftBehind returns the objects of ns that are the deleted owner's.
func (o deletedOwner) leftBehind(ctx context.Context, ns string) ([]string, error) {
	var pods corev1.PodList
	var deps appsv1.DeploymentList
	var svcs corev1.ServiceList
	for _, l := range []client.ObjectList{&pods, &deps, &svcs} {
		if err := suite.client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	var left []string
	check := func(kind string, obj metav1.Object, named bool) {
		ownRef, byName := false, named
		for _, ref := range obj.GetOwnerReferences() {
			ownRef = ownRef || ref.UID == o.uid
		}
		ctrl := metav1.GetControllerOfNoCopy(obj)
		byLabels := o.selector != nil && (kind == "Pod" || !o.podsOnly) &&
			obj.GetName() != bystanderName && o.selector.Matches(labels.Set(obj.GetLabels())) &&
			(ctrl == nil || ctrl.UID == o.uid)
		if ownRef || byName || byLabels {
			left = append(left, fmt.Sprintf("%s %s (owner reference %t, name %t, labels %t)", kind, obj.GetName(), ownRef, byName, byLabels))
		}
	}
	for i := range pods.Items {
		check("Pod", &pods.Items[i], strings.HasPrefix(pods.Items[i].Name, o.name+"-"))
	}
	for i := range deps.Items {
		check("Deployment", &deps.Items[i], deps.Items[i].Name == o.name)
	}
	for i := range svcs.Items {
		check("Service", &svcs.Items[i], svcs.Items[i].Name == o.name)
	}
	return left, nil
}

// assertNoLeftovers waits until nothing of the deleted owner is left in
// ns: no pod, Deployment or Service that refers to it, has its name or
// carries its labels. The garbage collector removes what carries the owner
// reference; a leak is what it cannot find, an object created without one.
func assertNoLeftovers(t *testing.T, ns string, o deletedOwner) {
	t.Helper()
	testutil.Eventually(t, 3*time.Minute, func(context.Context) (bool, error) {
		// A context of its own: the last check before the timeout must
		// still answer, so that the failure names what was left.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left, err := o.leftBehind(ctx, ns)
		if err != nil {
			return false, err
		}
		return orErr(len(left) == 0, fmt.Errorf("left behind by %s: %v", o.what, left))
	}, "nothing of %s is left", o.what)
}

// selects reports whether p is one of the pods a PodSet with selector sel
// and UID uid counts against its replicas: an active pod its selector
// matches that no other object controls. An orphan it matches counts (the
// PodSet adopts it), so a pod created without its owner reference is seen.
func selects(sel labels.Selector, uid types.UID, p *corev1.Pod) bool {
	if !podActive(p) || !sel.Matches(labels.Set(p.Labels)) {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(p)
	return ref == nil || ref.UID == uid
}

// waitInjects waits until the pod webhook injects a pod labelled labels in
// ns (a server-side dry run, nothing is stored): the webhook's cache has
// the SidecarSet.
func waitInjects(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
		if err := suite.client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return orErr(len(p.Spec.Containers) > 1, fmt.Errorf("%d containers", len(p.Spec.Containers)))
	}, "the pod webhook injects pods labelled %v (its cache has the SidecarSet)", labels)
}

// createSidecarSet creates (retrying while the webhooks are down) a
// SidecarSet named name injecting a "sidecar" container into the pods of ns
// labelled podLabels, deleted when t ends, and waits until the pod webhook
// injects with it.
func createSidecarSet(t *testing.T, name, ns string, podLabels map[string]string) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := sidecarSetOver(name, ns, podLabels, corev1.Container{Name: "sidecar", Image: "sidecar:1"})
	retry(t, time.Minute, "creating the SidecarSet", func(ctx context.Context) error { return suite.client.Create(ctx, s) })
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), s) })
	waitInjects(t, ns, podLabels)
	return s
}

// sidecarSetOver is the SidecarSet name injecting sidecar into the pods of
// ns labelled podLabels.
func sidecarSetOver(name, ns string, podLabels map[string]string, sidecar corev1.Container) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace: ns, Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: sidecar}},
		},
	}
}

// waitRolledOut waits until s's status, observed at its generation, counts
// n matched pods, all updated and ready, and satisfies also (if not nil).
func waitRolledOut(t *testing.T, s *deckhandv1alpha1.SidecarSet, n int, timeout time.Duration, also func(deckhandv1alpha1.SidecarSetStatus) bool) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		cur := &deckhandv1alpha1.SidecarSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return false, err
		}
		st := cur.Status
		return orErr(st.ObservedGeneration == cur.Generation && st.UpdatedReadyPods == int32(n) && st.MatchedPods == int32(n) &&
			(also == nil || also(st)), fmt.Errorf("status %+v", st))
	}, "the SidecarSet reports all %d pods updated and ready", n)
}

// startManager starts another manager (the caller stopped the suite's)
// serving webhooks on port, stopped when t ends.
func startManager(t *testing.T, name string, port int, args ...string) *localcluster.DeckhandProcess {
	t.Helper()
	d, err := suite.cluster.StartDeckhand(testutil.Context(t, 3*time.Minute), localcluster.DeckhandOptions{
		Binary: suite.bin, WebhookPort: port, CertDir: suite.certDir, Name: name, Args: append([]string{"--restart-schedule-min-interval=1s"}, args...),
	})
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(d.Stop)
	return d
}

// namespace creates a namespace for t and fails t if a manager, under its
// own identity, is refused a request while t runs.
func namespace(t *testing.T) string {
	t.Helper()
	testenv.FailOnRefusals(t, suite.cluster.ManagerRefusals)
	return testutil.Namespace(t, suite.client)
}
