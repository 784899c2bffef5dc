package main

import (
	"fmt"
	"strings"
	"time"
)

// reportCharts are the charts hack/benchcharts draws from the raw results
// into bench-data/charts beside the report (`make bench` runs it once the
// report is written; its list of charts names the same files). A chart is
// shown when the raw results hold the item it draws.
var reportCharts = []struct{ raw, file, alt, what string }{
	{"admission", "admission-throughput.svg", "pod creates per second, each run", "Item 1: pod creates per second with 16 clients, each run as a point and the median as the bar: the API server alone, the minimal webhook injecting the same sidecar, Deckhand with one SidecarSet, OpenKruise with one SidecarSet."},
	{"admission", "admission-latency.svg", "one-client create p50, each run", "Item 1: the one-client create p50 of each run (the latency a webhook adds when nothing queues), the same variants."},
	{"memory-vs-kruise", "memory.svg", "manager memory, Deckhand and OpenKruise", "Item 3: the manager's RSS (with its anonymous and file-backed parts) and live heap on the loaded cluster, Deckhand and OpenKruise, each run and the median."},
	{"podset-a", "podset-limited.svg", "PodSet, ReplicaSet: scaling time with client limits, each run", "Item 2a: the time from 0 to every pod Ready and back to none gone, PodSet against ReplicaSet, Deckhand and kube-controller-manager at QPS 20/burst 30, each run and the median."},
	{"podset-b", "podset-unlimited.svg", "PodSet, ReplicaSet, plain client: scaling time without client limits, each run", "Item 2b: the same with the client limits off, and a plain client creating and deleting the pods itself (32 workers) as the floor."},
	{"scale", "scale-memory.svg", "manager memory against pods cached", "Item 8: the manager's RSS, heap in use and live heap at each pod count, each stretch labelled with the live heap it added per pod."},
	{"scale", "scale-latency.svg", "create latency against pods cached", "Item 8: one-client create latency at each pod count through Deckhand's webhook, the minimal injecting one and none: the median of the creates, the bar from their 25th to their 75th percentile."},
	{"leakfleet", "leak-fleet.svg", "leaking pods' memory over time, each policy", "Item 9: every pod's working set over the simulated days under each policy (none, nightly, need), coloured by its workload's leak, with the limit, the need policy's threshold, the nights' windows and a mark at each restart."},
}

// chartsSection shows the charts of the items this run measured, each
// saying which run and commit it shows.
func (r *report) chartsSection(b *strings.Builder) {
	if r.dataLink == "" {
		return
	}
	var shown []string
	for _, c := range reportCharts {
		if _, ok := r.raw[c.raw]; ok {
			shown = append(shown, fmt.Sprintf("![%s](bench-data/charts/%s)\n\n%s Run %s, commit `%s`.\n", c.alt, c.file, c.what, r.start.UTC().Format(time.RFC3339), r.src.Describe))
		}
	}
	if len(shown) == 0 {
		return
	}
	b.WriteString("\n## Charts\n\nDrawn by `hack/benchcharts` (gonum.org/v1/plot) from this run's raw results, the last step of `make bench`; the sections below have the numbers. Its test `TestCommittedChartsMatchTheReports` fails when a committed chart is not what these raw results draw.\n\n")
	b.WriteString(strings.Join(shown, "\n"))
}
