package kubectlplugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// newPauseCommand returns `pause` (pause true) or `resume` (pause false).
func newPauseCommand(o *options, pause bool) *cobra.Command {
	use, short := "resume", "Resume a SidecarSet's rollout, a PodSet or a RestartSchedule"
	if pause {
		use, short = "pause", "Pause a SidecarSet's rollout, a PodSet or a RestartSchedule"
	}
	return &cobra.Command{
		Use:   use + " KIND NAME",
		Short: short,
		Long: short + `.

  sidecarset (scs)       spec.updateStrategy.paused: the rollout of image changes
                         to running pods (injection into new pods goes on)
  podset (pset)          spec.paused
  restartschedule (rsched) spec.suspend: no run starts while suspended`,
		Example: "  kubectl deckhand " + use + " scs log-agent\n  kubectl deckhand " + use + " rsched nightly -n shop",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKind(args[0], kindSidecarSet, kindPodSet, kindRestartSchedule)
			if err != nil {
				return err
			}
			return o.setPaused(cmd.Context(), k, args[1], pause)
		},
	}
}

// pauseTarget is where a kind keeps its pause switch.
type pauseTarget struct {
	obj    client.Object
	paused func() bool
	// path is the switch's field, from the object's root.
	path []string
	// verb is what setting the switch is called ("resumed" for clearing it).
	verb string
}

func pauseTargetOf(k kind) pauseTarget {
	switch k {
	case kindSidecarSet:
		s := &deckhandv1alpha1.SidecarSet{}
		return pauseTarget{obj: s, paused: func() bool { return s.Spec.UpdateStrategy.Paused }, path: []string{"spec", "updateStrategy", "paused"}, verb: "paused"}
	case kindPodSet:
		p := &deckhandv1alpha1.PodSet{}
		return pauseTarget{obj: p, paused: func() bool { return p.Spec.Paused }, path: []string{"spec", "paused"}, verb: "paused"}
	default:
		r := &deckhandv1alpha1.RestartSchedule{}
		return pauseTarget{obj: r, paused: func() bool { return r.Spec.Suspend }, path: []string{"spec", "suspend"}, verb: "suspended"}
	}
}

// setPaused sets the pause switch of the object and says what changed.
func (o *options) setPaused(ctx context.Context, k kind, name string, pause bool) error {
	c, ns, err := o.namespacedClient()
	if err != nil {
		return err
	}
	t := pauseTargetOf(k)
	if err := c.Get(ctx, k.key(ns, name), t.obj); err != nil {
		return err
	}
	verb := "resumed"
	if pause {
		verb = t.verb
	}
	if t.paused() == pause {
		_, err := fmt.Fprintf(o.streams.Out, "%s/%s already %s\n", k, name, verb)
		return err
	}
	if err := setField(ctx, c, t.obj, t.path, pause); err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s/%s %s\n", k, name, verb)
	return err
}
