package updateorder

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// pod is a test item: a name and labels written "k=v,k2=v2".
type pod struct {
	name   string
	labels map[string]string
}

func pods(specs ...string) []pod {
	out := make([]pod, 0, len(specs))
	for _, s := range specs {
		name, ls, _ := strings.Cut(s, ":")
		p := pod{name: name, labels: map[string]string{}}
		for _, kv := range strings.Split(ls, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				p.labels[k] = v
			}
		}
		out = append(out, p)
	}
	return out
}

func names(ps []pod) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.name
	}
	return strings.Join(out, " ")
}

func weight(w int32, k, v string) deckhandv1alpha1.UpdatePriorityWeightTerm {
	return deckhandv1alpha1.UpdatePriorityWeightTerm{Weight: w, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}
}

func TestSort(t *testing.T) {
	cases := map[string]struct {
		pri     *deckhandv1alpha1.UpdatePriorityStrategy
		scatter []deckhandv1alpha1.UpdateScatterTerm
		in      []pod
		want    string
	}{
		"no strategy keeps the default order": {
			in:   pods("a:tier=db", "b:tier=web", "c:"),
			want: "a b c",
		},
		"weights: higher sum first, unmatched last, ties keep the default order": {
			pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{
				weight(10, "tier", "web"), weight(50, "tier", "db"), weight(45, "canary", "true"),
			}},
			in:   pods("a:", "b:tier=web", "c:tier=db", "d:tier=web,canary=true", "e:tier=web", "f:tier=db"),
			want: "d c f b e a",
		},
		"weight 0 counts as unmatched": {
			pri:  &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{weight(0, "tier", "db")}},
			in:   pods("a:", "b:tier=db"),
			want: "a b",
		},
		"matchExpressions select too": {
			pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{
				Weight: 5, MatchSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}}},
			}}},
			in:   pods("a:zone=a", "b:zone=b"),
			want: "b a",
		},
		"order keys: first key's pods first, larger trailing integer first, keyless last": {
			pri:  &deckhandv1alpha1.UpdatePriorityStrategy{OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "wave"}, {OrderedKey: "batch"}}},
			in:   pods("a:", "b:batch=9", "c:wave=w-1", "d:wave=w-12", "e:wave=none", "f:batch=10,wave=w-2"),
			want: "d f c e b a",
		},
		"an order value without trailing digits or overflowing counts as 0": {
			pri:  &deckhandv1alpha1.UpdatePriorityStrategy{OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "n"}}},
			in:   pods("a:n=x", "b:n=99999999999999999999", "c:n=1"),
			want: "c a b",
		},
		"scatter one value: its pods spread through the others": {
			scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a"}},
			in:      pods("a1:zone=a", "a2:zone=a", "b1:zone=b", "b2:zone=b", "c1:zone=c", "c2:zone=c"),
			want:    "b1 a1 b2 c1 a2 c2",
		},
		"scatter star: each value spread, consecutive pods alternate": {
			scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "*"}},
			in:      pods("a1:zone=a", "a2:zone=a", "a3:zone=a", "b1:zone=b", "b2:zone=b", "b3:zone=b", "c1:zone=c"),
			want:    "a1 b1 a2 b2 c1 a3 b3",
		},
		"scatter keeps the order within a group and handles pods without the key": {
			scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "*"}},
			in:      pods("x1:", "x2:", "a1:zone=a", "a2:zone=a"),
			want:    "x1 a1 x2 a2",
		},
		"scatter applies within each priority level only": {
			pri:     &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{weight(1, "tier", "db")}},
			scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "*"}},
			in:      pods("w1:tier=web,zone=a", "w2:tier=web,zone=a", "w3:tier=web,zone=b", "d1:tier=db,zone=a", "d2:tier=db,zone=a", "d3:tier=db,zone=b", "d4:tier=db,zone=b"),
			want:    "d1 d3 d2 d4 w1 w3 w2",
		},
		"a pod matching two terms belongs to the first": {
			scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "rack", Value: "r1"}, {Key: "zone", Value: "a"}},
			in:      pods("p1:rack=r1,zone=a", "p2:rack=r1,zone=a", "p3:zone=a", "p4:zone=a", "p5:", "p6:"),
			want:    "p1 p3 p5 p2 p4 p6",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := Compile(tc.pri, tc.scatter)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Clone(tc.in)
			Sort(o, got, func(p pod) map[string]string { return p.labels })
			if names(got) != tc.want {
				t.Fatalf("order %q, want %q", names(got), tc.want)
			}
		})
	}
}

func TestCompileRefusesABadSelector(t *testing.T) {
	_, err := Compile(&deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{
		Weight: 1, MatchSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}},
	}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "weightPriority[0].matchSelector") {
		t.Fatalf("err = %v, want one naming weightPriority[0].matchSelector", err)
	}
}

func TestNilOrderIsEmpty(t *testing.T) {
	var o *Order
	in := pods("b:", "a:")
	Sort(o, in, func(p pod) map[string]string { return p.labels })
	if names(in) != "b a" {
		t.Fatal("a nil order reordered")
	}
}
