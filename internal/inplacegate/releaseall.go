package inplacegate

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReleaseInFlight is how many gate writes ReleaseAll keeps in flight.
//
// Every pod a SidecarSet injects or a PodSet creates lists the gate, and
// none is Ready until its controller has written the gate True once: a
// scale-up of N pods waits for N status writes. Sent one at a time, each
// waiting for the API server's answer, they set the pace of the whole
// scale-up on a loaded API server; it answers writes in parallel, as it
// does the pod creates a ReplicaSet sends in batches.
const ReleaseInFlight = 16

// ReleaseAll opens the gates of pods as Release does each, with up to
// ReleaseInFlight writes in flight, and returns each pod's error at the
// pod's index (nil where nothing was written).
func ReleaseAll(ctx context.Context, c client.Client, pods []*corev1.Pod, by string, now time.Time) []error {
	errs := make([]error, len(pods))
	slots := make(chan struct{}, ReleaseInFlight)
	var wg sync.WaitGroup
	for i, pod := range pods {
		if !releasable(pod, by) {
			continue
		}
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			errs[i] = Release(ctx, c, pod, by, now)
		}()
	}
	wg.Wait()
	return errs
}
