package main

import (
	"maps"
	"strings"
	"testing"
)

// TestMetricsSums pins which samples sum and sumBy add: those whose labels
// match every key=value given, the rest left out.
func TestMetricsSums(t *testing.T) {
	m := parseMetrics(strings.NewReader(`# HELP rest_client_requests_total Requests.
rest_client_requests_total{code="200",method="GET",host="a"} 5
rest_client_requests_total{code="200",method="PATCH",host="a"} 3
rest_client_requests_total{code="409",method="PATCH",host="b"} 2
other_total 7
`))
	sums := map[string]struct {
		match []string
		want  float64
	}{
		"no match given": {nil, 10},
		"one label":      {[]string{"method", "PATCH"}, 5},
		"two labels":     {[]string{"method", "PATCH", "code", "200"}, 3},
		"no sample":      {[]string{"method", "DELETE"}, 0},
	}
	for name, tc := range sums {
		if got := m.sum("rest_client_requests_total", tc.match...); got != tc.want {
			t.Errorf("%s: sum = %v, want %v", name, got, tc.want)
		}
	}
	by := m.sumBy("rest_client_requests_total", "host", "method", "PATCH")
	if want := map[string]float64{"a": 3, "b": 2}; !maps.Equal(by, want) {
		t.Errorf("sumBy host of PATCH = %v, want %v", by, want)
	}
}
