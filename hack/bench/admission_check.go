package main

// Every measured pod of the admission item is checked after its run for the
// injection its variant stands for. A pod webhook configured to ignore
// failures (Deckhand's is) admits the pod unchanged when the webhook errs or
// times out: without the check, a webhook that silently failed open would
// look as fast as no webhook at all.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// benchMatchSidecarSet is the Deckhand SidecarSet whose selector matches the
// admission item's pods.
const benchMatchSidecarSet = "bench-match"

// injection is what a variant leaves in each pod it admits.
type injection struct {
	sidecar  bool // exactly one sidecarContainer (none when false)
	deckhand bool // Deckhand's injection record naming benchMatchSidecarSet alone
	kruise   bool // Kruise's hash annotation naming kruiseBenchSidecarSet
}

// expectedInjection: the pod webhook, the policy and Kruise each inject
// the sidecar and their own record; the minimal webhook adds the sidecar
// alone; in *admPre* the client sent the sidecar itself.
func expectedInjection(v admVariant) injection {
	switch v {
	case admNone, admNull:
		return injection{}
	case admPre, admNullInj:
		return injection{sidecar: true}
	case admOne, admHundred, admPolicy:
		return injection{sidecar: true, deckhand: true}
	case admKruise:
		return injection{sidecar: true, kruise: true}
	}
	panic("unknown admission variant " + string(v))
}

// injectionMismatch says how pod p differs from what variant v injects, or
// "" when it does not.
func injectionMismatch(v admVariant, p *corev1.Pod) string {
	want := expectedInjection(v)
	var problems []string
	sidecars := 0
	for _, c := range p.Spec.Containers {
		if c.Name == sidecarContainer().Name {
			sidecars++
		}
	}
	if wantN := map[bool]int{true: 1}[want.sidecar]; sidecars != wantN {
		problems = append(problems, fmt.Sprintf("%d %s containers, want %d", sidecars, sidecarContainer().Name, wantN))
	}
	names := sidecarcontrol.ReadPodRecord(p.Annotations).Names()
	switch {
	case want.deckhand && !slices.Equal(names, []string{benchMatchSidecarSet}):
		problems = append(problems, fmt.Sprintf("Deckhand's injection record names %v, want [%s]", names, benchMatchSidecarSet))
	case !want.deckhand && len(names) > 0:
		problems = append(problems, fmt.Sprintf("Deckhand's injection record names %v, want none", names))
	}
	if got := kruiseInjected(p); got != want.kruise {
		problems = append(problems, fmt.Sprintf("Kruise's %s annotation names %s: %v, want %v", kruiseSidecarSetHash, kruiseBenchSidecarSet, got, want.kruise))
	}
	return strings.Join(problems, "; ")
}

// kruiseInjected reports whether Kruise's hash annotation records
// kruiseBenchSidecarSet: a JSON object keyed by SidecarSet name.
func kruiseInjected(p *corev1.Pod) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(p.Annotations[kruiseSidecarSetHash]), &m); err != nil {
		return false
	}
	_, ok := m[kruiseBenchSidecarSet]
	return ok
}

// checkInjection lists the pods of a run (namespace ns, n created) and
// counts those not injected as v injects; a pod missing from the list counts
// too. first is the first mismatch found, for the error.
func checkInjection(ctx context.Context, e *env, ns string, v admVariant, n int) (checked, mismatched int, first string, err error) {
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, "", err
	}
	for i := range pods.Items {
		if m := injectionMismatch(v, &pods.Items[i]); m != "" {
			mismatched++
			if first == "" {
				first = pods.Items[i].Name + ": " + m
			}
		}
	}
	if missing := n - len(pods.Items); missing != 0 {
		mismatched += max(missing, -missing)
		if first == "" {
			first = fmt.Sprintf("%d pods listed, %d created", len(pods.Items), n)
		}
	}
	return max(n, len(pods.Items)), mismatched, first, nil
}
