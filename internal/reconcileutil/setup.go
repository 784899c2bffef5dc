package reconcileutil

import (
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults fills in the fields a reconciler was built without: the
// manager's client, an event recorder that reports as component, and the
// real clock (skipped when clk is nil, for a reconciler that reads no
// time). A test sets any of them beforehand to replace it.
func Defaults(mgr ctrl.Manager, component string, c *client.Client, rec *events.EventRecorder, clk *clock.PassiveClock) {
	if *c == nil {
		*c = mgr.GetClient()
	}
	if *rec == nil {
		*rec = mgr.GetEventRecorder(component)
	}
	if clk != nil && *clk == nil {
		*clk = clock.RealClock{}
	}
}
