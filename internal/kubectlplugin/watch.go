package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Exit codes of `status --watch`; 0 is done.
const (
	// ExitFailed: the object is stalled or failed (a Stalled or Degraded
	// condition, a progress deadline exceeded).
	ExitFailed = 1
	// ExitTimedOut: --timeout passed before the object was done or failed.
	ExitTimedOut = 2
)

// ExitError is an error that ends the plugin with Code rather than 1.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the exit code err asks for: 0 for nil, an ExitError's Code,
// else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return 1
}

// progress is where an object stands towards its spec.
type progress int

const (
	inProgress progress = iota
	done
	failed
)

// progressDeadlineExceeded is the reason a PodSet's or WebServer's
// Progressing condition gives when a rollout made no progress for its
// progress deadline, as a Deployment's does.
const progressDeadlineExceeded = "ProgressDeadlineExceeded"

// summary is what every Deckhand kind's status shares and what judge reads.
type summary struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

// standing is judge's finding: where the object stands, the reason of the
// condition that decided it, and a line that says why.
type standing struct {
	progress progress
	reason   string
	why      string
}

// word names v's progress in the STATUS column of list.
func (v standing) word() string {
	switch v.progress {
	case done:
		return "Ready"
	case failed:
		return "Failed"
	}
	return "InProgress"
}

// judge says whether obj is done, failed or still in progress, and why.
// A status written for an older generation says nothing of the current
// spec, so it is in progress whatever its conditions. Failed comes before
// done: a Stalled or Degraded condition, or a condition whose reason is
// ProgressDeadlineExceeded (whatever its status, as `kubectl rollout
// status` reads a Deployment's). Done is Ready True, which every kind's
// controller sets once the object has reached its spec (a PodSet's and
// SidecarSet's rollout complete, a WebServer's Deployment rolled out and
// available, a RestartSchedule's schedule valid and its last run not
// failed).
func judge(obj *unstructured.Unstructured) standing {
	var s summary
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &s); err != nil {
		return standing{progress: inProgress, reason: "-", why: "status unreadable: " + err.Error()}
	}
	if s.Status.ObservedGeneration < s.Metadata.Generation {
		return standing{progress: inProgress, reason: "NotObserved", why: fmt.Sprintf("waiting for the controller to observe generation %d (status is for generation %d)",
			s.Metadata.Generation, s.Status.ObservedGeneration)}
	}
	conds := s.Status.Conditions
	for _, typ := range []string{deckhandv1alpha1.StalledCondition, deckhandv1alpha1.WebServerDegradedCondition} {
		if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionTrue {
			return standingOf(failed, c)
		}
	}
	for i := range conds {
		if conds[i].Reason == progressDeadlineExceeded {
			return standingOf(failed, &conds[i])
		}
	}
	ready := meta.FindStatusCondition(conds, deckhandv1alpha1.ReadyCondition)
	switch {
	case ready == nil:
		return standing{progress: inProgress, reason: "-", why: "no Ready condition yet"}
	case ready.Status == metav1.ConditionTrue:
		return standingOf(done, ready)
	}
	return standingOf(inProgress, ready)
}

func standingOf(p progress, c *metav1.Condition) standing {
	return standing{progress: p, reason: c.Reason, why: fmt.Sprintf("%s %s %s: %s", c.Type, c.Status, c.Reason, c.Message)}
}

// waitSettled watches the object name of ri until judge finds it done or
// failed, printing a line to out each time judge's reason changes. It
// returns the object as last seen and an ExitError when it failed or
// timeout (0: none) passed first. The watch lists and watches through an
// informer's machinery, so a dropped watch resumes where it left off.
func waitSettled(ctx context.Context, ri dynamic.ResourceInterface, ref, name string, timeout time.Duration, out io.Writer) (*unstructured.Unstructured, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return ri.Watch(ctx, opts)
		},
	}
	var seen *unstructured.Unstructured
	var last standing
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("%s was deleted", ref)
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		seen = u
		v := judge(u)
		if v.why != last.why {
			fmt.Fprintf(out, "%s: %s\n", ref, v.why)
		}
		last = v
		return v.progress != inProgress, nil
	})
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return seen, &ExitError{Code: ExitTimedOut, Err: fmt.Errorf("%s: timed out after %s: %s", ref, timeout, orDash(last.why))}
	case err != nil:
		return seen, err
	case last.progress == failed:
		return seen, &ExitError{Code: ExitFailed, Err: fmt.Errorf("%s failed: %s", ref, last.why)}
	}
	return seen, nil
}
