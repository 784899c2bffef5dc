package version

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector(Info{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.26"}))
	want := `
# HELP deckhand_build_info Always 1; the labels say which build of Deckhand this replica runs.
# TYPE deckhand_build_info gauge
deckhand_build_info{goversion="go1.26",revision="abc",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "deckhand_build_info"); err != nil {
		t.Fatal(err)
	}
}

func TestGetReportsTheStampedVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9"
	i := Get()
	if i.Version != "v9.9.9" || i.GoVersion == "" || i.Revision == "" {
		t.Fatalf("Get() = %+v", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "deckhand v9.9.9 (revision ") {
		t.Fatalf("String() = %q", s)
	}
}
