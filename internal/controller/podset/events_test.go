package podset

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestPodEventBatch(t *testing.T) {
	ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	pods := func(n int) []*corev1.Pod {
		out := make([]*corev1.Pod, n)
		for i := range out {
			out[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%02d", i), Namespace: "shop"}}
		}
		return out
	}
	for _, tc := range []struct {
		pods int
		want []string
	}{
		{0, nil},
		{1, []string{"Normal SuccessfulCreate Created pod: web-00"}},
		{3, []string{"Normal SuccessfulCreate Created 3 pods: web-00, web-01, web-02"}},
		{12, []string{"Normal SuccessfulCreate Created 12 pods: web-00, web-01, web-02, web-03, web-04, web-05, web-06, web-07, web-08, web-09 and 2 more"}},
	} {
		rec := events.NewFakeRecorder(10)
		var b podEventBatch
		for _, p := range pods(tc.pods) {
			b.add(p)
		}
		b.emit(rec, ps, ReasonSuccessfulCreate, "Create", "Created", "")
		close(rec.Events)
		var got []string
		for e := range rec.Events {
			got = append(got, e)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%d pods: events %q, want %q", tc.pods, got, tc.want)
		}
	}
}
