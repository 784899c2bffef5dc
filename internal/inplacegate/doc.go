// Package inplacegate is the readiness gate that takes a pod out of its
// Services' endpoints before an in-place update restarts its containers,
// and puts it back once they are ready again.
package inplacegate
