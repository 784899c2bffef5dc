package main

// The order of the runs: every item that compares variants runs them
// interleaved, so that a drift of the machine's load falls on each alike.

import (
	"slices"
	"strings"
)

// interleaved is the order of round i: kinds as given in even rounds,
// reversed in odd ones (A B, B A, A B, ...), so that a drift of the
// machine's load during the benchmark falls on every kind alike.
func interleaved[T any](kinds []T, i int) []T {
	out := append([]T(nil), kinds...)
	if i%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// runOrder is every run of rounds rounds of variants, interleaved:
// A B, B A, A B, ...
func runOrder[T any](variants []T, rounds int) []T {
	var order []T
	for i := range rounds {
		order = append(order, interleaved(variants, i)...)
	}
	return order
}

// joinOrder prints an order of runs, e.g. "A → B → B → A".
func joinOrder[T ~string](order []T) string {
	names := make([]string, len(order))
	for i, v := range order {
		names[i] = string(v)
	}
	return strings.Join(names, " → ")
}
