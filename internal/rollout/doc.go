// Package rollout decides whether a Deployment, StatefulSet or DaemonSet has
// finished rolling out, by the rules `kubectl rollout status` applies.
package rollout
