package fuzz

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	celvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// crdSchema is one kind's v1alpha1 schema in the forms the API server uses:
// structural (pruning, defaulting, CEL rules) and OpenAPI (value checks).
type crdSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *celvalidation.Validator
}

// crdSchemas are the schemas of the generated CRDs in config/crd/bases, by
// kind: exactly what the API server prunes, defaults and validates with.
var crdSchemas = sync.OnceValues(func() (map[string]*crdSchema, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]*crdSchema{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, err
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != "v1alpha1" || v.Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, err
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, err
			}
			openAPI, _, err := apiservervalidation.NewSchemaValidator(internal)
			if err != nil {
				return nil, err
			}
			out[crd.Spec.Names.Kind] = &crdSchema{
				structural: s,
				openAPI:    openAPI,
				cel:        celvalidation.NewValidator(s, true, celconfig.PerCallLimit),
			}
		}
	}
	return out, nil
})

// schemaFor returns the structural schema of kind, failing t if there is none.
func schemaFor(t testing.TB, kind string) *structuralschema.Structural {
	t.Helper()
	return crdSchemaFor(t, kind).structural
}

// schemaErrors is what the API server's CRD validation (OpenAPI value checks
// and x-kubernetes-validations rules) says of obj, an object of kind in its
// JSON form; old is nil for a create.
func schemaErrors(t testing.TB, kind string, obj, old map[string]any) field.ErrorList {
	t.Helper()
	s := crdSchemaFor(t, kind)
	var errs field.ErrorList
	if old == nil {
		errs = apiservervalidation.ValidateCustomResource(nil, obj, s.openAPI)
	} else {
		errs = apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, s.openAPI)
	}
	if s.cel != nil {
		var oldObj any
		if old != nil {
			oldObj = old
		}
		celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// crdSchemaFor returns kind's schema, failing t if there is none.
func crdSchemaFor(t testing.TB, kind string) *crdSchema {
	t.Helper()
	schemas, err := crdSchemas()
	if err != nil {
		t.Fatalf("loading the CRDs: %v", err)
	}
	s := schemas[kind]
	if s == nil {
		t.Fatalf("no v1alpha1 schema for %s in config/crd/bases", kind)
	}
	return s
}

func TestEveryKindHasAStructuralSchema(t *testing.T) {
	for _, k := range []string{"SidecarSet", "PodSet", "WebServer", "RestartSchedule"} {
		schemaFor(t, k)
	}
}
