// Package rollout decides whether a Deployment, StatefulSet, DaemonSet or PodSet has
// finished rolling out, by the rules `kubectl rollout status` applies.
package rollout
