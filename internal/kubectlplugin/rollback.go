package kubectlplugin

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func newRollbackCommand(o *options) *cobra.Command {
	var toRevision int64
	cmd := &cobra.Command{
		Use:   "rollback podset NAME [--to-revision N]",
		Short: "Roll a PodSet back to its previous template or to a revision",
		Long: `rollback sets the ` + deckhandv1alpha1.PodSetRollbackToAnnotation + ` annotation on the PodSet to "previous"
or to the revision number given; the PodSet controller copies that revision's template into
spec.template, removes the annotation and records a RolledBack Event. The revisions are the
PodSet's ControllerRevisions:

  kubectl get controllerrevisions -l ` + deckhandv1alpha1.PodSetNameLabel + `=NAME`,
		Example: "  kubectl deckhand rollback podset web -n shop\n  kubectl deckhand rollback pset web --to-revision 3",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := parseKind(args[0], kindPodSet); err != nil {
				return err
			}
			if toRevision < 0 {
				return fmt.Errorf("--to-revision must be 1 or more, or 0 for the previous revision")
			}
			c, ns, err := o.namespacedClient()
			if err != nil {
				return err
			}
			target := "previous"
			if toRevision > 0 {
				target = strconv.FormatInt(toRevision, 10)
			}
			path := []string{"metadata", "annotations", deckhandv1alpha1.PodSetRollbackToAnnotation}
			if err := getAndSetField(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[1]}, &deckhandv1alpha1.PodSet{}, path, target); err != nil {
				return err
			}
			what := "the previous revision"
			if toRevision > 0 {
				what = "revision " + target
			}
			_, err = fmt.Fprintf(o.streams.Out, "podset/%s rollback to %s requested\n", args[1], what)
			return err
		},
	}
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "the revision to roll back to (the .revision of a ControllerRevision of the PodSet); 0 means the previous one")
	return cmd
}
