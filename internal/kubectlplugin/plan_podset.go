package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
)

// planPodSet previews what applying the PodSet manifest data would do:
// the spec of the manifest in place of the PodSet's (defaulted as the
// admission webhook would), over the pods it controls.
func planPodSet(ctx context.Context, o *options, c client.Client, po planOptions, data []byte) error {
	next, err := decodeStrict[deckhandv1alpha1.PodSet](po.file, data)
	if err != nil {
		return err
	}
	ns := next.Namespace
	if ns == "" {
		if ns, err = o.namespace(); err != nil {
			return err
		}
	}
	proposed := next.DeepCopy()
	proposed.Namespace = ns
	current := &deckhandv1alpha1.PodSet{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: next.Name}, current); {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return err
	default:
		proposed = current.DeepCopy()
		proposed.Spec = next.Spec
	}
	if err := (podsetwebhook.Defaulter{}).Default(ctx, proposed); err != nil {
		return err
	}
	in := podset.PreviewInput{PodSet: proposed, Now: time.Now()}
	if current != nil {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range pods.Items {
			if ref := metav1.GetControllerOfNoCopy(&pods.Items[i]); ref != nil && ref.UID == current.UID {
				in.Pods = append(in.Pods, &pods.Items[i])
			}
		}
	}
	preview := podset.Preview(in)
	if po.output == "json" {
		enc := json.NewEncoder(o.streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(preview)
	}
	return printPodSetPlan(o.streams.Out, ns+"/"+next.Name, current, preview)
}

func printPodSetPlan(out io.Writer, name string, current *deckhandv1alpha1.PodSet, p podset.RolloutPreview) error {
	from := "does not exist yet"
	if current != nil {
		from = "now at revision " + current.Status.UpdateRevision
		if current.Status.UpdateRevision == p.Revision {
			from += ", unchanged"
		}
	}
	fmt.Fprintf(out, "PodSet %s: revision %s (%s); maxSurge %d, maxUnavailable %d, partition %d; %d step(s)\n",
		name, p.Revision, from, p.MaxSurge, p.MaxUnavailable, p.Partition, p.Steps)
	if p.Held != "" {
		fmt.Fprintf(out, "Held: %s\n", p.Held)
	}
	for i, n := range p.Creates {
		if n > 0 {
			fmt.Fprintf(out, "Step %d creates %d pod(s) of the new template\n", i+1, n)
		}
	}
	rows := make([]string, 0, len(p.Pods))
	for _, pod := range p.Pods {
		step := "-"
		if pod.Step > 0 {
			step = strconv.Itoa(pod.Step)
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s", step, pod.Name, pod.Action, pod.Why))
	}
	return printTable(out, "The PodSet has no pods yet.", "STEP\tPOD\tACTION\tWHY", rows)
}
