// Package health tells what tools that know nothing of Deckhand make of a
// Deckhand object: kstatus (sigs.k8s.io/cli-utils, behind Flux's health
// checks and kpt) and Argo CD, through the Lua health check Deckhand ships in
// config/argocd. Tests use it on objects read from a real API server.
package health

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Argo CD health statuses a Deckhand object can have.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
)

// ArgoCDScript is the path of the Lua health check, relative to the
// repository root.
const ArgoCDScript = "config/argocd/health.lua"

// Kstatus computes obj's status as kstatus does.
func Kstatus(obj kruntime.Object) (*status.Result, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return status.Compute(u)
}

// ArgoCD runs Deckhand's Argo CD health check on obj, in a Lua state set up
// as Argo CD sets up its own (only the package, base and table libraries, the
// object in the global obj), and returns the health status and message.
func ArgoCD(obj kruntime.Object) (healthStatus, message string, err error) {
	script, err := os.ReadFile(filepath.Join(RepoRoot(), ArgoCDScript))
	if err != nil {
		return "", "", err
	}
	return RunLua(string(script), obj)
}

// RunLua runs a health check script on obj.
func RunLua(script string, obj kruntime.Object) (healthStatus, message string, err error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return "", "", err
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		l.Push(l.NewFunction(open))
		l.Push(lua.LString(name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", toLua(l, u.Object))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	st, ok := hs.RawGetString("status").(lua.LString)
	if !ok {
		return "", "", fmt.Errorf("the script returned no status")
	}
	return string(st), lua.LVAsString(hs.RawGetString("message")), nil
}

// RepoRoot is the root of the repository this file is in.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// scheme knows Deckhand's kinds, to name the kind of a typed object read
// without one (clients drop apiVersion and kind when they decode).
var scheme = func() *kruntime.Scheme {
	s := kruntime.NewScheme()
	utilruntime.Must(deckhandv1alpha1.AddToScheme(s))
	return s
}()

func toUnstructured(obj kruntime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		u.SetGroupVersionKind(gvk)
	}
	return u, nil
}

// toLua converts a JSON-like value to Lua as Argo CD does: objects and
// arrays become tables (arrays indexed from 1), numbers LNumber.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	return lua.LString(fmt.Sprint(v))
}
