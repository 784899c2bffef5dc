// Command crdtrim drops, from the CRDs controller-gen generates, the
// descriptions that come from Kubernetes' own types (a PodSet's pod
// template, a SidecarSet's containers and volumes, a WebServer's probes):
//
//	crdtrim config/crd/bases
//
// Those descriptions are the bulk of the CRDs and repeat what
// `kubectl explain pod.spec` already says; without them every CRD fits the
// 256 KiB that client-side `kubectl apply` may store in its
// last-applied-configuration annotation. Every description written for a
// Deckhand field stays, and so does everything the API server validates
// with (types, formats, enums, required, defaults, CEL rules): only
// "description" keys are removed.
//
// Which descriptions are Kubernetes' is read from the Go types the CRD was
// generated from (api/v1alpha1): a field whose declaring struct lives
// outside this module, and everything below it, loses its description; a
// Deckhand field keeps its own even when its type is a Kubernetes one.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/hack/internal/command"
)

// modulePath prefixes the package path of every type whose documentation is
// Deckhand's own.
const modulePath = "github.com/deckhand-dev/deckhand/"

func main() {
	command.Main("crdtrim", "CRD_DIR", trimDir)
}

// trimDir rewrites every CRD file of dir in place.
func trimDir(dir string) error {
	scheme := runtime.NewScheme()
	if err := deckhandv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", dir)
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, err := trimCRD(in, scheme.AllKnownTypes())
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(f, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// trimCRD returns the CRD document in (controller-gen's output, one CRD)
// with Kubernetes' descriptions removed from the schema of each version,
// whose Go type known maps from group, version and kind.
func trimCRD(in []byte, known map[schema.GroupVersionKind]reflect.Type) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(in, &crd); err != nil {
		return nil, err
	}
	group, _ := dig(crd, "spec", "group").(string)
	kind, _ := dig(crd, "spec", "names", "kind").(string)
	versions, _ := dig(crd, "spec", "versions").([]any)
	if group == "" || kind == "" || len(versions) == 0 {
		return nil, errors.New("not a CustomResourceDefinition with group, kind and versions")
	}
	for _, v := range versions {
		version, _ := v.(map[string]any)
		name, _ := version["name"].(string)
		t, ok := known[schema.GroupVersionKind{Group: group, Version: name, Kind: kind}]
		if !ok {
			return nil, fmt.Errorf("no Go type for %s/%s %s", group, name, kind)
		}
		root, _ := dig(version, "schema", "openAPIV3Schema").(map[string]any)
		if root == nil {
			return nil, fmt.Errorf("%s %s has no openAPIV3Schema", kind, name)
		}
		trimOwn(root, t)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	// controller-gen starts every file with a document separator.
	if bytes.HasPrefix(in, []byte("---\n")) {
		out = append([]byte("---\n"), out...)
	}
	return out, nil
}

// trimOwn walks schema, the schema of Go type t, whose own description is
// kept; below it, descriptions of Kubernetes' fields go.
func trimOwn(schema map[string]any, t reflect.Type) {
	t = deref(t)
	if !own(t) {
		description, ok := schema["description"]
		stripDescriptions(schema)
		if ok {
			schema["description"] = description
		}
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if items, ok := schema["items"].(map[string]any); ok {
			trimElem(items, t.Elem())
		}
	case reflect.Map:
		if values, ok := schema["additionalProperties"].(map[string]any); ok {
			trimElem(values, t.Elem())
		}
	case reflect.Struct:
		props, _ := schema["properties"].(map[string]any)
		trimFields(props, t)
	}
}

// trimElem walks the schema of an element of a list or map: its description
// is its type's, so it goes when the type is Kubernetes'.
func trimElem(schema map[string]any, t reflect.Type) {
	if !own(deref(t)) {
		stripDescriptions(schema)
		return
	}
	trimOwn(schema, t)
}

// trimFields walks the properties of struct t; an inline embedded struct's
// fields are t's properties too.
func trimFields(props map[string]any, t reflect.Type) {
	if props == nil {
		return
	}
	ownStruct := own(t)
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline := jsonName(f)
		if inline {
			trimFields(props, deref(f.Type))
			continue
		}
		prop, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		if !ownStruct {
			stripDescriptions(prop)
			continue
		}
		// A Deckhand field keeps its description even when its type is
		// Kubernetes'.
		trimOwn(prop, f.Type)
	}
}

// jsonName is the property name of f, or inline when f's fields are its
// struct's own properties.
func jsonName(f reflect.StructField) (name string, inline bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if f.Anonymous && name == "" && (strings.Contains(","+opts+",", ",inline,") || tag == "") {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

// own reports whether t's documentation is Deckhand's: a named type of
// this module. Unnamed and predeclared types have no documentation of
// their own.
func own(t reflect.Type) bool {
	return t.PkgPath() == "" || strings.HasPrefix(t.PkgPath(), modulePath)
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// stripDescriptions removes every description of the schema and of the
// schemas below it.
func stripDescriptions(schema map[string]any) {
	delete(schema, "description")
	for _, key := range []string{"properties", "patternProperties", "definitions"} {
		if m, ok := schema[key].(map[string]any); ok {
			for _, p := range m {
				if p, ok := p.(map[string]any); ok {
					stripDescriptions(p)
				}
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties", "not"} {
		if p, ok := schema[key].(map[string]any); ok {
			stripDescriptions(p)
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		if l, ok := schema[key].([]any); ok {
			for _, p := range l {
				if p, ok := p.(map[string]any); ok {
					stripDescriptions(p)
				}
			}
		}
	}
}

// dig returns the value at path in nested maps, or nil.
func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
