package statuspatch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// RetryAfterConflict is how soon a reconcile whose status write met a newer
// object runs again.
const RetryAfterConflict = 100 * time.Millisecond

// Writer writes the part of objects' status one controller owns.
type Writer struct {
	// Client writes to the API server; its scheme knows the objects' kinds.
	Client client.Client
	// FieldManager names the controller to the API server, which records
	// under it the fields (and the conditions) the controller owns.
	FieldManager string
}

// Status writes status, a value of the kind's status type, as the writer's
// part of obj's status: every field of it, and every condition except those
// of the types in foreign, which other writers own and which are neither
// written nor compared. obj is the object as read; after a write it holds
// the API server's answer.
func (w Writer) Status(ctx context.Context, obj client.Object, status any, foreign ...string) (ctrl.Result, error) {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("converting the status of %s: %w", obj.GetName(), err)
	}
	return w.write(ctx, obj, part{fields: true, owns: func(t string) bool { return !slices.Contains(foreign, t) }}, want)
}

// Conditions writes conds as the writer's part of obj's status: the
// conditions of the types in owned, which are set as in conds (each of a type
// in owned) or removed where conds has none. Every other field and condition
// is left to its writers. obj is the object as read; after a write it holds
// the API server's answer.
func (w Writer) Conditions(ctx context.Context, obj client.Object, owned []string, conds ...metav1.Condition) (ctrl.Result, error) {
	for _, c := range conds {
		if !slices.Contains(owned, c.Type) {
			return ctrl.Result{}, fmt.Errorf("condition %s of %s is not one of the writer's types %v", c.Type, obj.GetName(), owned)
		}
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	}{conds})
	if err != nil {
		return ctrl.Result{}, err
	}
	return w.write(ctx, obj, part{owns: func(t string) bool { return slices.Contains(owned, t) }}, want)
}

// part is what of a status one writer owns: the fields other than
// conditions, or not, and the conditions of the types owns accepts.
type part struct {
	fields bool
	owns   func(conditionType string) bool
}

// of returns what of status (a status as unstructured content) the part
// covers.
func (p part) of(status map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range status {
		if k == "conditions" {
			continue
		}
		if p.fields {
			out[k] = v
		}
	}
	conds, _ := status["conditions"].([]any)
	var mine []any
	for _, c := range conds {
		if p.owns(conditionType(c)) {
			mine = append(mine, c)
		}
	}
	if len(mine) > 0 {
		out["conditions"] = mine
	}
	return out
}

func conditionType(c any) string {
	m, _ := c.(map[string]any)
	t, _ := m["type"].(string)
	return t
}

func (w Writer) write(ctx context.Context, obj client.Object, p part, want map[string]any) (ctrl.Result, error) {
	cur, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	status, _ := cur["status"].(map[string]any)
	want = p.of(want)
	if reflect.DeepEqual(p.of(status), want) {
		return ctrl.Result{}, nil
	}
	gvk, err := apiutil.GVKForObject(obj, w.Client.Scheme())
	if err != nil {
		return ctrl.Result{}, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": want}}
	u.SetGroupVersionKind(gvk)
	u.SetName(obj.GetName())
	u.SetNamespace(obj.GetNamespace())
	u.SetResourceVersion(obj.GetResourceVersion())
	err = w.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(w.FieldManager), client.ForceOwnership)
	if res, err, done := outcome(err); done {
		return res, err
	}
	if ops := leftovers(u.Object, p, want); len(ops) > 0 {
		ops = append([]any{map[string]any{"op": "test", "path": "/metadata/resourceVersion", "value": u.GetResourceVersion()}}, ops...)
		patch, err := json.Marshal(ops)
		if err != nil {
			return ctrl.Result{}, err
		}
		err = w.Client.Status().Patch(ctx, u, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(w.FieldManager))
		if apierrors.IsInvalid(err) {
			// The API server answers a failed test operation with 422: the
			// object changed since the apply, which is a conflict.
			return ctrl.Result{RequeueAfter: RetryAfterConflict}, nil
		}
		if res, err, done := outcome(err); done {
			return res, err
		}
	}
	return ctrl.Result{}, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// outcome applies the conflict policy to the error of a write: done when
// the write did not happen.
func outcome(err error) (ctrl.Result, error, bool) {
	switch {
	case err == nil:
		return ctrl.Result{}, nil, false
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: RetryAfterConflict}, nil, true
	case apierrors.IsNotFound(err):
		// Deleted meanwhile: there is no status left to write.
		return ctrl.Result{}, nil, true
	}
	return ctrl.Result{}, fmt.Errorf("writing status: %w", err), true
}

// leftovers returns the JSON patch operations that remove, from the object
// the API server answered with, what of the writer's part it holds beyond
// want: fields and conditions an older update-style write owns, which the
// apply could not remove.
func leftovers(answer map[string]any, p part, want map[string]any) []any {
	status, _ := answer["status"].(map[string]any)
	var ops []any
	conds, _ := status["conditions"].([]any)
	wanted := map[string]bool{}
	wantConds, _ := want["conditions"].([]any)
	for _, c := range wantConds {
		wanted[conditionType(c)] = true
	}
	// From the last, so that each index still points at its condition.
	for i := len(conds) - 1; i >= 0; i-- {
		if t := conditionType(conds[i]); p.owns(t) && !wanted[t] {
			ops = append(ops, remove("/status/conditions/"+strconv.Itoa(i)))
		}
	}
	if p.fields {
		ops = append(ops, extraFields("/status", status, want)...)
	}
	return ops
}

// extraFields returns the operations that remove the fields of have that
// want lacks, looking into objects both hold; conditions are left to the
// caller.
func extraFields(path string, have, want map[string]any) []any {
	var ops []any
	keys := make([]string, 0, len(have))
	for k := range have {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if path == "/status" && k == "conditions" {
			continue
		}
		sub := path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		w, ok := want[k]
		if !ok {
			ops = append(ops, remove(sub))
			continue
		}
		hm, hok := have[k].(map[string]any)
		wm, wok := w.(map[string]any)
		if hok && wok {
			ops = append(ops, extraFields(sub, hm, wm)...)
		}
	}
	return ops
}

func remove(path string) map[string]any { return map[string]any{"op": "remove", "path": path} }
