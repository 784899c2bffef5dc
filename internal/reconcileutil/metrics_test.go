package reconcileutil

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The metric names are part of the product: dashboards and alerts use them.
func TestMetricsNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := Metrics{kind: "podset", reg: reg}
	m.Counter("syncs_total", "h").Inc()
	m.CounterVec("ops_total", "h", "operation").WithLabelValues("create").Inc()
	m.GaugeVec("pods", "h", "state").WithLabelValues("ready").Set(1)
	m.Histogram("skew_seconds", "h", []float64{1}).Observe(0.5)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
	}
	want := []string{"deckhand_podset_ops_total", "deckhand_podset_pods", "deckhand_podset_skew_seconds", "deckhand_podset_syncs_total"}
	if !slices.Equal(got, want) {
		t.Errorf("metric names %v, want %v", got, want)
	}
}
