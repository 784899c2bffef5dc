package sidecarcontrol

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func recordAnnotations(injected, hash, withoutImage string) map[string]string {
	return map[string]string{
		deckhandv1alpha1.SidecarSetInjectedAnnotation:         injected,
		deckhandv1alpha1.SidecarSetHashAnnotation:             hash,
		deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation: withoutImage,
	}
}

// TestPodRecordRoundTrip: what Set records renders in the annotation format
// pods already carry, and reads back the same.
func TestPodRecordRoundTrip(t *testing.T) {
	var r PodRecord
	r.Set("b", "2", "20", []string{"x"})
	r.Set("a", "1", "10", []string{"y", "z"})
	injected, hash, without := r.Values()
	if want := "a,b"; injected != want {
		t.Errorf("injected = %q, want %q", injected, want)
	}
	if want := `{"a":{"hash":"1","containers":["y","z"]},"b":{"hash":"2","containers":["x"]}}`; hash != want {
		t.Errorf("hash = %s, want %s", hash, want)
	}
	if want := `{"a":{"hash":"10"},"b":{"hash":"20"}}`; without != want {
		t.Errorf("hash without image = %s, want %s", without, want)
	}
	got := ReadPodRecord(recordAnnotations(injected, hash, without))
	if !reflect.DeepEqual(got.Names(), []string{"a", "b"}) {
		t.Errorf("names = %v", got.Names())
	}
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "": false} {
		if got.Has(name) != want || got.HasRevision(name) != want {
			t.Errorf("Has(%q) = %v, HasRevision = %v; want %v", name, got.Has(name), got.HasRevision(name), want)
		}
	}
	if h, w := got.Revisions("a"); h != "1" || w != "10" {
		t.Errorf("revisions of a = %q, %q", h, w)
	}
	if c := got.Containers("a"); !reflect.DeepEqual(c, []string{"y", "z"}) {
		t.Errorf("containers of a = %v", c)
	}
	pod := &corev1.Pod{}
	got.Apply(pod)
	if !reflect.DeepEqual(pod.Annotations, recordAnnotations(injected, hash, without)) {
		t.Errorf("applied annotations = %v", pod.Annotations)
	}
}

// TestPodRecordReadsExistingPods: values written by earlier versions parse.
func TestPodRecordReadsExistingPods(t *testing.T) {
	r := ReadPodRecord(recordAnnotations("logging,mesh",
		`{"logging":{"hash":"6b86b273ff34fce1","containers":["log"]},"mesh":{"hash":"d4735e3a265e16ee"}}`,
		`{"logging":{"hash":"4e07408562bedb8b"},"mesh":{"hash":"ef2d127de37b942b"}}`))
	if h, w := r.Revisions("logging"); h != "6b86b273ff34fce1" || w != "4e07408562bedb8b" {
		t.Errorf("logging revisions = %q, %q", h, w)
	}
	if h, _ := r.Revisions("mesh"); h != "d4735e3a265e16ee" || r.Containers("mesh") != nil || !r.Has("mesh") {
		t.Errorf("mesh = %q %v %v", h, r.Containers("mesh"), r.Has("mesh"))
	}
}

// TestPodRecordQuotesAsJSON: the values are JSON whatever the names hold
// (Go quoting would write \x01, which JSON does not have).
func TestPodRecordQuotesAsJSON(t *testing.T) {
	var r PodRecord
	name := "a\x01\"é\u2028"
	r.Set(name, "h\x7f", "w\\", []string{"c\x00"})
	got := ReadPodRecord(recordAnnotations(r.Values()))
	if h, w := got.Revisions(name); h != "h\x7f" || w != "w\\" || !reflect.DeepEqual(got.Containers(name), []string{"c\x00"}) {
		t.Errorf("read back %q %q %v from %v", h, w, got.Containers(name), got)
	}
}

// TestPodRecordSetCopies: records read from the same text share the parsed
// maps; Set on one must not show in the other.
func TestPodRecordSetCopies(t *testing.T) {
	var w PodRecord
	w.Set("a", "1", "10", nil)
	ann := recordAnnotations(w.Values())
	r := ReadPodRecord(ann)
	r.Set("a", "2", "20", nil)
	r.Set("b", "3", "30", nil)
	if h, _ := ReadPodRecord(ann).Revisions("a"); h != "1" || ReadPodRecord(ann).HasRevision("b") {
		t.Errorf("Set changed another pod's record: a at %q", h)
	}
	if h, _ := r.Revisions("a"); h != "2" || !r.Has("b") {
		t.Errorf("Set did not record: a at %q, names %v", h, r.Names())
	}
}

// TestPodRecordMalformed: malformed values read as empty, and the memo of
// parsed values stays bounded.
func TestPodRecordMalformed(t *testing.T) {
	for _, ann := range []map[string]string{
		recordAnnotations("", `{"a":`, `[]`),
		recordAnnotations("", `"a"`, `{"a":1}`),
		nil,
	} {
		if h, w := ReadPodRecord(ann).Revisions("a"); h != "" || w != "" {
			t.Errorf("revisions from %v = %q, %q", ann, h, w)
		}
	}
	for i := range 3 * recordMemoSize {
		ReadPodRecord(map[string]string{deckhandv1alpha1.SidecarSetHashAnnotation: fmt.Sprintf(`{"n":{"hash":"%d"}}`, i)})
	}
	parsedRecords.mu.Lock()
	size := len(parsedRecords.m)
	parsedRecords.mu.Unlock()
	if size > recordMemoSize {
		t.Errorf("memo holds %d entries, bound is %d", size, recordMemoSize)
	}
}
