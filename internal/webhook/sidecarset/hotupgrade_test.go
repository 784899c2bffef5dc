package sidecarset_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// hotSidecar is a HotUpgrade sidecar whose postStart hook migrates.
func hotSidecar(name, image, empty string) deckhandv1alpha1.SidecarContainer {
	c := sidecar(name, image)
	c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/migrate.sh"}}}}
	c.UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: empty}
	return c
}

// TestHotUpgradeInjection checks what a HotUpgrade sidecar injects on the
// real API server: two containers, <name>-1 with the image (working) and
// <name>-2 with the empty image (idle), both with the sidecar's lifecycle
// and SIDECARSET_VERSION / SIDECARSET_VERSION_ALT read from the pod's
// annotations, which record the working container and the versions; a
// cold sidecar next to it is injected once.
func TestHotUpgradeInjection(t *testing.T) {
	ns := env.Namespace(t)
	s := createSidecarSet(t, newSidecarSet("hot-"+ns, ns, "web", hotSidecar("mesh", "mesh:1", "mesh-empty:1"), sidecar("log", "log:1")))
	p := createPod(t, newPod(ns, "web-0", map[string]string{"app": "web"}, "app"))

	if got, want := names(p.Spec.Containers), []string{"mesh-1", "mesh-2", "log", "app"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("containers = %v, want %v", got, want)
	}
	for _, c := range []struct{ name, image string }{{"mesh-1", "mesh:1"}, {"mesh-2", "mesh-empty:1"}, {"log", "log:1"}} {
		got := podutil.FindContainer(p.Spec.Containers, c.name)
		if got.Image != c.image {
			t.Errorf("%s: image %q, want %q", c.name, got.Image, c.image)
		}
		env := map[string]string{}
		for _, e := range got.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		if c.name == "log" {
			if len(env) != 0 {
				t.Errorf("the cold sidecar got version variables: %v", env)
			}
			continue
		}
		want := map[string]string{
			"SIDECARSET_VERSION":     fmt.Sprintf("metadata.annotations['version.sidecarset.apps.deckhand.dev/%s']", c.name),
			"SIDECARSET_VERSION_ALT": fmt.Sprintf("metadata.annotations['versionalt.sidecarset.apps.deckhand.dev/%s']", c.name),
		}
		if !reflect.DeepEqual(env, want) {
			t.Errorf("%s: env %v, want %v", c.name, env, want)
		}
		if got.Lifecycle == nil || got.Lifecycle.PostStart == nil {
			t.Errorf("%s lost the postStart hook", c.name)
		}
	}
	a := p.Annotations
	if got := a[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation]; got != `{"mesh":"mesh-1"}` {
		t.Errorf("working annotation = %q", got)
	}
	for key, want := range map[string]string{
		"version.sidecarset.apps.deckhand.dev/mesh-1": fmt.Sprint(s.Generation), "versionalt.sidecarset.apps.deckhand.dev/mesh-1": "0",
		"version.sidecarset.apps.deckhand.dev/mesh-2": "0", "versionalt.sidecarset.apps.deckhand.dev/mesh-2": "0",
	} {
		if a[key] != want {
			t.Errorf("annotation %s = %q, want %q", key, a[key], want)
		}
	}
	if got := sidecarcontrol.ReadPodRecord(a).Containers(s.Name); !reflect.DeepEqual(got, []string{"mesh-1", "mesh-2", "log"}) {
		t.Errorf("the record gives the SidecarSet %v", got)
	}
}

