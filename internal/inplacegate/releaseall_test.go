package inplacegate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestReleaseAllWritesInParallel: ReleaseAll keeps ReleaseInFlight gate
// writes in flight, never more, and opens every releasable gate. Each of
// the first ReleaseInFlight writes is held until that many have arrived, so
// writes sent one at a time never get past the first.
func TestReleaseAllWritesInParallel(t *testing.T) {
	const n = 3*ReleaseInFlight + 5
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Pod{}).Build()
	ctx := context.Background()
	var pods []*corev1.Pod
	for i := range n {
		p := gatedPod()
		p.Namespace, p.Name = "ns", fmt.Sprintf("pod-%d", i)
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		if i == 7 {
			// Closed by another object: not this caller's to open.
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: ConditionType, Status: corev1.ConditionFalse,
				Message: "SidecarSet other" + closedMessage, LastTransitionTime: metav1.Now()})
		}
		if err := base.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := base.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}

	var mu sync.Mutex
	arrived, inFlight, most := 0, 0, 0
	allArrived := make(chan struct{})
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			mu.Lock()
			arrived++
			inFlight++
			most = max(most, inFlight)
			if arrived == ReleaseInFlight {
				close(allArrived)
			}
			mu.Unlock()
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
			select {
			case <-allArrived:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("held 10s: fewer than %d gate writes in flight at once", ReleaseInFlight)
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})

	errs := ReleaseAll(ctx, c, pods, "PodSet web", time.Now())
	for i, err := range errs {
		if err != nil {
			t.Errorf("pod %d: %v", i, err)
		}
	}
	if most != ReleaseInFlight {
		t.Errorf("at most %d gate writes were in flight at once; want %d", most, ReleaseInFlight)
	}
	if arrived != n-1 {
		t.Errorf("%d gate writes; want %d (every pod but the one another object closed)", arrived, n-1)
	}
	for i, p := range pods {
		got := &corev1.Pod{}
		if err := base.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		if open := Open(got); open != (i != 7) {
			t.Errorf("pod %d: gate open %t; want %t", i, open, i != 7)
		}
	}
}
