package testutil

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// Suite is where the TestMain of a suite that runs programs built from the
// tree (the deckhand binary, devcluster) starts: the repository root, a
// scratch directory and a bounded context for the set-up.
type Suite struct {
	name string
	// Root is the repository root.
	Root string
	// Work is a scratch directory, removed by Close.
	Work string
	// Ctx bounds the suite's set-up; Close cancels it.
	Ctx    context.Context
	cancel context.CancelFunc
}

// NewSuite begins the suite name (which prefixes Fail's messages) with a
// set-up bounded by setup. The suite's own clients log nothing worth
// reading (the programs under test log to files of their own), so their
// logger is silenced. Close the suite when its TestMain ends.
func NewSuite(name string, setup time.Duration) *Suite {
	ctrllog.SetLogger(logr.Discard())
	s := &Suite{name: name}
	s.Ctx, s.cancel = context.WithTimeout(context.Background(), setup)
	return s
}

// RunSuite is the body of a suite's TestMain: it begins the suite name
// (see NewSuite), prepares it and, unless that fails, calls run with it,
// closing the suite when run returns. It returns TestMain's exit code.
func RunSuite(name string, setup time.Duration, run func(*Suite) int) int {
	if SkipInShortMode(name) {
		return 0
	}
	s := NewSuite(name, setup)
	defer s.Close()
	if err := s.Prepare(); err != nil {
		return s.Fail("%v", err)
	}
	return run(s)
}

// SkipInShortMode is what the TestMain of a package whose tests need a
// control plane asks first: in -short mode (`make test-unit`) it says that
// the package is skipped and returns true, and TestMain returns 0 without
// starting anything. TestMain runs before the test flags are parsed, so it
// parses them.
func SkipInShortMode(pkg string) bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		return false
	}
	fmt.Printf("%s: skipped in -short mode: its tests need a control plane (make test runs them)\n", pkg)
	return true
}

// Prepare finds the repository root and makes the scratch directory.
func (s *Suite) Prepare() error {
	var err error
	if s.Root, err = localcluster.RepoRoot(); err != nil {
		return err
	}
	s.Work, err = os.MkdirTemp("", "deckhand-"+s.name+"-")
	return err
}

// Fail reports a set-up failure on stderr and returns TestMain's exit code.
func (s *Suite) Fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, s.name+": "+format+"\n", args...)
	return 1
}

// Close ends the set-up context and removes the scratch directory.
func (s *Suite) Close() {
	s.cancel()
	if s.Work != "" {
		_ = os.RemoveAll(s.Work)
	}
}
