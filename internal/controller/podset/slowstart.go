package podset

import "sync"

// slowStartInitialBatchSize is the size of the first batch of creates
// (kube-controller-manager's SlowStartInitialBatchSize).
const slowStartInitialBatchSize = 1

// burstReplicas caps the creates or deletes of one sync, as
// kube-controller-manager's ReplicaSet controller does; larger differences
// are closed over several syncs.
const burstReplicas = 500

// slowStartBatch calls fn count times, in concurrent batches of 1, 2, 4, ...
// (starting at initialBatchSize) and stops after the first batch in which a
// call failed, so that an error that affects every call (quota, admission)
// costs a handful of requests instead of count. It returns the number of
// calls that succeeded and the first error.
func slowStartBatch(count, initialBatchSize int, fn func() error) (int, error) {
	remaining := count
	successes := 0
	for batch := min(remaining, initialBatchSize); batch > 0; batch = min(2*batch, remaining) {
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errCh <- err
				}
			})
		}
		wg.Wait()
		curSuccesses := batch - len(errCh)
		successes += curSuccesses
		if len(errCh) > 0 {
			return successes, <-errCh
		}
		remaining -= batch
	}
	return successes, nil
}
