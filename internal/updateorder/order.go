package updateorder

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Order is a compiled priority and scatter strategy. The zero value (and
// nil) leaves the order of the pods as it is.
type Order struct {
	weights []weightTerm
	keys    []string
	scatter []deckhandv1alpha1.UpdateScatterTerm
}

type weightTerm struct {
	selector labels.Selector
	weight   int64
}

// Compile parses the strategies once per rollout pass, so that sorting
// does not parse a selector per pod.
func Compile(pri *deckhandv1alpha1.UpdatePriorityStrategy, scatter []deckhandv1alpha1.UpdateScatterTerm) (*Order, error) {
	o := &Order{scatter: scatter}
	if pri != nil {
		for i := range pri.WeightPriority {
			t := &pri.WeightPriority[i]
			sel, err := metav1.LabelSelectorAsSelector(&t.MatchSelector)
			if err != nil {
				return nil, fmt.Errorf("weightPriority[%d].matchSelector: %w", i, err)
			}
			o.weights = append(o.weights, weightTerm{selector: sel, weight: int64(t.Weight)})
		}
		for _, t := range pri.OrderPriority {
			o.keys = append(o.keys, t.OrderedKey)
		}
	}
	return o, nil
}

// Empty reports whether the order changes nothing.
func (o *Order) Empty() bool {
	return o == nil || len(o.weights) == 0 && len(o.keys) == 0 && len(o.scatter) == 0
}

// priority ranks a pod: a lower level first, then a higher value first.
// Weights are all on level 0 with the sum as value; order keys put a pod
// on the level of the first key it carries (pods with none of them on the
// last level) with its value's trailing integer as value.
type priority struct {
	level int
	value int64
}

func (a priority) before(b priority) bool {
	if a.level != b.level {
		return a.level < b.level
	}
	return a.value > b.value
}

func (o *Order) priority(l map[string]string) priority {
	if len(o.weights) > 0 {
		var sum int64
		for _, w := range o.weights {
			if w.selector.Matches(labels.Set(l)) {
				sum += w.weight
			}
		}
		return priority{value: sum}
	}
	for i, k := range o.keys {
		if v, ok := l[k]; ok {
			return priority{level: i, value: trailingInt(v)}
		}
	}
	return priority{level: len(o.keys)}
}

// trailingInt is the integer a label value ends in ("wave-12" is 12), 0 if
// none or if it does not fit an int64.
func trailingInt(v string) int64 {
	i := len(v)
	for i > 0 && v[i-1] >= '0' && v[i-1] <= '9' {
		i--
	}
	n, err := strconv.ParseInt(v[i:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Sort reorders items, which come in the caller's default order, by
// priority (stable: items of equal priority keep the default order), then
// scatters each run of equal priority. labelsOf returns an item's labels.
func Sort[T any](o *Order, items []T, labelsOf func(T) map[string]string) {
	if o.Empty() || len(items) < 2 {
		return
	}
	prio := make([]priority, len(items))
	idx := make([]int, len(items))
	for i := range items {
		prio[i] = o.priority(labelsOf(items[i]))
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return prio[idx[a]].before(prio[idx[b]]) })
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && prio[idx[end]] == prio[idx[start]] {
			end++
		}
		o.scatterRun(idx[start:end], func(i int) map[string]string { return labelsOf(items[i]) })
		start = end
	}
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
}

// scatterRun spreads run (indexes of items of one priority) so that no
// scatter group's pods are updated one after another while others wait.
// Each pod belongs to the group of the first term it matches (terms in
// spec order, a "*" term expanded into its values in sorted order), or to
// the group of pods matching none; the k-th of a group of n pods is placed
// at (k+0.5)/n along the run, ties kept in the run's order. Every group is
// so spread evenly over the whole run, and the order within a group stays.
func (o *Order) scatterRun(run []int, labelsOf func(int) map[string]string) {
	if len(o.scatter) == 0 || len(run) < 2 {
		return
	}
	type group struct{ key, value string }
	var terms []group
	seen := map[group]bool{}
	add := func(g group) {
		if !seen[g] {
			seen[g] = true
			terms = append(terms, g)
		}
	}
	for _, t := range o.scatter {
		if t.Value != "*" {
			add(group{t.Key, t.Value})
			continue
		}
		var values []string
		for _, i := range run {
			if v, ok := labelsOf(i)[t.Key]; ok {
				values = append(values, v)
			}
		}
		slices.Sort(values)
		for _, v := range slices.Compact(values) {
			add(group{t.Key, v})
		}
	}
	groupOf := make([]int, len(run)) // index into terms; len(terms) for none
	size := make([]int, len(terms)+1)
	for n, i := range run {
		l := labelsOf(i)
		g := len(terms)
		for ti, t := range terms {
			if v, ok := l[t.key]; ok && v == t.value {
				g = ti
				break
			}
		}
		groupOf[n] = g
		size[g]++
	}
	// pos[n] is the fraction (2k+1)/(2*size): compared by cross-multiplying,
	// so that equal fractions tie exactly.
	num := make([]int, len(run))
	nth := make([]int, len(terms)+1)
	for n := range run {
		g := groupOf[n]
		num[n] = 2*nth[g] + 1
		nth[g]++
	}
	order := make([]int, len(run))
	for n := range order {
		order[n] = n
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := order[a], order[b]
		return num[x]*size[groupOf[y]] < num[y]*size[groupOf[x]]
	})
	spread := make([]int, len(run))
	for n, o := range order {
		spread[n] = run[o]
	}
	copy(run, spread)
}
