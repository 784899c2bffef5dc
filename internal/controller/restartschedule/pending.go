package restartschedule

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// maxListedPending is how many waiting workloads of a run status.pending
// lists. A selector may match any number of workloads; listed whole, a run
// of a few thousand would pass the size etcd allows an object (1.5 MiB) and
// no status could be written any more. The rest of the run is a count and
// a cursor (pendingCount, pendingAfter), listed as the first ones start.
const maxListedPending = 100

// maxMessage bounds every message a RestartSchedule writes: history
// entries, conditions, Events (whose note the API server refuses past
// 1 KiB).
const maxMessage = 1024

// truncateMessage cuts msg to maxMessage bytes, on a character boundary,
// saying that it did.
func truncateMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	const more = " [...]"
	cut := maxMessage - len(more)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + more
}

// unlistedOf is how many waiting workloads of the current run status.pending
// does not list.
func unlistedOf(st *deckhandv1alpha1.RestartScheduleStatus) int {
	if st.PendingAfter == "" {
		return 0
	}
	return max(0, int(st.PendingCount)-len(st.Pending))
}

// listPending keeps at most maxListedPending workloads in status.pending:
// a status written by an earlier version lists a run whole. The list is in
// kind then name order, so the rest is what follows the last one kept.
func listPending(s *scope) {
	st := &s.rs.Status
	if len(st.Pending) <= maxListedPending {
		return
	}
	rest := len(st.Pending) - maxListedPending
	st.Pending = st.Pending[:maxListedPending:maxListedPending]
	last := st.Pending[maxListedPending-1]
	st.PendingAfter = workloadKey(last.Kind, last.Name)
	s.unlisted += rest
}

// queue makes targets (sorted by kind then name) the waiting workloads of
// a new run, each a copy of run with its kind and name: the first
// maxListedPending in status.pending, the rest after the cursor.
func queue(s *scope, targets []deckhandv1alpha1.RestartWorkloadReference, run deckhandv1alpha1.RestartPending) {
	st := &s.rs.Status
	n := min(len(targets), maxListedPending)
	for _, t := range targets[:n] {
		p := run
		p.Kind, p.Name = t.Kind, t.Name
		st.Pending = append(st.Pending, p)
	}
	s.unlisted, st.PendingAfter = len(targets)-n, ""
	if s.unlisted > 0 {
		st.PendingAfter = workloadKey(targets[n-1].Kind, targets[n-1].Name)
	}
}

// refillPending lists in status.pending the next waiting workloads of the
// run whose workloads are copies of run: those spec.target selects now
// after the cursor. A workload created, deleted or relabelled since the run
// started is counted, or not, when its turn comes.
func (r *Reconciler) refillPending(ctx context.Context, s *scope, run deckhandv1alpha1.RestartPending) error {
	st := &s.rs.Status
	if s.unlisted == 0 || st.PendingAfter == "" || len(st.Pending) >= maxListedPending {
		return nil
	}
	targets, err := listTargets(ctx, r.Client, s.rs)
	if err != nil {
		return fmt.Errorf("listing the workloads of spec.target: %w", err)
	}
	kind, name, _ := strings.Cut(st.PendingAfter, "/")
	rest := targets[sort.Search(len(targets), func(i int) bool {
		t := targets[i]
		return t.Kind > kind || (t.Kind == kind && t.Name > name)
	}):]
	n := min(len(rest), maxListedPending-len(st.Pending))
	for _, t := range rest[:n] {
		p := run
		p.Kind, p.Name = t.Kind, t.Name
		st.Pending = append(st.Pending, p)
	}
	s.unlisted = len(rest) - n
	switch {
	case s.unlisted == 0:
		st.PendingAfter = ""
	case n > 0:
		st.PendingAfter = workloadKey(rest[n-1].Kind, rest[n-1].Name)
	}
	return nil
}

// dropUnlisted ends the part of the current run status.pending does not
// list, recording it as one history entry with result and message (the
// run's time and trigger those of run), and returns how many workloads it
// held.
func dropUnlisted(s *scope, run deckhandv1alpha1.RestartPending, result deckhandv1alpha1.RestartResult, message string) int {
	n := s.unlisted
	s.unlisted, s.rs.Status.PendingAfter = 0, ""
	if n > 0 {
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: run.ScheduledTime, Trigger: run.Trigger, Result: result,
			Message: fmt.Sprintf("%d more workload(s) of the run, not listed in status.pending yet: %s", n, message)})
	}
	return n
}

// countPending writes pendingCount; the cursor goes with the last unlisted
// workload.
func countPending(s *scope) {
	st := &s.rs.Status
	if s.unlisted == 0 {
		st.PendingAfter = ""
	}
	st.PendingCount = int32(len(st.Pending) + s.unlisted)
}

// describeWorkloads names at most ten workloads and counts the others, for
// a message that must stay short.
func describeWorkloads(keys []string, more int) string {
	const named = 10
	if len(keys) > named {
		more += len(keys) - named
		keys = keys[:named]
	}
	out := strings.Join(keys, ", ")
	if more > 0 {
		if out != "" {
			out += " "
		}
		out += fmt.Sprintf("and %d more", more)
	}
	return out
}
