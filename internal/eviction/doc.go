// Package eviction remembers the evictions a controller asked for until its
// cache shows them done, with one expiry rule for every controller.
package eviction
