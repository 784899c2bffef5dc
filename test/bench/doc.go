// Package bench holds Deckhand's Go micro-benchmarks: the pod injection
// handler against controller-runtime's own defaulter on the same pod. They
// are run by `make bench` (through hack/bench), never by `make test`: the
// package has no tests, only benchmarks.
package bench
