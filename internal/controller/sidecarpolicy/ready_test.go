package sidecarpolicy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// readyTries is how many SidecarSets each mode creates, readyWorkers how
// many at a time.
const (
	readyTries   = 50
	readyWorkers = 5
)

// TestReadyMeansNewPodsAreInjected: in each mode, a SidecarSet is created,
// waited for as `kubectl wait --for=condition=Ready` waits (a watch until
// Ready is True with its observedGeneration the SidecarSet's generation),
// and a pod it selects is created at once: every such pod carries the
// sidecar. In Policy mode, Ready waits until a dry-run pod shows that the
// API server applies the policy; in Webhook mode, Ready is written from the
// manager's cache, the same informer the in-process pod webhook reads.
func TestReadyMeansNewPodsAreInjected(t *testing.T) {
	ns := env.Namespace(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []deckhandv1alpha1.InjectionMode{deckhandv1alpha1.PolicyInjection, deckhandv1alpha1.WebhookInjection} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testutil.Context(t, 90*time.Second)
			var misses atomic.Int32
			var mu sync.Mutex
			var missed []string
			next := make(chan int)
			var wg sync.WaitGroup
			for range readyWorkers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						miss, err := readyThenPod(ctx, wc, ns, mode, i)
						if err != nil {
							t.Error(err)
							continue
						}
						if miss != "" {
							misses.Add(1)
							mu.Lock()
							missed = append(missed, miss)
							mu.Unlock()
						}
					}
				}()
			}
			start := time.Now()
			for i := range readyTries {
				next <- i
			}
			close(next)
			wg.Wait()
			t.Logf("%s mode: %d SidecarSets, %d pod(s) created after Ready without the sidecar, in %v", mode, readyTries, misses.Load(), time.Since(start).Round(time.Millisecond))
			if n := misses.Load(); n > 0 {
				t.Errorf("%d of %d pods created right after their SidecarSet was Ready lack the sidecar: %v", n, readyTries, missed)
			}
		})
	}
}

// readyThenPod creates SidecarSet i in mode, waits for Ready, creates a pod
// it selects and deletes the SidecarSet. It returns a description of the
// pod when it lacks the sidecar.
func readyThenPod(ctx context.Context, wc client.WithWatch, ns string, mode deckhandv1alpha1.InjectionMode, i int) (string, error) {
	name := fmt.Sprintf("ready-%s-%s-%d", map[deckhandv1alpha1.InjectionMode]string{deckhandv1alpha1.PolicyInjection: "p", deckhandv1alpha1.WebhookInjection: "w"}[mode], ns[len(ns)-5:], i)
	podLabels := map[string]string{"app": name}
	s := policySet(name, ns, "log:1")
	s.Spec.InjectionMode = mode
	s.Spec.Selector = &metav1.LabelSelector{MatchLabels: podLabels}
	if i%2 == 1 {
		// Half select by expressions, which the dry-run pod's labels are
		// built from too.
		podLabels = map[string]string{"app": name, "tier": "any"}
		s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{name, name + "-other"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}
	}
	if err := env.Client.Create(ctx, s); err != nil {
		return "", fmt.Errorf("creating SidecarSet %s: %w", name, err)
	}
	defer func() { _ = env.Client.Delete(context.Background(), s) }()
	if err := waitReadyAsKubectl(ctx, wc, name); err != nil {
		return "", err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		return "", fmt.Errorf("creating pod %s: %w", name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "log" {
			return "", nil
		}
	}
	return pod.Name, nil
}

// waitReadyAsKubectl waits for SidecarSet name as `kubectl wait
// --for=condition=Ready` does: it reads the object, then watches it from
// that resourceVersion until the Ready condition is True and its
// observedGeneration is the object's generation.
func waitReadyAsKubectl(ctx context.Context, wc client.WithWatch, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", name)
	list := &deckhandv1alpha1.SidecarSetList{}
	if err := wc.List(ctx, list, client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return err
	}
	for i := range list.Items {
		if readyNow(&list.Items[i]) {
			return nil
		}
	}
	w, err := wc.Watch(ctx, &deckhandv1alpha1.SidecarSetList{}, client.MatchingFieldsSelector{Selector: sel},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("SidecarSet %s did not become Ready: %w", name, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of SidecarSet %s ended", name)
			}
			if ev.Type == watch.Error {
				return fmt.Errorf("watching SidecarSet %s: %v", name, ev.Object)
			}
			if s, ok := ev.Object.(*deckhandv1alpha1.SidecarSet); ok && readyNow(s) {
				return nil
			}
		}
	}
}

