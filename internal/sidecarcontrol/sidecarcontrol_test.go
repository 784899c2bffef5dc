package sidecarcontrol

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestHashesSeparateImages(t *testing.T) {
	spec := deckhandv1alpha1.SidecarSetSpec{Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "p", Image: "p:1"}}}}
	h1, w1 := Hashes(&spec)
	spec.Containers[0].Image = "p:2"
	h2, w2 := Hashes(&spec)
	if h1 == h2 || w1 != w2 {
		t.Errorf("image change: hashes %s->%s, without image %s->%s", h1, h2, w1, w2)
	}
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
	_, w3 := Hashes(&spec)
	if w3 == w2 {
		t.Errorf("env change did not change the hash without image")
	}
}

func TestCandidatesUseTheIndex(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, Indexers())
	add := func(name, ns string) {
		_ = idx.Add(&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: deckhandv1alpha1.SidecarSetSpec{Namespace: ns}})
	}
	add("z-all", "")
	add("b-prod", "prod")
	add("a-dev", "dev")
	add("c-all", "")
	l := NewLister(idx, nil, Options{})
	got, err := l.Candidates("prod")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if want := []string{"b-prod", "c-all", "z-all"}; !reflect.DeepEqual(names, want) {
		t.Errorf("candidates = %v, want %v", names, want)
	}
	if _, ok := l.NamespaceLabels("prod"); ok {
		t.Errorf("no namespace cache, yet labels found")
	}
}

func TestMatches(t *testing.T) {
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}}
	c := compile(s, PodMetadataAllowlists{})
	ns := func(name string) (map[string]string, bool) {
		switch name {
		case "prod", "kube-system":
			return map[string]string{"env": "prod"}, true
		case "dev":
			return map[string]string{"env": "dev"}, true
		}
		return nil, false
	}
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   bool
	}{
		{"prod", map[string]string{"app": "web"}, true},
		{"prod", map[string]string{"app": "db"}, false},
		{"dev", map[string]string{"app": "web"}, false},
		{"gone", map[string]string{"app": "web"}, false},
	} {
		if got := c.Matches(s, tc.ns, tc.labels, ns); got != tc.want {
			t.Errorf("Matches(%s, %v) = %v, want %v", tc.ns, tc.labels, got, tc.want)
		}
	}
	empty := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: deckhandv1alpha1.SidecarSetSpec{Selector: &metav1.LabelSelector{}}}
	if compile(empty, PodMetadataAllowlists{}).Matches(empty, "prod", map[string]string{"app": "web"}, ns) {
		t.Errorf("an empty selector matched a pod")
	}
}

func TestProtectedSet(t *testing.T) {
	cases := map[string]struct {
		own   string
		extra []string
		want  map[string]bool
	}{
		"default install": {"", nil, map[string]bool{"kube-system": true, "deckhand-system": true}},
		"own namespace":   {"ops", nil, map[string]bool{"kube-system": true, "ops": true}},
		"same as default": {"deckhand-system", nil, map[string]bool{"kube-system": true, "deckhand-system": true}},
		"flag default":    {"ops", DefaultProtectedNamespaces("ops"), map[string]bool{"kube-system": true, "kube-public": true, "ops": true}},
		// kube-system and the own namespace stay protected whatever the
		// flag says: the webhook configuration never sends their pods.
		"flag narrowed": {"ops", []string{"team-a", ""}, map[string]bool{"kube-system": true, "ops": true, "team-a": true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := protectedSet(tc.own, tc.extra); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("protectedSet(%q, %q) = %v, want %v", tc.own, tc.extra, got, tc.want)
			}
		})
	}
}

// A Lister keeps SidecarSets out of the namespaces its Options protect and
// of those labelled out of every SidecarSet, whatever their selectors say,
// and keeps its revisions in the manager's namespace.
func TestListerProtectedNamespaces(t *testing.T) {
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}
	cases := map[string]struct {
		opts        Options
		protected   []string
		revisionsIn string
		reachable   []string
	}{
		"defaults":          {Options{}, []string{"deckhand-system", "kube-public", "kube-system"}, "deckhand-system", []string{"ops", "prod"}},
		"own namespace":     {Options{Namespace: "ops"}, []string{"kube-public", "kube-system", "ops"}, "ops", []string{"deckhand-system", "prod"}},
		"flag":              {Options{Namespace: "ops", ProtectedNamespaces: []string{"prod"}}, []string{"kube-system", "ops", "prod"}, "ops", []string{"deckhand-system", "kube-public"}},
		"flag set to empty": {Options{ProtectedNamespaces: []string{}}, []string{"deckhand-system", "kube-system"}, "deckhand-system", []string{"kube-public", "prod"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, Indexers())
			if err := idx.Add(s); err != nil {
				t.Fatal(err)
			}
			nsIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			for _, ns := range []string{"deckhand-system", "kube-public", "kube-system", "ops", "prod"} {
				if err := nsIdx.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
					t.Fatal(err)
				}
			}
			for ns, value := range map[string]string{"opted-out": deckhandv1alpha1.SidecarSetInjectionDisabled, "opted-in": "enabled"} {
				if err := nsIdx.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
					Labels: map[string]string{deckhandv1alpha1.SidecarSetInjectionLabel: value}}}); err != nil {
					t.Fatal(err)
				}
			}
			l := NewLister(idx, nsIdx, tc.opts)
			if got := l.ProtectedNamespaceNames(); !reflect.DeepEqual(got, tc.protected) {
				t.Errorf("ProtectedNamespaceNames() = %q, want %q", got, tc.protected)
			}
			if got := l.RevisionNamespace(); got != tc.revisionsIn {
				t.Errorf("RevisionNamespace() = %q, want %q", got, tc.revisionsIn)
			}
			web := map[string]string{"app": "web"}
			for _, ns := range append(slices.Clone(tc.protected), "opted-out") {
				if !l.IsProtectedNamespace(ns) || l.Matches(s, ns, web) || l.MatchesNamespace(s, ns) {
					t.Errorf("namespace %s: protected %v, matched %v, namespace matched %v; want protected and no match", ns, l.IsProtectedNamespace(ns), l.Matches(s, ns, web), l.MatchesNamespace(s, ns))
				}
			}
			for _, ns := range append(slices.Clone(tc.reachable), "opted-in") {
				if l.IsProtectedNamespace(ns) || !l.Matches(s, ns, web) || !l.MatchesNamespace(s, ns) {
					t.Errorf("namespace %s: protected %v, matched %v, namespace matched %v; want a match", ns, l.IsProtectedNamespace(ns), l.Matches(s, ns, web), l.MatchesNamespace(s, ns))
				}
			}
		})
	}
}

func TestDefaultProtectedNamespaces(t *testing.T) {
	if got, want := DefaultProtectedNamespaces(""), []string{"kube-system", "kube-public", "deckhand-system"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultProtectedNamespaces(\"\") = %q, want %q", got, want)
	}
}
