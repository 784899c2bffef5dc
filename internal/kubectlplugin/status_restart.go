package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// restartStatusHistory is how many of the newest history entries status
// prints (kubectl deckhand history prints them all).
const restartStatusHistory = 5

// restartScheduleStatus prints a RestartSchedule's schedule, the pods its
// triggers name and what holds each back, its newest runs and conditions.
func restartScheduleStatus(ctx context.Context, c client.Client, out io.Writer, ns, name string, now time.Time) error {
	rs := &deckhandv1alpha1.RestartSchedule{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rs); err != nil {
		return err
	}
	st := &rs.Status
	w := printers.GetNewTabWriter(out)
	fmt.Fprintf(w, "RestartSchedule:\t%s/%s\n", rs.Namespace, rs.Name)
	fmt.Fprintf(w, "Schedule:\t%s\n", orDash(rs.Spec.Schedule))
	fmt.Fprintf(w, "Suspended:\t%s\n", yesNo(rs.Spec.Suspend))
	fmt.Fprintf(w, "Next run:\t%s\n", timeOrDash(st.NextRunTime, now))
	fmt.Fprintf(w, "Last run:\t%s\n", timeOrDash(st.LastScheduleTime, now))
	fmt.Fprintf(w, "Triggers:\t%d, naming %d pod(s)\n", len(rs.Spec.Triggers), st.CandidateCount)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nCandidates:")
	rows := make([]string, 0, len(st.Candidates))
	for _, cd := range st.Candidates {
		since := "-"
		if cd.Since != nil {
			since = cd.Since.UTC().Format(time.RFC3339)
		}
		held := cd.HeldBy
		if held == "" {
			held = "being replaced"
		}
		rows = append(rows, fmt.Sprintf("  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", cd.Pod, cd.Workload, cd.Trigger, orDash(cd.Container),
			orDash(cd.Value), orDash(cd.Limit), since, prediction(cd, now), held))
	}
	if err := printTable(out, "  (none)", "  POD\tWORKLOAD\tTRIGGER\tCONTAINER\tVALUE\tLIMIT\tSINCE\tPREDICTED\tHELD BY", rows); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nNewest runs:")
	rows = rows[:0]
	for i, r := range st.History {
		if i == restartStatusHistory {
			break
		}
		target := r.Workload
		if r.Pod != "" {
			target += " pod " + r.Pod
		}
		rows = append(rows, fmt.Sprintf("  %s\t%s\t%s\t%s\t%s", r.ScheduledTime.UTC().Format(time.RFC3339), orDash(string(r.Trigger)),
			orDash(target), r.Result, orDash(r.Value)))
	}
	if err := printTable(out, "  (none)", "  TIME\tTRIGGER\tTARGET\tRESULT\tVALUE", rows); err != nil {
		return err
	}
	return printConditions(out, rs.Generation, st.ObservedGeneration, st.Conditions)
}

// prediction prints when a candidate's trend reaches its limit, "urgent"
// when that is within spec.urgency.predictedLimitWithin, or "-".
func prediction(cd deckhandv1alpha1.RestartCandidate, now time.Time) string {
	if cd.PredictedLimitAt == nil {
		return "-"
	}
	text := cd.PredictedLimit + " at " + timeOrDash(cd.PredictedLimitAt, now)
	if cd.Urgent {
		text += ", urgent"
	}
	return text
}

// timeOrDash prints t and how far it is from now, or "-".
func timeOrDash(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	if d >= 0 {
		return fmt.Sprintf("%s (in %s)", t.UTC().Format(time.RFC3339), d)
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), -d)
}
