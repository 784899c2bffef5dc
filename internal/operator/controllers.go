package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The kinds a manager can run, as --controllers names them.
const (
	SidecarSetController      = "sidecarset"
	PodSetController          = "podset"
	WebServerController       = "webserver"
	RestartScheduleController = "restartschedule"
)

// controllerKind is one kind a manager can run.
type controllerKind struct {
	name  string
	kind  string
	paths []string
}

// controllerKinds are the kinds in the order Setup registers them, with the
// webhook paths each one serves for its own objects (the markers of
// internal/webhook/<kind>). The pod webhook is not among them: a manager
// without SidecarSets serves no pod path at all, and the pod webhook's
// failurePolicy (Ignore) admits pods unchanged.
var controllerKinds = []controllerKind{
	{SidecarSetController, "SidecarSet", []string{
		"/mutate-apps-deckhand-dev-v1alpha1-sidecarset", "/validate-apps-deckhand-dev-v1alpha1-sidecarset"}},
	{PodSetController, "PodSet", []string{
		"/mutate-apps-deckhand-dev-v1alpha1-podset", "/validate-apps-deckhand-dev-v1alpha1-podset",
		"/validate-apps-deckhand-dev-v1alpha1-podset-scale"}},
	{WebServerController, "WebServer", []string{"/validate-apps-deckhand-dev-v1alpha1-webserver"}},
	{RestartScheduleController, "RestartSchedule", []string{"/validate-apps-deckhand-dev-v1alpha1-restartschedule"}},
}

// Controllers is the set of kinds a manager runs (--controllers). A nil
// set runs every kind.
type Controllers map[string]bool

// AllControllers returns the set of every kind.
func AllControllers() Controllers {
	c := Controllers{}
	for _, k := range controllerKinds {
		c[k.name] = true
	}
	return c
}

// ParseControllers reads --controllers: a comma-separated list of kinds,
// or "*" or "all" for every kind.
func ParseControllers(v string) (Controllers, error) {
	c := Controllers{}
	for _, name := range strings.Split(v, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch {
		case name == "":
		case name == "*" || name == "all":
			return AllControllers(), nil
		case slices.Contains(controllerNames(), name):
			c[name] = true
		default:
			return nil, fmt.Errorf("--controllers=%q: unknown controller %q: want a comma-separated list of %s, or all", v, name, strings.Join(controllerNames(), ","))
		}
	}
	if len(c) == 0 {
		return nil, fmt.Errorf("--controllers=%q: names no controller: want a comma-separated list of %s, or all", v, strings.Join(controllerNames(), ","))
	}
	return c, nil
}

// controllerNames are the kinds' names in Setup's order.
func controllerNames() []string {
	names := make([]string, 0, len(controllerKinds))
	for _, k := range controllerKinds {
		names = append(names, k.name)
	}
	return names
}

// Enabled reports whether the manager runs the kind named name.
func (c Controllers) Enabled(name string) bool { return c == nil || c[name] }

// String is the set as --controllers spells it, in Setup's order.
func (c Controllers) String() string {
	var on []string
	for _, name := range controllerNames() {
		if c.Enabled(name) {
			on = append(on, name)
		}
	}
	return strings.Join(on, ",")
}

// refuseDisabled registers, on the paths of every kind the manager does
// not run, a handler that refuses new objects and spec changes of that
// kind with a message naming the flag. An installation that still routes
// those kinds to this manager then says why they are not admitted, instead
// of failing with a "not found" from the webhook server, and objects
// already stored can still be relabelled, have their finalizers removed
// and be deleted.
func refuseDisabled(mgr ctrl.Manager, on Controllers) {
	for _, k := range controllerKinds {
		if on.Enabled(k.name) {
			continue
		}
		h := &webhook.Admission{Handler: disabledKind{kind: k.kind, controllers: on.String()}}
		for _, p := range k.paths {
			mgr.GetWebhookServer().Register(p, h)
		}
	}
}

// disabledKind answers the admission requests of a kind the manager does
// not run.
type disabledKind struct {
	kind        string
	controllers string
}

// Handle refuses a create, and an update that changes the spec.
func (d disabledKind) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Update {
		same, err := sameSpec(req.OldObject.Raw, req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if same {
			return admission.Allowed("")
		}
	}
	return admission.Denied(fmt.Sprintf(
		"this Deckhand manager does not run the %s controller (--controllers=%s): new %ss and spec changes are not admitted; add %s to --controllers (the chart's controllers value), or leave its webhooks out of the installation",
		strings.ToLower(d.kind), d.controllers, d.kind, strings.ToLower(d.kind)))
}

// sameSpec reports whether two encoded objects have equal specs.
func sameSpec(oldRaw, newRaw []byte) (bool, error) {
	var o, n struct {
		Spec any `json:"spec"`
	}
	if err := json.Unmarshal(oldRaw, &o); err != nil {
		return false, fmt.Errorf("decoding the old object: %w", err)
	}
	if err := json.Unmarshal(newRaw, &n); err != nil {
		return false, fmt.Errorf("decoding the object: %w", err)
	}
	return reflect.DeepEqual(o.Spec, n.Spec), nil
}
