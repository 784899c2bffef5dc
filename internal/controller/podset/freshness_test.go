package podset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestCacheMisses(t *testing.T) {
	ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"}}
	now := metav1.Now()
	pod := func(name string, owner types.UID, mut ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(name), Labels: map[string]string{"app": "web"}}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "PodSet", Name: "web", UID: owner, Controller: ptr.To(true)}}
		}
		for _, m := range mut {
			m(p)
		}
		return p
	}
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &now }
	failed := func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
	unlabelled := func(p *corev1.Pod) { p.Labels = nil }
	cases := map[string]struct {
		active, terminating []*corev1.Pod
		fresh               []*corev1.Pod
		want                string
	}{
		"the same pods":                  {active: []*corev1.Pod{pod("a", "u1")}, terminating: []*corev1.Pod{pod("b", "u1", deleting)}, fresh: []*corev1.Pod{pod("a", "u1"), pod("b", "u1", deleting)}},
		"a pod the cache lacks":          {active: []*corev1.Pod{pod("a", "u1")}, fresh: []*corev1.Pod{pod("a", "u1"), pod("b", "u1")}, want: "pod b not in the cache"},
		"a pod being deleted":            {active: []*corev1.Pod{pod("a", "u1")}, fresh: []*corev1.Pod{pod("a", "u1", deleting)}, want: "pod a being deleted"},
		"a pod gone":                     {active: []*corev1.Pod{pod("a", "u1"), pod("b", "u1")}, fresh: []*corev1.Pod{pod("a", "u1")}, want: "pod b gone"},
		"a terminating pod gone":         {terminating: []*corev1.Pod{pod("b", "u1", deleting)}, fresh: nil},
		"a finished pod":                 {fresh: []*corev1.Pod{pod("a", "u1", failed)}},
		"another controller's pod":       {fresh: []*corev1.Pod{pod("a", "u2")}},
		"an orphan":                      {fresh: []*corev1.Pod{pod("a", "")}},
		"a pod no longer matching, gone": {active: []*corev1.Pod{pod("a", "u1", unlabelled)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &scope{ps: ps, selector: labels.SelectorFromSet(labels.Set{"app": "web"}), pods: tc.active, terminating: tc.terminating}
			fresh := make([]corev1.Pod, len(tc.fresh))
			for i, p := range tc.fresh {
				fresh[i] = *p
			}
			if got := cacheMisses(s, fresh); got != tc.want {
				t.Errorf("cacheMisses = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCacheTrust(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	c := newCacheTrust(start)
	if ok, wait := c.check("ns/a", "u1", start.Add(time.Second)); ok || wait != writeSettle-time.Second {
		t.Fatalf("just started: trusted %t, wait %s; want a wait until writes sent before the start are settled", ok, wait)
	}
	if ok, wait := c.check("ns/a", "u1", start.Add(writeSettle)); ok || wait != 0 {
		t.Fatalf("settled: trusted %t, wait %s; want a consistent read now", ok, wait)
	}
	c.confirm("ns/a", "u1")
	if ok, _ := c.check("ns/a", "u1", start.Add(writeSettle)); !ok {
		t.Fatal("confirmed: not trusted")
	}
	if ok, _ := c.check("ns/a", "u2", start.Add(writeSettle)); ok {
		t.Fatal("a new PodSet of the same name is trusted")
	}
	at := start.Add(time.Minute)
	c.distrust("ns/a", at)
	if ok, wait := c.check("ns/a", "u1", at); ok || wait != writeSettle {
		t.Fatalf("after a write of unknown outcome: trusted %t, wait %s; want %s", ok, wait, writeSettle)
	}
	c.forget("ns/a")
	if ok, wait := c.check("ns/a", "u1", at); ok || wait != 0 {
		t.Fatalf("forgotten: trusted %t, wait %s; want a consistent read now", ok, wait)
	}
}
