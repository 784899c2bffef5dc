package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// applier server-side applies YAML documents of any kind.
type applier struct {
	dyn          dynamic.Interface
	mapper       meta.RESTMapper
	fieldManager string
}

func newApplier(cfg *rest.Config, fieldManager string) (*applier, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &applier{dyn: dyn, mapper: mapper, fieldManager: fieldManager}, nil
}

func (a *applier) applyFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return eachObject(data, func(obj *unstructured.Unstructured) error { return a.applyObject(ctx, obj) })
}

// applyObject applies obj, naming it in the error.
func (a *applier) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := a.apply(ctx, obj); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// EachDocument calls fn with every document of a multi-document YAML stream,
// stopping at the first error.
func EachDocument(data []byte, fn func(doc []byte) error) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(doc); err != nil {
			return err
		}
	}
}

// eachObject calls fn with every non-empty object of a multi-document YAML
// stream.
func eachObject(data []byte, fn func(*unstructured.Unstructured) error) error {
	return EachDocument(data, func(doc []byte) error {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			return nil
		}
		return fn(obj)
	})
}

func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		res = a.dyn.Resource(mapping.Resource).Namespace(ns)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: a.fieldManager, Force: &force})
	return err
}
