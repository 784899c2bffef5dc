// Package podutil holds small predicates about pods and their containers
// that more than one controller needs, so that every kind answers the same
// question the same way.
package podutil
