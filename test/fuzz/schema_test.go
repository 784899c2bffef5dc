package fuzz

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// crdSchemas are the structural schemas of the generated CRDs in
// config/crd/bases, by kind: exactly what the API server prunes and
// defaults with.
var crdSchemas = sync.OnceValues(func() (map[string]*structuralschema.Structural, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]*structuralschema.Structural{}
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
			out[crd.Spec.Names.Kind] = s
		}
	}
	return out, nil
})

// schemaFor returns the structural schema of kind, failing t if there is none.
func schemaFor(t testing.TB, kind string) *structuralschema.Structural {
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
