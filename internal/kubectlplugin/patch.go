package kubectlplugin

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// getAndSetField reads the object at key into obj, then sets the field at
// path to v. Reading first is for the error: a merge patch of a missing
// object fails with a less helpful message than the NotFound of a get.
func getAndSetField(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object, path []string, v any) error {
	if err := c.Get(ctx, key, obj); err != nil {
		return err
	}
	return setField(ctx, c, obj, path, v)
}

// setField sets the field at path of obj to v with a JSON merge patch,
// which touches that one field only.
func setField(ctx context.Context, c client.Client, obj client.Object, path []string, v any) error {
	body, err := mergePatch(path, v)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// mergePatch is a JSON merge patch that sets the field at path to v.
func mergePatch(path []string, v any) ([]byte, error) {
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	return json.Marshal(v)
}
