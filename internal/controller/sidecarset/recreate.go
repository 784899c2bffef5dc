package sidecarset

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/deckhand-dev/deckhand/internal/eviction"
)

// evictionReplaceTimeout is how long an evicted pod whose controller has not
// created a replacement keeps counting against maxUnavailable: a controller
// scaled down meanwhile never replaces it, and the rollout must not wait
// for it forever.
const evictionReplaceTimeout = 5 * time.Minute

// evictedPod is what is kept with a pod this process evicted until its
// controller has replaced it: controller is the UID of the pod's controller;
// siblings are the UIDs of that controller's pods when the pod was evicted.
// A pod of the same controller that is not among them is the replacement.
// No clock is compared with the API server's.
type evictedPod struct {
	controller types.UID
	siblings   map[types.UID]bool
}

// recreateState is what the controller remembers between reconciles about
// the pods one SidecarSet recreates and resizes (setMemory.recreates).
// Losing it (a restart) is safe: a pod evicted earlier is terminating
// (counted from the cache) or already replaced (the replacement counts
// while it is not Ready); a pod is never evicted twice because every
// eviction carries the UID and resourceVersion the cache showed, and a pod
// already being deleted is not a candidate. What a restart forgets is a pod
// that has finished terminating and whose controller has not created its
// replacement yet (a ReplicaSet replaces a pod as soon as it starts
// terminating; a StatefulSet once it is gone): for that moment the pod is
// not counted.
type recreateState struct {
	// evicted, by pod UID.
	evicted eviction.Pods[evictedPod]
	// blocked: pods whose last eviction a PodDisruptionBudget refused, by
	// pod UID, with when.
	blocked map[types.UID]time.Time
	// resizeRefused: resizes the API server refused, by resizeKey.
	resizeRefused map[string]bool
	// reported: pods already announced by an Event (unmanaged, refused
	// resize), by reason and pod UID.
	reported map[string]bool
}

func newRecreateState() recreateState {
	return recreateState{
		evicted:       eviction.Pods[evictedPod]{},
		blocked:       map[types.UID]time.Time{},
		resizeRefused: map[string]bool{},
		reported:      map[string]bool{},
	}
}

// refusedResizes returns the refused resizes. The map is the state's own:
// classify only reads it.
func (rs *recreateState) refusedResizes() map[string]bool { return rs.resizeRefused }

func (rs *recreateState) refuseResize(key string) { rs.resizeRefused[key] = true }

// firstReport reports whether what (a reason and a pod UID) has not been
// announced yet, and remembers that it now has.
func (rs *recreateState) firstReport(what string) bool {
	if rs.reported[what] {
		return false
	}
	rs.reported[what] = true
	return true
}

// observation is what the cache shows about the pods a SidecarSet's
// evictions concern.
type observation struct {
	// evicting is the number of pods this process evicted that are not
	// replaced yet (still shown active by a lagging cache, terminating, or
	// gone with no replacement).
	evicting int
	// gone is the number of pods that count against maxUnavailable without
	// being active: the terminating pods the SidecarSet selects plus the
	// evicted ones that are gone and not yet replaced.
	gone int
	// lagging are the UIDs of evicted pods the cache still shows active.
	lagging map[types.UID]bool
	// blocked is the number of active pods whose last eviction a
	// PodDisruptionBudget refused.
	blocked int
}

// observe matches the remembered evictions against the active and
// terminating pods the SidecarSet selects, forgets what the expiry rule
// (memory) lets go: evictions whose pods were replaced or that are older
// than evictionReplaceTimeout, and the refusals and reports of pods no
// longer active; and counts the rest.
func (rs *recreateState) observe(active, terminating []*corev1.Pod, now time.Time) observation {
	obs := observation{gone: len(terminating)}
	evicted := rs.evicted
	if len(evicted) == 0 && len(rs.blocked) == 0 && len(rs.resizeRefused) == 0 && len(rs.reported) == 0 {
		// NOTE: nothing remembered, nothing to match: the maps below over
		// every active pod were a tenth of a reconcile's CPU at 50,000 pods.
		return obs
	}
	activeUIDs := make(map[types.UID]bool, len(active))
	byOwner := map[types.UID][]types.UID{}
	for _, p := range active {
		activeUIDs[p.UID] = true
		if len(evicted) == 0 {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			byOwner[ref.UID] = append(byOwner[ref.UID], p.UID)
		}
	}
	terminatingUIDs := make(map[types.UID]bool, len(terminating))
	for _, p := range terminating {
		terminatingUIDs[p.UID] = true
	}
	// Past evictionReplaceTimeout an eviction stops counting, whatever
	// became of it: a lost event or a controller that never replaces the
	// pod cannot hold the rollout.
	evicted.Sweep(now, evictionReplaceTimeout, func(uid types.UID, rec eviction.Record[evictedPod]) bool {
		switch {
		case activeUIDs[uid]:
			if obs.lagging == nil {
				obs.lagging = map[types.UID]bool{}
			}
			obs.lagging[uid] = true
		case terminatingUIDs[uid]:
			// Counted among the terminating pods until it is gone, even once
			// replaced: the replacement counts too while it is not Ready.
		case replacedBy(rec.Info, byOwner[rec.Info.controller], uid):
			return true
		default:
			obs.gone++
		}
		obs.evicting++
		return false
	})
	for uid := range rs.blocked {
		if activeUIDs[uid] {
			obs.blocked++
		} else {
			delete(rs.blocked, uid)
		}
	}
	for key := range rs.resizeRefused {
		if !activeUIDs[types.UID(strings.SplitN(key, "/", 2)[0])] {
			delete(rs.resizeRefused, key)
		}
	}
	for key := range rs.reported {
		if parts := strings.SplitN(key, "/", 3); len(parts) < 2 || !activeUIDs[types.UID(parts[1])] {
			delete(rs.reported, key)
		}
	}
	return obs
}