func readyNow(s *deckhandv1alpha1.SidecarSet) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.Generation
}

// TestReadyAfterUpdates: a spec change that leaves the injected revision
// alone (updateStrategy.partition) finds the policy in effect at once, and
// Ready still follows the new generation; after an image change, a pod
// created as soon as Ready is True gets the new image.
func TestReadyAfterUpdates(t *testing.T) {
	ns := env.Namespace(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	s := policySet("ready-keep-"+ns[len(ns)-5:], ns, "log:1")
	createSidecarSet(t, s)
	ctx := ctxT(t)
	if err := waitReadyAsKubectl(ctx, wc, s.Name); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) {
			p := intstr.FromInt32(int32(i))
			s.Spec.UpdateStrategy.Partition = &p
		})
		if err := waitReadyAsKubectl(ctx, wc, s.Name); err != nil {
			t.Fatalf("after update %d: %v", i, err)
		}
	}
	for i := 2; i <= 6; i++ {
		image := fmt.Sprintf("log:%d", i)
		updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = image
		})
		if err := waitReadyAsKubectl(ctx, wc, s.Name); err != nil {
			t.Fatalf("after the update to %s: %v", image, err)
		}
		name := fmt.Sprintf("after-%d", i)
		if got, _ := podImage(t, ns, name); got != image {
			t.Errorf("a pod created once the SidecarSet was Ready at %s got the log image %q", image, got)
		}
		// No kubelet runs it: left in place, the pod would keep the
		// SidecarSet from being Ready (PodsNotReady).
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadyWithoutAProbePodSaysSo: a SidecarSet whose namespace does not
// exist has no namespace to dry-run a pod in: its policy is reported in
// place as before, and the message says it was not checked and why.
func TestReadyWithoutAProbePodSaysSo(t *testing.T) {
	ns := env.Namespace(t)
	s := policySet("ready-noprobe-"+ns[len(ns)-5:], ns+"-absent", "log:1")
	createSidecarSet(t, s)
	waitPolicyReady(t, s.Name)
	got := testutil.Get(ctxT(t), t, env.Client, client.ObjectKeyFromObject(s), &deckhandv1alpha1.SidecarSet{})
	c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	if want := "not checked by a dry-run pod: no existing namespace is selected"; !strings.Contains(c.Message, want) {
		t.Errorf("InjectionPolicyReady message %q does not contain %q", c.Message, want)
	}
}

// TestConditionsHaveOneWriterEach: both controllers write conditions on a
// Policy-mode SidecarSet, and the API server records each condition under
// one field manager, written by apply: InjectionPolicyReady under the policy
// controller's, every other condition under the SidecarSet controller's. No
// status field is held by an update (a whole-list write from a copy), and the
// policy controller holds nothing of the status but its condition.
func TestConditionsHaveOneWriterEach(t *testing.T) {
	ns := env.Namespace(t)
	createSidecarSet(t, policySet(ns, ns, "registry.example/log:1"))
	waitPolicyReady(t, ns)
	s := waitSidecarSet(t, time.Minute, ns, "has its summary for its generation", func(s *deckhandv1alpha1.SidecarSet) bool {
		ready := meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.ReadyCondition)
		return ready != nil && ready.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation
	})

	owners := map[string][]string{}
	for _, mf := range s.ManagedFields {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		if mf.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("%s holds status fields by an update", mf.Manager)
		}
		var fields struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		var conds map[string]json.RawMessage
		for f, sub := range fields.Status {
			switch {
			case f == "f:conditions":
				if err := json.Unmarshal(sub, &conds); err != nil {
					t.Fatal(err)
				}
			case mf.Manager == sidecarpolicy.FieldManager && f != ".":
				t.Errorf("the policy controller holds status field %s", f)
			}
		}
		for k := range conds {
			var key struct{ Type string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(k, "k:")), &key); err != nil {
				continue // "." marks the list itself
			}
			owners[key.Type] = append(owners[key.Type], mf.Manager)
		}
	}
	for _, c := range s.Status.Conditions {
		want := deckhandv1alpha1.FieldManager
		if c.Type == deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition {
			want = sidecarpolicy.FieldManager
		}
		if !slices.Equal(owners[c.Type], []string{want}) {
			t.Errorf("condition %s is held by %v, want %s alone", c.Type, owners[c.Type], want)
		}
	}
	if len(owners[deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition]) == 0 {
		t.Errorf("no manager holds %s: %+v", deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition, s.ManagedFields)
	}
}
