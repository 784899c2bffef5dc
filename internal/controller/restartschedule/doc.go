// Package restartschedule runs RestartSchedules: it restarts Deployments,
// StatefulSets and DaemonSets at their scheduled times by patching one
// pod-template annotation, follows each rollout to completion and records
// every run; a second controller generates RestartSchedules for workloads
// annotated apps.deckhand.dev/restart-schedule.
package restartschedule
