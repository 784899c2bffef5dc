package reconcileutil

import (
	"testing"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSetDefault(t *testing.T) {
	fake := clocktesting.NewFakePassiveClock(clock.RealClock{}.Now())
	realClock := func() clock.PassiveClock { return clock.RealClock{} }
	cases := map[string]struct {
		field *clock.PassiveClock
		want  clock.PassiveClock
	}{
		"unset is filled in":  {field: new(clock.PassiveClock), want: clock.RealClock{}},
		"set is kept":         {field: func() *clock.PassiveClock { var c clock.PassiveClock = fake; return &c }(), want: fake},
		"no field, no effect": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			setDefault(tc.field, realClock)
			if tc.field != nil && *tc.field != tc.want {
				t.Errorf("got %T, want %T", *tc.field, tc.want)
			}
		})
	}
}
