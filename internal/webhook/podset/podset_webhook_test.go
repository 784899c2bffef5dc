package podset

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func valid() *deckhandv1alpha1.PodSet {
	return &deckhandv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: deckhandv1alpha1.PodSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

func TestValidate(t *testing.T) {
	is := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	cases := map[string]struct {
		mut   func(ps *deckhandv1alpha1.PodSet)
		old   func(ps *deckhandv1alpha1.PodSet)
		field string // "" = valid
	}{
		"valid":          {},
		"no selector":    {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Selector = nil }, field: "spec.selector"},
		"empty selector": {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Selector = &metav1.LabelSelector{} }, field: "spec.selector"},
		"bad selector op": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}
		}, field: "spec.selector.matchExpressions[0].operator"},
		"selector mismatch": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}
		}, field: "spec.template.metadata.labels"},
		"negative replicas": {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](-1) }, field: "spec.replicas"},
		"restart policy":    {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Template.Spec.RestartPolicy = "OnFailure" }, field: "spec.template.spec.restartPolicy"},
		"active deadline":   {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) }, field: "spec.template.spec.activeDeadlineSeconds"},
		"no containers":     {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers = nil }, field: "spec.template.spec.containers"},
		"both zero": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxSurge = is(intstr.FromString("0%"))
			ps.Spec.UpdateStrategy.MaxUnavailable = is(intstr.FromInt32(0))
		}, field: "spec.updateStrategy.maxUnavailable"},
		"both zero, the other way round": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxSurge = is(intstr.FromInt32(0))
			ps.Spec.UpdateStrategy.MaxUnavailable = is(intstr.FromString("0%"))
		}, field: "spec.updateStrategy.maxUnavailable"},
		// 1% of 3 replicas rounds down to 0: the controller then allows 1
		// unavailable pod, as a Deployment does, so it is not refused.
		"percentages that round to zero are fine": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxSurge = is(intstr.FromString("0%"))
			ps.Spec.UpdateStrategy.MaxUnavailable = is(intstr.FromString("1%"))
		}},
		"zero surge only is fine": {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.MaxSurge = is(intstr.FromInt32(0)) }},
		"bad percent":             {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.MaxSurge = is(intstr.FromString("5 %")) }, field: "spec.updateStrategy.maxSurge"},
		"surge over 100% is fine": {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.MaxSurge = is(intstr.FromString("200%")) }},
		"unavailable over 100%": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.MaxUnavailable = is(intstr.FromString("101%"))
		}, field: "spec.updateStrategy.maxUnavailable"},
		"negative partition":  {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.Partition = ptr.To[int32](-2) }, field: "spec.updateStrategy.partition"},
		"unknown type":        {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.Type = "Blue" }, field: "spec.updateStrategy.type"},
		"unknown replacement": {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.PodReplacement = "Drain" }, field: "spec.updateStrategy.podReplacement"},
		"evict is fine":       {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.PodReplacement = "Evict" }},
		"unknown onFailure":   {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.OnFailure = "Retry" }, field: "spec.updateStrategy.onFailure"},
		"rollback is fine":    {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.UpdateStrategy.OnFailure = "Rollback" }},
		"zero deadline":       {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](0) }, field: "spec.progressDeadlineSeconds"},
		"deadline not above minReadySeconds": {mut: func(ps *deckhandv1alpha1.PodSet) {
			ps.Spec.MinReadySeconds = 30
			ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](30)
		}, field: "spec.progressDeadlineSeconds"},
		"negative history limit":     {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.RevisionHistoryLimit = ptr.To[int32](-1) }, field: "spec.revisionHistoryLimit"},
		"zero history limit is fine": {mut: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.RevisionHistoryLimit = ptr.To[int32](0) }},
		"selector changed": {
			old: func(ps *deckhandv1alpha1.PodSet) {
				ps.Spec.Selector.MatchLabels = map[string]string{"app": "web", "x": "y"}
				ps.Spec.Template.Labels["x"] = "y"
			},
			field: "spec.selector",
		},
		"replicas changed on update": {old: func(ps *deckhandv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](9) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := valid()
			if tc.mut != nil {
				tc.mut(ps)
			}
			var old *deckhandv1alpha1.PodSet
			if tc.old != nil {
				old = valid()
				tc.old(old)
			}
			errs := validate(old, ps)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.field) {
				t.Fatalf("errors %v do not name %s", errs.ToAggregate(), tc.field)
			}
		})
	}
}

func TestValidateBounds(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := map[string]struct {
		old, ps *deckhandv1alpha1.PodSet
		want    string // "" = valid
	}{
		"63-character name": {nil, sized(strings.Repeat("a", 63), 1), ""},
		"64-character name": {nil, sized(long, 1), "metadata.name: Invalid value: \"" + long + "\": must be usable as the value of the apps.deckhand.dev/podset label"},
		"at the ceiling":    {nil, sized("web", 10), ""},
		"above the ceiling": {nil, sized("web", 11), "spec.replicas: Invalid value: 11: must be at most 10 (the manager's --max-podset-replicas)"},
		"growing above it":  {sized("web", 10), sized("web", 12), "spec.replicas"},
		"shrinking above it, after the ceiling was lowered": {sized("web", 20), sized("web", 12), ""},
	}
	v := &Validator{MaxReplicas: 10}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := v.validateBounds(tc.old, tc.ps).ToAggregate()
			testutil.WantError(t, err, tc.want)
		})
	}
}

func sized(name string, replicas int32) *deckhandv1alpha1.PodSet {
	return &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: deckhandv1alpha1.PodSetSpec{Replicas: &replicas}}
}
