// Package shutdown stops the manager in two steps on SIGTERM: the replica
// first leaves its Service (readiness fails, webhook answers close their
// connections) while it keeps serving, and stops only after a drain period,
// once no endpoint list routes to it any more.
package shutdown
