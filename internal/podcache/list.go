package podcache

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lister lists cached pods as the pointers the informer holds.
//
// client.List copies every Pod it returns into a PodList's Items, a
// shallow copy of about 2 KB a pod even with UnsafeDisableDeepCopy: a
// SidecarSet selecting 50,000 pods allocated 100 MB per reconcile, half of
// the manager's live heap at that scale (docs/benchmark-analysis.md, item
// 8). The pods Lister returns are the cache's own: read-only.
type Lister struct {
	indexer toolscache.Indexer
	// reader serves the lists when there is no informer (a Lister built
	// from a client alone, in unit tests).
	reader client.Reader
}

// NewLister returns a Lister over the manager cache's pod informer. A
// cache whose informer has no single indexer (one per namespace) is
// listed through, with the copy.
func NewLister(ctx context.Context, c ctrlcache.Cache) (*Lister, error) {
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if idx, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		return &Lister{indexer: idx.GetIndexer(), reader: c}, nil
	}
	return &Lister{reader: c}, nil
}

// ListerFromReader returns a Lister that lists through r: what NewLister
// does, with the copy. For tests that run a reconciler without a manager.
func ListerFromReader(r client.Reader) *Lister { return &Lister{reader: r} }

// Select returns the pods in namespace ("" for every namespace) whose
// labels selector matches.
func (l *Lister) Select(ctx context.Context, namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	if l.indexer == nil {
		return l.selectFromReader(ctx, namespace, selector)
	}
	var objs []any
	if namespace == "" {
		objs = l.indexer.List()
	} else {
		var err error
		if objs, err = l.indexer.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	}
	// Sized for all: the SidecarSet controller, its caller, selects most
	// pods of the namespaces it lists, and growing the slice from nothing
	// reallocates and copies it again and again at 50,000 pods.
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (l *Lister) selectFromReader(ctx context.Context, namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	return l.listFromReader(ctx, opts...)
}

// listFromReader lists the pods opts select through the reader, without the
// copy a cache-backed reader makes by default.
func (l *Lister) listFromReader(ctx context.Context, opts ...client.ListOption) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := l.reader.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Indexed returns the pods in namespace whose value for field, an index
// registered with the cache's IndexField, is value.
//
// NOTE: controller-runtime keeps such an index on the informer as
// "field:<field>", keyed "<namespace>/<value>" (cache/internal's
// FieldIndexName and KeyToNamespacedKey); reading it there is what spares
// the copy. A controller-runtime that named it otherwise would make this
// fail, not fall back quietly: every PodSet sync in the PodSet controller's
// tests reads its pods here.
func (l *Lister) Indexed(ctx context.Context, namespace, field, value string) ([]*corev1.Pod, error) {
	if l.indexer == nil {
		return l.listFromReader(ctx, client.InNamespace(namespace), client.MatchingFields{field: value})
	}
	objs, err := l.indexer.ByIndex("field:"+field, namespace+"/"+value)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}
