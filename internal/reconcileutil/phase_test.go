package reconcileutil

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// trace is the scope of the test phases: the names of the phases that ran.
type trace struct{ ran []string }

func step(name string, after time.Duration, err error) Phase[trace] {
	return func(_ context.Context, s *trace) (ctrl.Result, error) {
		s.ran = append(s.ran, name)
		return ctrl.Result{RequeueAfter: after}, err
	}
}

func TestRun(t *testing.T) {
	errA, errB := errors.New("a failed"), errors.New("b failed")
	cases := map[string]struct {
		phases      []Phase[trace]
		wantRan     []string
		wantRequeue time.Duration
		wantErrs    []error
	}{
		"no phases": {},
		"no requeue": {
			phases:  []Phase[trace]{step("a", 0, nil), step("b", 0, nil)},
			wantRan: []string{"a", "b"},
		},
		"the lowest non-zero requeue wins": {
			phases:      []Phase[trace]{step("a", 0, nil), step("b", 5*time.Second, nil), step("c", 2*time.Second, nil), step("d", 0, nil)},
			wantRan:     []string{"a", "b", "c", "d"},
			wantRequeue: 2 * time.Second,
		},
		"a failed phase does not stop the others": {
			phases:   []Phase[trace]{step("a", time.Second, errA), step("b", 0, nil), step("c", time.Second, errB)},
			wantRan:  []string{"a", "b", "c"},
			wantErrs: []error{errA, errB},
		},
		"a failed reconcile returns no requeue": {
			phases:   []Phase[trace]{step("a", time.Second, nil), step("b", 0, errA)},
			wantRan:  []string{"a", "b"},
			wantErrs: []error{errA},
		},
		"StopOnError skips the rest of its group only": {
			phases: []Phase[trace]{
				StopOnError(step("a", 0, nil), step("b", 0, errA), step("c", 0, nil)),
				step("d", 0, errB),
			},
			wantRan:  []string{"a", "b", "d"},
			wantErrs: []error{errA, errB},
		},
		"StopOnError keeps the lowest requeue of its group": {
			phases: []Phase[trace]{
				step("a", 3*time.Second, nil),
				StopOnError(step("b", 0, nil), step("c", time.Second, nil)),
			},
			wantRan:     []string{"a", "b", "c"},
			wantRequeue: time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &trace{}
			res, err := Run(context.Background(), s, tc.phases...)
			if !slices.Equal(s.ran, tc.wantRan) {
				t.Errorf("ran %v, want %v", s.ran, tc.wantRan)
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("RequeueAfter %v, want %v", res.RequeueAfter, tc.wantRequeue)
			}
			if (err != nil) != (len(tc.wantErrs) > 0) {
				t.Fatalf("error %v, want %v", err, tc.wantErrs)
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("error %v does not hold %v", err, want)
				}
			}
		})
	}
}

func TestLowestNonZero(t *testing.T) {
	cases := map[string]struct {
		in   []time.Duration
		want time.Duration
	}{
		"none":              {},
		"all zero":          {in: []time.Duration{0, 0}},
		"zero never wins":   {in: []time.Duration{0, time.Minute}, want: time.Minute},
		"the soonest":       {in: []time.Duration{time.Minute, time.Second, time.Hour}, want: time.Second},
		"order is no issue": {in: []time.Duration{time.Second, 0, time.Minute}, want: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			results := make([]ctrl.Result, 0, len(tc.in))
			for _, d := range tc.in {
				results = append(results, ctrl.Result{RequeueAfter: d})
			}
			if got := LowestNonZero(results...).RequeueAfter; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
