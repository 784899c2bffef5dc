package podset_test

import (
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
)

// The operator tutorials' PodSet, with only replicas, as written: the
// admission webhook gives it the default selector and template, and it runs
// three Ready pods, listed in status.podNames.
func TestTutorialPodSetWithOnlyReplicas(t *testing.T) {
	ns := env.Namespace(t)
	const manifest = `
apiVersion: apps.deckhand.dev/v1alpha1
kind: PodSet
metadata:
  name: example-podset
spec:
  replicas: 3
`
	ps := &deckhandv1alpha1.PodSet{}
	if err := yaml.Unmarshal([]byte(manifest), ps); err != nil {
		t.Fatal(err)
	}
	ps.Namespace = ns
	if err := env.Client.Create(ctxT(t), ps); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app.kubernetes.io/name": "podset", "app.kubernetes.io/instance": "example-podset"}
	if !equalLabels(ps.Spec.Selector.MatchLabels, want) || !equalLabels(ps.Spec.Template.Labels, want) ||
		len(ps.Spec.Template.Spec.Containers) != 1 || ps.Spec.Template.Spec.Containers[0].Image != podsetwebhook.DefaultImage {
		t.Fatalf("defaulted spec: selector %v, template %+v", ps.Spec.Selector, ps.Spec.Template)
	}
	got := waitPodSetConditions(t, ps, "3 available pods", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return st.AvailableReplicas == 3 && len(st.PodNames) == 3
	})
	for _, name := range got.Status.PodNames {
		if !strings.HasPrefix(name, "example-podset-") {
			t.Errorf("pod %s is not named after the PodSet", name)
		}
	}

	// spec.image sets the default template's image; with a template of
	// one's own it is refused, naming the field.
	img := newPodSet(ns, "with-image", 1, func(p *deckhandv1alpha1.PodSet) {
		p.Spec.Selector, p.Spec.Template = nil, deckhandv1alpha1.PodSet{}.Spec.Template
		p.Spec.Image = "registry.example/app:1"
	})
	if err := env.Client.Create(ctxT(t), img); err != nil {
		t.Fatal(err)
	}
	if c := img.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "registry.example/app:1" {
		t.Errorf("template containers %+v, want one running spec.image", c)
	}
	bad := newPodSet(ns, "image-and-template", 1, func(p *deckhandv1alpha1.PodSet) { p.Spec.Image = "registry.example/app:2" })
	if err := env.Client.Create(ctxT(t), bad); err == nil || !strings.Contains(err.Error(), "spec.image") {
		t.Errorf("image with a template of its own: %v, want a refusal naming spec.image", err)
	}
}

func equalLabels(a, b map[string]string) bool { return maps.Equal(a, b) }
