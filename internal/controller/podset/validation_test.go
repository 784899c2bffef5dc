package podset_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestValidation creates invalid PodSets against the real API server (CRD
// schema, CEL rules and the webhook together) and checks that each is
// refused with a message naming the field.
func TestValidation(t *testing.T) {
	ns := env.Namespace(t)
	type mut = func(*deckhandv1alpha1.PodSet)
	cases := map[string]struct {
		mut   mut
		field string
	}{
		"selector missing": {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Selector = nil }, "spec.selector"},
		"selector empty": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Selector.MatchLabels = nil
		}, "spec.selector"},
		"selector does not match labels": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, "spec.template.metadata.labels"},
		"negative replicas":        {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas"},
		"negative minReadySeconds": {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.MinReadySeconds = -3 }, "spec.minReadySeconds"},
		"maxUnavailable and maxSurge both zero": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(0))
			ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromString("0%"))
		}, "spec.updateStrategy.maxUnavailable"},
		"maxUnavailable and maxSurge both 0": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(0))
			ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(0))
		}, "spec.updateStrategy.maxUnavailable"},
		"malformed percent": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromString("ten%"))
		}, "spec.updateStrategy.maxSurge"},
		"maxUnavailable over 100%": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("150%"))
		}, "spec.updateStrategy.maxUnavailable"},
		"negative maxSurge": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(-1))
		}, "spec.updateStrategy.maxSurge"},
		"unknown strategy":       {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.Type = "Sometimes" }, "spec.updateStrategy.type"},
		"negative partition":     {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.Partition = ptr.To[int32](-1) }, "spec.updateStrategy.partition"},
		"unknown podReplacement": {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.PodReplacement = "Drain" }, "spec.updateStrategy.podReplacement"},
		"progressDeadlineSeconds not above minReadySeconds": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.MinReadySeconds = 60
			ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
		}, "spec.progressDeadlineSeconds"},
		"zero progressDeadlineSeconds":  {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](0) }, "spec.progressDeadlineSeconds"},
		"negative revisionHistoryLimit": {func(ps *deckhandv1alpha1.PodSet) { ps.Spec.RevisionHistoryLimit = ptr.To[int32](-1) }, "spec.revisionHistoryLimit"},
		"restartPolicy Never": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}, "spec.template.spec.restartPolicy"},
		// The rest is judged by the API server's own pod validation, through
		// the webhook's server-side dry run.
		"container without image": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Template.Spec.Containers[0].Image = ""
		}, "spec.template.spec.containers[0].image"},
		"invalid container name": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Template.Spec.Containers[0].Name = "Not_A_DNS_Label"
		}, "spec.template.spec.containers[0].name"},
		"duplicate container port name": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{
				{Name: "http", ContainerPort: 80}, {Name: "http", ContainerPort: 81}}
		}, "spec.template.spec.containers[0].ports[1].name"},
		"invalid label value": {func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Template.Labels["bad"] = "-not valid-"
		}, "spec.template.metadata.labels"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := newPodSet(ns, "invalid", 1)
			tc.mut(ps)
			err := env.Client.Create(ctxT(t), ps)
			if err == nil {
				t.Fatalf("created an invalid PodSet; want an error naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}

	t.Run("valid PodSet accepted", func(t *testing.T) {
		ps := newPodSet(ns, "valid", 0)
		mustCreate(t, ps)
		if ps.Spec.UpdateStrategy.Type != deckhandv1alpha1.RollingUpdatePodSetStrategyType ||
			ps.Spec.UpdateStrategy.MaxSurge.String() != "25%" || !ptr.Deref(ps.Spec.UpdateStrategy.InPlaceIfPossible, false) ||
			ps.Spec.UpdateStrategy.PodReplacement != deckhandv1alpha1.DeletePodSetPodReplacement ||
			ptr.Deref(ps.Spec.ProgressDeadlineSeconds, 0) != 600 || ptr.Deref(ps.Spec.RevisionHistoryLimit, -1) != 10 {
			t.Fatalf("defaults not applied: %+v, progressDeadlineSeconds %v, revisionHistoryLimit %v",
				ps.Spec.UpdateStrategy, ps.Spec.ProgressDeadlineSeconds, ps.Spec.RevisionHistoryLimit)
		}
	})

	// Percentages that round to 0 of spec.replicas may both be 0 pods: the
	// controller then allows one unavailable pod, as a Deployment does.
	t.Run("percentages that round to zero accepted", func(t *testing.T) {
		ps := newPodSet(ns, "rounds-to-zero", 1, func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("25%"))
			ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromString("0%"))
		})
		mustCreate(t, ps)
	})

	t.Run("selector immutable", func(t *testing.T) {
		ps := newPodSet(ns, "immutable", 0)
		mustCreate(t, ps)
		err := tryMergePatch(t, ps, `{"spec":{"selector":{"matchLabels":{"tier":"test"}}}}`)
		if err == nil || !strings.Contains(err.Error(), "spec.selector") {
			t.Fatalf("changing the selector: err = %v, want an error naming spec.selector", err)
		}
	})
}
