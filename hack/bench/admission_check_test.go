package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestInjectionMismatch(t *testing.T) {
	plain := func() *corev1.Pod { return benchPod("ns", "p", false) }
	sidecar := func() *corev1.Pod { return benchPod("ns", "p", true) }
	deckhand := func(names string) *corev1.Pod {
		p := sidecar()
		p.Annotations = map[string]string{deckhandv1alpha1.SidecarSetInjectedAnnotation: names}
		return p
	}
	kruise := func(hash string) *corev1.Pod {
		p := sidecar()
		p.Annotations = map[string]string{kruiseSidecarSetHash: hash}
		return p
	}
	twice := func() *corev1.Pod {
		p := sidecar()
		p.Spec.Containers = append(p.Spec.Containers, sidecarContainer())
		return p
	}
	kruiseHash := `{"` + kruiseBenchSidecarSet + `":{"hash":"abc","sidecarSetName":"` + kruiseBenchSidecarSet + `"}}`
	for name, tc := range map[string]struct {
		v    admVariant
		pod  *corev1.Pod
		want string // a part of the mismatch, "" for none
	}{
		"no webhook, plain pod":                        {admNone, plain(), ""},
		"no webhook, a sidecar appeared":               {admNone, sidecar(), "1 log-agent containers, want 0"},
		"null webhook, Deckhand injected":              {admNull, deckhand(benchMatchSidecarSet), "want none"},
		"sidecar sent by the client":                   {admPre, sidecar(), ""},
		"minimal webhook injected":                     {admNullInj, sidecar(), ""},
		"minimal webhook failed open":                  {admNullInj, plain(), "0 log-agent containers, want 1"},
		"Deckhand injected":                            {admOne, deckhand(benchMatchSidecarSet), ""},
		"Deckhand failed open":                         {admOne, plain(), "0 log-agent containers, want 1"},
		"sidecar without Deckhand's record":            {admHundred, sidecar(), "record names [], want [bench-match]"},
		"Deckhand's record names another SidecarSet":   {admHundred, deckhand("bench-other-01"), "want [bench-match]"},
		"Deckhand's record names two":                  {admHundred, deckhand(benchMatchSidecarSet + ",bench-other-01"), "want [bench-match]"},
		"policy injected":                              {admPolicy, deckhand(benchMatchSidecarSet), ""},
		"sidecar injected twice":                       {admPolicy, func() *corev1.Pod { p := twice(); p.Annotations = deckhand(benchMatchSidecarSet).Annotations; return p }(), "2 log-agent containers"},
		"Kruise injected":                              {admKruise, kruise(kruiseHash), ""},
		"Kruise's annotation missing":                  {admKruise, sidecar(), "kruise.io/sidecarset-hash"},
		"Kruise's annotation names another SidecarSet": {admKruise, kruise(`{"other":{}}`), "kruise.io/sidecarset-hash"},
		"Kruise injected in Deckhand's run": {admOne, func() *corev1.Pod {
			p := deckhand(benchMatchSidecarSet)
			p.Annotations[kruiseSidecarSetHash] = kruiseHash
			return p
		}(), "want false"},
		"Deckhand injected in Kruise's run": {admKruise, func() *corev1.Pod {
			p := kruise(kruiseHash)
			p.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation] = benchMatchSidecarSet
			return p
		}(), "Deckhand's injection record names [bench-match], want none"},
	} {
		got := injectionMismatch(tc.v, tc.pod)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: mismatch %q, want none", name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: mismatch %q, want one saying %q", name, got, tc.want)
		}
	}
}
