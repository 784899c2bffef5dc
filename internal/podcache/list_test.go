package podcache

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestListerSelect: the informer's pods and a reader's list select alike,
// by namespace and labels, and the informer's are its own pointers.
func TestListerSelect(t *testing.T) {
	pod := func(ns, name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}}
	}
	pods := []*corev1.Pod{pod("a", "web-1", "web"), pod("a", "db-1", "db"), pod("b", "web-2", "web"), pod("c", "none", "")}
	listers := bothListers(t, pods, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}, fake.NewClientBuilder())
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	cases := []struct {
		namespace string
		selector  labels.Selector
		want      []string
	}{
		{"", web, []string{"web-1", "web-2"}},
		{"a", web, []string{"web-1"}},
		{"c", web, nil},
		{"a", labels.Everything(), []string{"db-1", "web-1"}},
	}
	for name, l := range listers {
		for _, tc := range cases {
			got, err := l.Select(context.Background(), tc.namespace, tc.selector)
			checkListed(t, fmt.Sprintf("%s: Select(%q, %s)", name, tc.namespace, tc.selector), got, err, name == "informer", pods, tc.want)
		}
	}
}

// TestListerIndexed: the informer's field index, read the way
// controller-runtime names and keys it, and a reader's field-selected list
// agree, and the informer's pods are its own pointers.
func TestListerIndexed(t *testing.T) {
	const field = "example.com/owner"
	owner := func(o client.Object) []string { return []string{o.GetAnnotations()["owner"]} }
	pod := func(ns, name, own string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"owner": own}}}
	}
	pods := []*corev1.Pod{pod("a", "x-1", "x"), pod("a", "x-2", "x"), pod("a", "y-1", "y"), pod("b", "x-3", "x"), pod("a", "none", "")}
	listers := bothListers(t, pods, toolscache.Indexers{
		"field:" + field: func(obj any) ([]string, error) {
			o := obj.(client.Object)
			return []string{o.GetNamespace() + "/" + owner(o)[0]}, nil
		},
	}, fake.NewClientBuilder().WithIndex(&corev1.Pod{}, field, owner))
	cases := []struct {
		namespace, value string
		want             []string
	}{
		{"a", "x", []string{"x-1", "x-2"}},
		{"b", "x", []string{"x-3"}},
		{"a", "", []string{"none"}},
		{"c", "x", nil},
	}
	for name, l := range listers {
		for _, tc := range cases {
			got, err := l.Indexed(context.Background(), tc.namespace, field, tc.value)
			checkListed(t, fmt.Sprintf("%s: Indexed(%q, %q)", name, tc.namespace, tc.value), got, err, name == "informer", pods, tc.want)
		}
	}
	if _, err := listers["informer"].Indexed(context.Background(), "a", "example.com/unknown", "x"); err == nil {
		t.Error("an index the informer does not have read as empty, not as an error")
	}
}

// checkListed wants a list of the pods named want, the cache's own
// pointers if fromCache.
func checkListed(t *testing.T, call string, got []*corev1.Pod, err error, fromCache bool, cached []*corev1.Pod, want []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
		if fromCache && !slices.Contains(cached, p) {
			t.Errorf("%s: pod %s is a copy, not the cache's", call, p.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("%s = %v, want %v", call, names, want)
	}
}

// bothListers returns a Lister over an informer's indexer (with indexers)
// and one over a fake client (built by b), each holding pods.
func bothListers(t *testing.T, pods []*corev1.Pod, indexers toolscache.Indexers, b *fake.ClientBuilder) map[string]*Lister {
	t.Helper()
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, indexers)
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, p.DeepCopy())
	}
	return map[string]*Lister{
		"informer": {indexer: idx},
		"reader":   ListerFromReader(b.WithRuntimeObjects(objs...).Build()),
	}
}