// TestHotUpgradeValidation checks the create-time and update-time rules of
// upgradeStrategy on the real API server: each refusal names the field.
func TestHotUpgradeValidation(t *testing.T) {
	ns := env.Namespace(t)
	base := func(mut func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
		s := newSidecarSet("", ns, "web", hotSidecar("mesh", "mesh:1", "mesh-empty:1"), sidecar("log", "log:1"))
		mut(s)
		return s
	}
	hot := func(s *deckhandv1alpha1.SidecarSet) *deckhandv1alpha1.SidecarContainerUpgradeStrategy {
		return s.Spec.Containers[0].UpgradeStrategy
	}
	create := []struct {
		name, field, words string
		set                *deckhandv1alpha1.SidecarSet
	}{
		{"no empty image", "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage", "Required", base(func(s *deckhandv1alpha1.SidecarSet) { hot(s).HotUpgradeEmptyImage = "" })},
		{"empty image is the image", "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage", "must differ", base(func(s *deckhandv1alpha1.SidecarSet) { hot(s).HotUpgradeEmptyImage = "mesh:1" })},
		{"empty image on a cold sidecar", "spec.containers[1].upgradeStrategy.hotUpgradeEmptyImage", "only a HotUpgrade", base(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[1].UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{HotUpgradeEmptyImage: "x:1"}
		})},
		{"unknown upgradeType", "spec.containers[0].upgradeStrategy.upgradeType", "Unsupported value", base(func(s *deckhandv1alpha1.SidecarSet) { hot(s).UpgradeType = "WarmUpgrade" })},
		{"hot init container", "spec.initContainers[0].upgradeStrategy.upgradeType", "spec.containers only", base(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{hotSidecar("init", "init:1", "init-empty:1")}
		})},
		{"slot name taken", "spec.containers[0].name", "mesh-2", base(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[1].Name = "mesh-2" })},
		{"slot name too long", "spec.containers[0].name", "63", base(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Name = strings.Repeat("m", 62) })},
		{"version variable set by hand", "spec.containers[0].env[0].name", "set by Deckhand", base(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SIDECARSET_VERSION", Value: "7"}}
		})},
		{"Policy mode", "spec.containers[0].upgradeStrategy.upgradeType", "spec.injectionMode: Policy does not support", base(func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
		})},
	}
	for i, tc := range create {
		t.Run("create/"+tc.name, func(t *testing.T) {
			tc.set.Name = fmt.Sprintf("hot-invalid-%d-%s", i, ns)
			wantRefused(t, tc.set, tc.field, tc.words)
		})
	}

	name := "hot-valid-" + ns
	valid := base(func(s *deckhandv1alpha1.SidecarSet) { s.Name = name })
	createSidecarSet(t, valid)
	update := []struct {
		name, field, words string
		mut                func(*deckhandv1alpha1.SidecarSet)
	}{
		{"hot to cold", "spec.containers[0].upgradeStrategy.upgradeType", "cannot change from HotUpgrade to ColdUpgrade", func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].UpgradeStrategy = nil
		}},
		{"cold to hot", "spec.containers[1].upgradeStrategy.upgradeType", "cannot change from ColdUpgrade to HotUpgrade", func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[1].UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "log-empty:1"}
		}},
		{"empty image changed", "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage", "cannot change", func(s *deckhandv1alpha1.SidecarSet) { hot(s).HotUpgradeEmptyImage = "mesh-empty:2" }},
		{"more than the image", "spec.containers[0]", "can change only its image", func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image = "mesh:2"
			s.Spec.Containers[0].Args = []string{"--verbose"}
		}},
	}
	for _, tc := range update {
		t.Run("update/"+tc.name, func(t *testing.T) {
			err := tryUpdateSidecarSet(t, name, tc.mut)
			if err == nil {
				t.Fatal("an update that cannot be hot-upgraded was accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("error does not name %q (with %q): %v", tc.field, tc.words, err)
			}
		})
	}
	// Another SidecarSet that can select the same pods cannot inject a
	// container called like one of the HotUpgrade sidecar's two.
	clash := newSidecarSet("hot-clash-"+ns, ns, "web", sidecar("mesh-2", "other:1"))
	if err := env.Client.Create(ctxT(t), clash); err == nil {
		_ = env.Client.Delete(ctxT(t), clash)
		t.Error("created a SidecarSet injecting mesh-2 beside a HotUpgrade sidecar mesh")
	} else if !strings.Contains(err.Error(), "spec.containers[0].name") || !strings.Contains(err.Error(), name) {
		t.Errorf("error does not name the field and the other SidecarSet: %v", err)
	}

	// What a hot upgrade carries is accepted: a new image, and changes to
	// the cold sidecar.
	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "mesh:2"
		s.Spec.Containers[1].Args = []string{"--verbose"}
	})
}
