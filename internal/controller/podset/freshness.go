package podset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// podWriteTimeout is the deadline of every pod write of the controller
// (create, delete, eviction, patch), sent as the request's timeout parameter
// so that the API server enforces it: a write it has not stored by then it
// abandons. It bounds how long after it was sent a write can still land,
// including the writes of a process that is gone.
//
// NOTE: with leader election a new leader starts only once the old leader's
// Lease has expired, and the old leader stops writing at its renew deadline:
// with the defaults (lease 15s, renew deadline 10s) its last write was sent
// at least 5s before, so it has landed or been abandoned when the new leader
// starts. podWriteTimeout must not exceed that difference.
const podWriteTimeout = 5 * time.Second

// writeSettle is how long after a write was sent its outcome is settled:
// the deadline and a margin for the storage write the API server had
// already begun.
const writeSettle = podWriteTimeout + time.Second

// podWriterConfig is cfg with the pod write deadline, for the client the
// controller writes pods with.
func podWriterConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Timeout = podWriteTimeout
	return out
}

// writeOutcomeUnknown reports a write error after which the write may still
// have been stored: the API server's 504 (it gave up waiting but may still be
// storing), a client-side deadline, or a connection lost before the response
// arrived.
func writeOutcomeUnknown(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// cacheTrust says, per PodSet, whether this process may act on its pod
// cache. Expectations cover the writes this process made and saw answered;
// they do not cover
//
//   - the writes of a process before it (a killed manager, the previous
//     leader), which may still land after this process's cache synced, and
//     which it may not have seen answered, and
//   - this process's own writes whose outcome it does not know (a timeout,
//     a lost connection): stored or not, it cannot tell which.
//
// Both are settled writeSettle after they were sent (podWriteTimeout). So a
// PodSet is trusted only after a consistent read of its pods, taken once
// those writes are settled, found nothing the cache lacks: at the start of
// the process (writeSettle after it began; a predecessor's writes were sent
// before) and after each write of unknown outcome.
type cacheTrust struct {
	mu sync.Mutex
	// start is when this process began (as the controller was set up).
	start time.Time
	// holds are PodSets that may act only after the time given, then after
	// a consistent read; trusted are those confirmed since.
	holds   map[string]time.Time
	trusted map[string]types.UID
}

func newCacheTrust(start time.Time) *cacheTrust {
	return &cacheTrust{start: start, holds: map[string]time.Time{}, trusted: map[string]types.UID{}}
}

// distrust withdraws trust in key's cache until writeSettle after now: call
// it when a write's outcome is unknown.
func (c *cacheTrust) distrust(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.trusted, key)
	c.holds[key] = now.Add(writeSettle)
}

// check returns whether key (of uid) is trusted, and otherwise how long
// until a consistent read may confirm it (0: now).
func (c *cacheTrust) check(key string, uid types.UID, now time.Time) (trusted bool, wait time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trusted[key] == uid {
		return true, 0
	}
	until, ok := c.holds[key]
	if !ok {
		until = c.start.Add(writeSettle)
	}
	return false, max(until.Sub(now), 0)
}

// confirm trusts key (of uid) until a write of unknown outcome.
func (c *cacheTrust) confirm(key string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trusted[key] = uid
}

// forget drops key, when its PodSet is gone.
func (c *cacheTrust) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.holds, key)
	delete(c.trusted, key)
}

// staleCacheRetry is how soon a PodSet whose cache missed a write is looked
// at again; the watch event that brings the write usually comes first.
const staleCacheRetry = time.Second

// confirmCache returns how long to wait before the PodSet may act on its pod
// cache: 0 when the cache is trusted or a consistent read of the PodSet's
// pods now shows nothing the claimed pods lack (see cacheTrust).
func (r *Reconciler) confirmCache(ctx context.Context, s *scope) (time.Duration, error) {
	now := r.Clock.Now()
	trusted, wait := r.trust.check(s.key, s.ps.UID, now)
	if trusted {
		return 0, nil
	}
	if wait > 0 {
		return wait, nil
	}
	// Without a resourceVersion the list is a consistent read: it shows
	// every write the API server has stored.
	var fresh corev1.PodList
	if err := r.APIReader.List(ctx, &fresh, client.InNamespace(s.ps.Namespace), client.MatchingLabelsSelector{Selector: s.selector}); err != nil {
		return 0, fmt.Errorf("listing pods to confirm the cache: %w", err)
	}
	if missing := cacheMisses(s, fresh.Items); missing != "" {
		log.FromContext(ctx).V(1).Info("the pod cache lacks writes; waiting", "podset", klog.KObj(s.ps), "missing", missing)
		return staleCacheRetry, nil
	}
	r.trust.confirm(s.key, s.ps.UID)
	return 0, nil
}

// cacheMisses describes the first difference that makes the claimed pods
// (s.pods active, s.terminating being deleted) older than fresh, a
// consistent read of the pods the selector matches; "" when there is none.
// Only what the planner counts matters: a pod of the PodSet it does not
// know, one it counts as active that is being deleted or gone.
func cacheMisses(s *scope, fresh []corev1.Pod) string {
	claimed := make(map[types.UID]*corev1.Pod, len(s.pods)+len(s.terminating))
	for _, p := range s.pods {
		claimed[p.UID] = p
	}
	for _, p := range s.terminating {
		claimed[p.UID] = p
	}
	seen := make(map[types.UID]bool, len(fresh))
	for i := range fresh {
		p := &fresh[i]
		seen[p.UID] = true
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref == nil || ref.UID != s.ps.UID {
			continue
		}
		c, ok := claimed[p.UID]
		switch {
		case !ok:
			return "pod " + p.Name + " not in the cache"
		case p.DeletionTimestamp != nil && c.DeletionTimestamp == nil:
			return "pod " + p.Name + " being deleted"
		}
	}
	for _, p := range s.pods {
		if !seen[p.UID] && s.selector.Matches(labelsOf(p)) {
			return "pod " + p.Name + " gone"
		}
	}
	return ""
}
