// Package version tells which build of Deckhand is running: the release
// version stamped at link time, the source revision and the Go toolchain.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release version, stamped at link time with
//
//	-ldflags "-X github.com/deckhand-dev/deckhand/internal/version.Version=v1.2.3"
//
// (make build and make release do). An unstamped build says "dev".
var Version = "dev"

// Revision is the source revision, stamped at link time by make build
// (`git describe --always --dirty`). When unstamped, Get reads the VCS
// information the Go toolchain records, if the build kept it.
var Revision = ""

// Info describes one build.
type Info struct {
	// Version is the stamped release version, or "dev".
	Version string
	// Revision is the source commit the binary was built from, with a
	// "-dirty" suffix when the tree had uncommitted changes; "unknown" when
	// the build carries no VCS information (go run, go test).
	Revision string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: Version, Revision: "unknown", GoVersion: runtime.Version()}
	if Revision != "" {
		info.Revision = Revision
		return info
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.Revision != "unknown" {
		info.Revision += "-dirty"
	}
	return info
}

// String is the one line `deckhand --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("deckhand %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Collector is the deckhand_build_info gauge: always 1, labelled with the
// build, so dashboards and alerts can tell which version every replica runs.
func Collector(i Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "deckhand_build_info",
		Help:        "Always 1; the labels say which build of Deckhand this replica runs.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
