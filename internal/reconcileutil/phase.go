package reconcileutil

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Phase is one step of a reconcile, working on the reconcile's scope S.
// It returns the requeue it needs (zero for none) and its error.
type Phase[S any] func(ctx context.Context, s *S) (ctrl.Result, error)

// Run runs phases in order and returns their errors joined, or, when none
// failed, the soonest non-zero requeue any of them asked for.
//
// Every phase runs, even after an earlier one failed, as in Cluster API: a
// failed apply of one child does not keep the next child or the status from
// being written. Phases that must not act on what a failed phase left
// incomplete are grouped with StopOnError.
//
// Note: a failed reconcile returns a zero Result: controller-runtime ignores
// the Result of a reconcile that returns an error and requeues it with
// backoff instead.
func Run[S any](ctx context.Context, s *S, phases ...Phase[S]) (ctrl.Result, error) {
	return run(ctx, s, false, phases)
}

// StopOnError returns one phase that runs phases in order and stops at the
// first that fails, for phases that build on each other: counting or
// changing pods from a list that failed would act on pods that are not
// there. It returns what Run would for the phases that ran.
func StopOnError[S any](phases ...Phase[S]) Phase[S] {
	return func(ctx context.Context, s *S) (ctrl.Result, error) {
		return run(ctx, s, true, phases)
	}
}

func run[S any](ctx context.Context, s *S, stopOnError bool, phases []Phase[S]) (ctrl.Result, error) {
	var result ctrl.Result
	var errs []error
	for _, phase := range phases {
		res, err := phase(ctx, s)
		if err != nil {
			errs = append(errs, err)
			if stopOnError {
				break
			}
			continue
		}
		result = LowestNonZero(result, res)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, errors.Join(errs...)
	}
	return result, nil
}

// LowestNonZero returns the result with the soonest non-zero RequeueAfter,
// or a zero result if none asks for a requeue.
func LowestNonZero(results ...ctrl.Result) ctrl.Result {
	var lowest ctrl.Result
	for _, r := range results {
		if r.RequeueAfter > 0 && (lowest.RequeueAfter == 0 || r.RequeueAfter < lowest.RequeueAfter) {
			lowest = r
		}
	}
	return lowest
}
