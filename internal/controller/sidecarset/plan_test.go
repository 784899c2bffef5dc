package sidecarset

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlanUpdates(t *testing.T) {
	// p builds an injected pod: r ready, c on the latest revision, u updated,
	// o old but upgradable, x not upgradable, s out of the update selector's scope.
	p := func(name, flags string) *podState {
		st := &podState{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, injected: true, inScope: true, upgradable: true}
		for _, f := range flags {
			switch f {
			case 'r':
				st.ready = true
			case 'c':
				st.revisionCurrent = true
			case 'u':
				st.updated = true
			case 'x':
				st.upgradable = false
			case 's':
				st.inScope = false
			case 'p':
				st.pending = true
			}
		}
		return st
	}
	cases := map[string]struct {
		pods           []*podState
		maxUnavailable int
		partition      int
		want           []string
	}{
		"budget of one":            {[]*podState{p("a", "r"), p("b", "r"), p("c", "r")}, 1, 0, []string{"a"}},
		"budget of two":            {[]*podState{p("a", "r"), p("b", "r"), p("c", "r")}, 2, 0, []string{"a", "b"}},
		"mid-update uses budget":   {[]*podState{p("a", "rc"), p("b", "r"), p("c", "r")}, 2, 0, []string{"b"}},
		"pending uses budget":      {[]*podState{p("a", "rp"), p("b", "r")}, 1, 0, nil},
		"not ready first, free":    {[]*podState{p("a", "r"), p("b", "r"), p("z", "")}, 1, 0, []string{"z"}},
		"not ready app pod blocks": {[]*podState{p("a", "rcu"), p("b", "r"), p("q", "cu")}, 1, 0, nil},
		"partition holds back":     {[]*podState{p("a", "rcu"), p("b", "r"), p("c", "r"), p("d", "r")}, 3, 2, []string{"b"}},
		"partition reached":        {[]*podState{p("a", "rcu"), p("b", "rcu"), p("c", "r")}, 3, 1, nil},
		"not upgradable skipped":   {[]*podState{p("a", "rx"), p("b", "r")}, 1, 0, []string{"b"}},
		"selector scope":           {[]*podState{p("a", "rs"), p("b", "r")}, 2, 0, []string{"b"}},
		"not injected ignored":     {[]*podState{{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n"}}}, p("b", "r")}, 1, 0, []string{"b"}},
		"all done":                 {[]*podState{p("a", "rcu"), p("b", "rcu")}, 1, 0, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, s := range planUpdates(tc.pods, tc.maxUnavailable, tc.partition) {
				got = append(got, s.pod.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("planUpdates = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSameImage(t *testing.T) {
	for _, tc := range []struct {
		spec, status, id string
		want             bool
	}{
		{"nginx:1.27", "nginx:1.27", "", true},
		{"nginx:1.27", "docker.io/library/nginx:1.27", "", true},
		{"nginx", "docker.io/library/nginx:latest", "", true},
		{"team/app:1", "docker.io/team/app:1", "", true},
		{"registry.example.com/app:1", "registry.example.com/app:1", "", true},
		{"localhost:5000/app:1", "localhost:5000/app:1", "", true},
		{"nginx:1.27", "nginx:1.26", "", false},
		{"nginx@sha256:abc", "docker.io/library/nginx:1.27", "docker.io/library/nginx@sha256:abc", true},
		{"registry.example.com/app:1", "docker.io/library/app:1", "", false},
	} {
		if got := sameImage(tc.spec, tc.status, tc.id); got != tc.want {
			t.Errorf("sameImage(%q, %q, %q) = %v, want %v", tc.spec, tc.status, tc.id, got, tc.want)
		}
	}
	_ = fmt.Sprint()
}