// replacedBy reports whether one of pods, the active pods of the evicted
// pod's controller, is its replacement: one that was not there when it was
// evicted.
func replacedBy(ev evictedPod, pods []types.UID, uid types.UID) bool {
	for _, p := range pods {
		if !ev.siblings[p] && p != uid {
			return true
		}
	}
	return false
}

// evictionStarted records that pod, one of active (the SidecarSet's active
// pods), is being evicted.
func (rs *recreateState) evictionStarted(pod *corev1.Pod, active []*podState, now time.Time) {
	info := evictedPod{siblings: map[types.UID]bool{}}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		info.controller = ref.UID
		for _, p := range active {
			if r := metav1.GetControllerOfNoCopy(p.pod); r != nil && r.UID == ref.UID {
				info.siblings[p.pod.UID] = true
			}
		}
	}
	rs.evicted[pod.UID] = eviction.Record[evictedPod]{At: now, Info: info}
	delete(rs.blocked, pod.UID)
}

// evictionFailed forgets the record of an eviction that did not happen;
// blocked says a PodDisruptionBudget refused it.
func (rs *recreateState) evictionFailed(uid types.UID, blocked bool, now time.Time) {
	delete(rs.evicted, uid)
	if blocked {
		rs.blocked[uid] = now
	}
}

// evictPods evicts the planned pods and the failed resizes, and reports
// the pods that need recreating but have no controller to do it.
func (r *Reconciler) evictPods(ctx context.Context, sc *scope, plan rolloutPlan, out *outcome) {
	s, rs := sc.set, &sc.memory.recreates
	for _, p := range plan.unmanaged {
		if rs.firstReport("unmanaged/" + string(p.pod.UID)) {
			r.Recorder.Eventf(s, p.pod, corev1.EventTypeWarning, ReasonPodNotRecreatable, "EvictPod",
				"pod %s/%s needs recreating to get revision %s but has no controller owner that would recreate it: it is not evicted; recreate it by hand",
				p.pod.Namespace, p.pod.Name, sc.compiled.Hash)
		}
	}
	for _, p := range plan.evict {
		rs.evictionStarted(p.pod, sc.pods, sc.now)
		// NOTE: the resourceVersion precondition is what keeps a pod from
		// being evicted twice: once evicted it carries a deletionTimestamp.
		res, err := eviction.Evict(ctx, r.Client, p.pod, true)
		podEvictions.WithLabelValues(s.Name, res.String()).Inc()
		switch res {
		case eviction.Evicted:
			why := "its sidecars differ from the latest revision in more than images and resources"
			if !p.injected() {
				why = "it does not carry the SidecarSet's sidecars"
			} else if p.stage == stageResizeFailed {
				why = "its in-place resize did not complete"
			}
			r.Recorder.Eventf(s, p.pod, corev1.EventTypeNormal, ReasonEvictingPod, "EvictPod",
				"evicted pod %s/%s so that its controller recreates it with revision %s: %s", p.pod.Namespace, p.pod.Name, sc.compiled.Hash, why)
			out.retryAfter(time.Second)
		case eviction.Blocked:
			rs.evictionFailed(p.pod.UID, true, sc.now)
			// Once per pod and revision: the refusal repeats every few
			// seconds while the budget is used up; the status counts it.
			if rs.firstReport("blocked/" + string(p.pod.UID) + "/" + sc.compiled.Hash) {
				r.Recorder.Eventf(s, p.pod, corev1.EventTypeWarning, ReasonEvictionBlocked, "EvictPod",
					"evicting pod %s/%s waits: %v", p.pod.Namespace, p.pod.Name, err)
			}
			out.retryAfter(evictionRetryDelay)
		case eviction.Stale:
			// Nothing was done; the next pass sees the pod as it is now.
			logf.FromContext(ctx).Info("evicting a pod: the cached copy is out of date", "pod", klog.KObj(p.pod), "error", err.Error())
			rs.evictionFailed(p.pod.UID, false, sc.now)
			out.retryAfter(time.Second)
		default:
			rs.evictionFailed(p.pod.UID, false, sc.now)
			r.Recorder.Eventf(s, p.pod, corev1.EventTypeWarning, ReasonEvictionFailed, "EvictPod",
				"evicting pod %s/%s: %v", p.pod.Namespace, p.pod.Name, err)
			out.fail(err)
		}
	}
}

// evictionRetryDelay is how soon an eviction a PodDisruptionBudget refused
// is tried again (a pod event may bring it sooner).
const evictionRetryDelay = 5 * time.Second

// terminatingPod reports a pod being deleted that has not finished: it is
// not available, and its controller may not have replaced it yet.
func terminatingPod(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
