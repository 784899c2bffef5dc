// Package eviction evicts pods through the Eviction API, so that
// PodDisruptionBudgets are honoured, and remembers the evictions a
// controller asked for until its cache shows them done, with one expiry
// rule for every controller.
package eviction
