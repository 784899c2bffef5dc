package reconcileutil

import (
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Fields points at the fields of a reconciler that Defaults fills in; a nil
// pointer stands for a field the reconciler does not have.
type Fields struct {
	Client    *client.Client
	APIReader *client.Reader
	Recorder  *events.EventRecorder
	Clock     *clock.PassiveClock
}

// Defaults fills in the fields a reconciler was built without: the
// manager's client and uncached reader, an event recorder that reports as
// component, and the real clock. A test sets any of them beforehand to
// replace it.
func Defaults(mgr ctrl.Manager, component string, f Fields) {
	setDefault(f.Client, mgr.GetClient)
	setDefault(f.APIReader, mgr.GetAPIReader)
	setDefault(f.Recorder, func() events.EventRecorder { return mgr.GetEventRecorder(component) })
	setDefault(f.Clock, func() clock.PassiveClock { return clock.RealClock{} })
}

func setDefault[T comparable](field *T, get func() T) {
	var unset T
	if field != nil && *field == unset {
		*field = get()
	}
}

// NewController starts the builder of the controller named name, which
// reconciles obj with up to workers reconciles at a time; predicates filter
// the events of obj.
func NewController(mgr ctrl.Manager, name string, workers int, obj client.Object, predicates ...predicate.Predicate) *builder.Builder {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(obj, builder.WithPredicates(predicates...))
}
