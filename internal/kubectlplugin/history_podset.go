package kubectlplugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// podSetRevision is one revision of a PodSet as history prints it.
type podSetRevision struct {
	// Revision is the ControllerRevision's number, what rollback
	// --to-revision takes.
	Revision int64 `json:"revision"`
	// Hash is the revision as the pods' apps.deckhand.dev/podset-revision
	// label carries it.
	Hash    string      `json:"hash"`
	Name    string      `json:"controllerRevision"`
	Created metav1.Time `json:"created"`
	// Images are CONTAINER=IMAGE for every init container and container of
	// the revision's template.
	Images []string `json:"images"`
	// Role is "update", "current", "update, current" or empty.
	Role string `json:"role,omitempty"`
}

// podSetHistory lists the revisions of the PodSet ns/name: the
// ControllerRevisions it controls, oldest first.
func podSetHistory(ctx context.Context, c client.Client, ns, name string) ([]podSetRevision, error) {
	ps := &deckhandv1alpha1.PodSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ps); err != nil {
		return nil, err
	}
	var list appsv1.ControllerRevisionList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{deckhandv1alpha1.PodSetNameLabel: name}); err != nil {
		return nil, err
	}
	revs := []podSetRevision{}
	for i := range list.Items {
		cr := &list.Items[i]
		if !metav1.IsControlledBy(cr, ps) {
			continue
		}
		// A ControllerRevision holds the template in the shape of its
		// PodSet: {"spec":{"template":...}}.
		var data deckhandv1alpha1.PodSet
		if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
			return nil, fmt.Errorf("ControllerRevision %s: %w", cr.Name, err)
		}
		hash := cr.Labels[deckhandv1alpha1.PodSetRevisionLabel]
		var role []string
		if hash == ps.Status.UpdateRevision {
			role = append(role, "update")
		}
		if hash == ps.Status.CurrentRevision {
			role = append(role, "current")
		}
		revs = append(revs, podSetRevision{Revision: cr.Revision, Hash: hash, Name: cr.Name, Created: cr.CreationTimestamp,
			Images: templateImages(&data.Spec.Template.Spec), Role: strings.Join(role, ", ")})
	}
	slices.SortFunc(revs, func(a, b podSetRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return revs, nil
}

func templateImages(spec *corev1.PodSpec) []string {
	var out []string
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		out = append(out, c.Name+"="+c.Image)
	}
	return out
}

func printPodSetHistory(out io.Writer, format string, revs []podSetRevision) error {
	if format != "" {
		return printData(out, format, revs)
	}
	rows := make([]string, len(revs))
	for i, r := range revs {
		rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%s", r.Revision, timestamp(&r.Created), r.Hash, strings.Join(r.Images, ", "), orDash(r.Role))
	}
	return printTable(out, "No revisions recorded.", "REVISION\tCREATED\tHASH\tIMAGES\tROLE", rows)
}
