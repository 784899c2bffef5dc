package sidecarcontrol

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestPodRecordRoundTrip(t *testing.T) {
	r := PodRecord{
		Hash: map[string]HashEntry{
			"b": {Hash: "2", Containers: []string{"x"}},
			"a": {Hash: "1", Containers: []string{"y", "z"}},
		},
		HashWithoutImage: map[string]HashWithoutImageEntry{"a": {Hash: "10"}, "b": {Hash: "20"}},
	}
	injected, hash, without := r.Annotations()
	if injected != "a,b" {
		t.Errorf("injected = %q", injected)
	}
	ann := map[string]string{
		deckhandv1alpha1.AnnotationSidecarSetInjected:         injected,
		deckhandv1alpha1.AnnotationSidecarSetHash:             hash,
		deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage: without,
	}
	if got := ParsePodRecord(ann); !reflect.DeepEqual(got, r) {
		t.Errorf("round trip = %+v, want %+v", got, r)
	}
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "": false} {
		if IsInjected(ann, name) != want {
			t.Errorf("IsInjected(%q) = %v", name, !want)
		}
	}
}

// TestRecordedRevisions: the memoised read agrees with ParsePodRecord, for
// the same text seen again, for other names, and for malformed annotations;
// and the memo stays bounded.
func TestRecordedRevisions(t *testing.T) {
	_, hash, without := PodRecord{
		Hash:             map[string]HashEntry{"a": {Hash: "1", Containers: []string{"y"}}, "b": {Hash: "2"}},
		HashWithoutImage: map[string]HashWithoutImageEntry{"a": {Hash: "10"}, "b": {Hash: "20"}},
	}.Annotations()
	good := map[string]string{
		deckhandv1alpha1.AnnotationSidecarSetHash:             hash,
		deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage: without,
	}
	bad := map[string]string{
		deckhandv1alpha1.AnnotationSidecarSetHash:             `{"a":`,
		deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage: `[]`,
	}
	for _, tc := range []struct {
		ann               map[string]string
		name, hash, noImg string
	}{
		{good, "a", "1", "10"},
		{good, "a", "1", "10"}, // memoised
		{good, "b", "2", "20"},
		{good, "c", "", ""},
		{bad, "a", "", ""},
		{nil, "a", "", ""},
	} {
		h, w := RecordedRevisions(tc.ann, tc.name)
		if h != tc.hash || w != tc.noImg {
			t.Errorf("RecordedRevisions(%v, %q) = %q, %q; want %q, %q", tc.ann, tc.name, h, w, tc.hash, tc.noImg)
		}
		rec := ParsePodRecord(tc.ann)
		if rec.Hash[tc.name].Hash != h || rec.HashWithoutImage[tc.name].Hash != w {
			t.Errorf("RecordedRevisions disagrees with ParsePodRecord for %q", tc.name)
		}
	}
	for i := range 3 * revisionMemoSize {
		RecordedRevisions(map[string]string{deckhandv1alpha1.AnnotationSidecarSetHash: `{"x":{"hash":"` + string(rune('a'+i%26)) + `"}, "n":{"hash":"` + fmt.Sprint(i) + `"}}`}, "n")
	}
	revisions.mu.Lock()
	size := len(revisions.m)
	revisions.mu.Unlock()
	if size > revisionMemoSize {
		t.Errorf("memo holds %d entries, bound is %d", size, revisionMemoSize)
	}
}

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
	l := NewLister(idx, nil)
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
	c := Compile(s)
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
		{"kube-system", map[string]string{"app": "web"}, false},
	} {
		if got := c.Matches(s, tc.ns, tc.labels, ns); got != tc.want {
			t.Errorf("Matches(%s, %v) = %v, want %v", tc.ns, tc.labels, got, tc.want)
		}
	}
	empty := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: deckhandv1alpha1.SidecarSetSpec{Selector: &metav1.LabelSelector{}}}
	if Compile(empty).Matches(empty, "prod", map[string]string{"app": "web"}, ns) {
		t.Errorf("an empty selector matched a pod")
	}
}

func TestProtectedSet(t *testing.T) {
	cases := map[string]struct {
		own  string
		want map[string]bool
	}{
		"default install": {"", map[string]bool{"kube-system": true, "deckhand-system": true}},
		"own namespace":   {"ops", map[string]bool{"kube-system": true, "ops": true}},
		"same as default": {"deckhand-system", map[string]bool{"kube-system": true, "deckhand-system": true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := protectedSet(tc.own); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("protectedSet(%q) = %v, want %v", tc.own, got, tc.want)
			}
		})
	}
}
