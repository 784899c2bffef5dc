package podcache

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestListerSelect: the informer's pods and a reader's list select alike,
// by namespace and labels, and the informer's are its own pointers.
func TestListerSelect(t *testing.T) {
	pod := func(ns, name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}}
	}
	pods := []*corev1.Pod{pod("a", "web-1", "web"), pod("a", "db-1", "db"), pod("b", "web-2", "web"), pod("c", "none", "")}
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, p.DeepCopy())
	}
	listers := map[string]*Lister{
		"informer": {indexer: idx},
		"reader":   ListerFromReader(fake.NewClientBuilder().WithRuntimeObjects(objs...).Build()),
	}
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
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
				if name == "informer" && !slices.Contains(pods, p) {
					t.Errorf("%s: pod %s is a copy, not the cache's", name, p.Name)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("%s: Select(%q, %s) = %v, want %v", name, tc.namespace, tc.selector, names, tc.want)
			}
		}
	}
}
