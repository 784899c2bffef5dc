package statuspatch_test

import (
	"os"
	"testing"

	"github.com/deckhand-dev/deckhand/internal/test/testenv"
)

var env *testenv.Env

// TestMain starts an API server and etcd with Deckhand's CRDs; no manager
// runs: the tests are the writers.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}
