package rolloutfailure

import "testing"

func TestSettle(t *testing.T) {
	cases := map[string]struct {
		stable, failed         string
		complete, timedOut     bool
		wantStable, wantFailed string
	}{
		"a completed rollout becomes stable":                   {stable: "r1", complete: true, wantStable: "r2"},
		"a rollout under way records nothing":                  {stable: "r1", wantStable: "r1"},
		"a rollout that times out fails":                       {stable: "r1", timedOut: true, wantStable: "r1", wantFailed: "r2"},
		"a failure stays once progress resumes":                {stable: "r1", failed: "r2", wantStable: "r1", wantFailed: "r2"},
		"a new revision ends the failure of the old one":       {stable: "r1", failed: "r0", wantStable: "r1"},
		"a failed revision that completes after all is stable": {stable: "r1", failed: "r2", complete: true, wantStable: "r2"},
		"no stable revision, no failure":                       {timedOut: true},
		"the stable revision itself never fails":               {stable: "r2", timedOut: true, wantStable: "r2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stable, failed := tc.stable, tc.failed
			Revisions{Stable: &stable, Failed: &failed}.Settle("r2", tc.complete, tc.timedOut)
			if stable != tc.wantStable || failed != tc.wantFailed {
				t.Errorf("stable, failed = %q, %q; want %q, %q", stable, failed, tc.wantStable, tc.wantFailed)
			}
		})
	}
}
