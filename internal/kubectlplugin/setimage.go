package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func newSetCommand(o *options) *cobra.Command {
	set := &cobra.Command{
		Use:   "set",
		Short: "Change one field of a SidecarSet or PodSet",
	}
	set.AddCommand(newSetImageCommand(o))
	return set
}

func newSetImageCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "image (sidecarset|scs|sset|podset|pset) NAME CONTAINER=IMAGE...",
		Short: "Set the image of containers of a SidecarSet or of a PodSet's template",
		Long: `set image sets the image of each CONTAINER named: a SidecarSet's containers and init
containers, or those of a PodSet's spec.template. Each IMAGE must be a valid image reference
(name, optional tag, optional digest). The change is a JSON patch that replaces only those
image fields, each behind a test that the container at that index still has that name, so a
concurrent change to the container lists fails the patch instead of being overwritten.`,
		Example: "  kubectl deckhand set image sset log-agent log=registry.example/log:2\n" +
			"  kubectl deckhand set image pset web -n shop app=registry.example/app:1.4 init=registry.example/init:2",
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKind(args[0], kindSidecarSet, kindPodSet)
			if err != nil {
				return err
			}
			images, err := parseImages(args[2:])
			if err != nil {
				return err
			}
			c, ns, err := o.namespacedClient()
			if err != nil {
				return err
			}
			var obj client.Object
			var lists []containerList
			switch k {
			case kindSidecarSet:
				s := &deckhandv1alpha1.SidecarSet{}
				obj, lists = s, []containerList{
					{path: "/spec/containers", containers: func() []corev1.Container { return sidecarContainers(s.Spec.Containers) }},
					{path: "/spec/initContainers", containers: func() []corev1.Container { return sidecarContainers(s.Spec.InitContainers) }},
				}
			default:
				p := &deckhandv1alpha1.PodSet{}
				obj, lists = p, []containerList{
					{path: "/spec/template/spec/containers", containers: func() []corev1.Container { return p.Spec.Template.Spec.Containers }},
					{path: "/spec/template/spec/initContainers", containers: func() []corev1.Container { return p.Spec.Template.Spec.InitContainers }},
				}
			}
			if err := c.Get(cmd.Context(), k.key(ns, args[1]), obj); err != nil {
				return err
			}
			ops, changed, err := imagePatch(lists, images)
			if err != nil {
				return err
			}
			if len(changed) > 0 {
				body, err := json.Marshal(ops)
				if err != nil {
					return err
				}
				if err := c.Patch(cmd.Context(), obj, client.RawPatch(types.JSONPatchType, body)); err != nil {
					return err
				}
			}
			return printImageChanges(o.streams.Out, string(k)+"/"+args[1], images, changed)
		},
	}
}

// containerImage is one CONTAINER=IMAGE argument.
type containerImage struct{ container, image string }

// parseImages reads CONTAINER=IMAGE arguments, each image a valid
// reference, each container named once.
func parseImages(args []string) ([]containerImage, error) {
	var out []containerImage
	for _, a := range args {
		name, image, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: expected CONTAINER=IMAGE", a)
		}
		if _, err := reference.ParseNormalizedNamed(image); err != nil {
			return nil, fmt.Errorf("%s: %q is not a valid image reference: %w", name, image, err)
		}
		if slices.ContainsFunc(out, func(ci containerImage) bool { return ci.container == name }) {
			return nil, fmt.Errorf("container %s is named twice", name)
		}
		out = append(out, containerImage{container: name, image: image})
	}
	return out, nil
}

// containerList is one list of containers an object holds, at a JSON
// pointer path.
type containerList struct {
	path       string
	containers func() []corev1.Container
}

func sidecarContainers(scs []deckhandv1alpha1.SidecarContainer) []corev1.Container {
	out := make([]corev1.Container, len(scs))
	for i := range scs {
		out[i] = scs[i].Container
	}
	return out
}

// jsonPatchOp is an RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value string `json:"value"`
}

// imagePatch is the JSON patch that sets each image: for a container whose
// image differs, a test of its name at its index and a replace of its
// image. changed names the containers the patch changes. A container no
// list holds is an error that names the ones there are.
func imagePatch(lists []containerList, images []containerImage) (ops []jsonPatchOp, changed map[string]bool, err error) {
	changed = map[string]bool{}
	for _, ci := range images {
		found := false
		for _, l := range lists {
			for i, c := range l.containers() {
				if c.Name != ci.container {
					continue
				}
				found = true
				if c.Image != ci.image {
					at := fmt.Sprintf("%s/%d", l.path, i)
					ops = append(ops, jsonPatchOp{Op: "test", Path: at + "/name", Value: c.Name}, jsonPatchOp{Op: "replace", Path: at + "/image", Value: ci.image})
					changed[ci.container] = true
				}
			}
		}
		if !found {
			var names []string
			for _, l := range lists {
				for _, c := range l.containers() {
					names = append(names, c.Name)
				}
			}
			return nil, nil, fmt.Errorf("no container %s: the containers are %s", ci.container, strings.Join(names, ", "))
		}
	}
	return ops, changed, nil
}

func printImageChanges(out io.Writer, ref string, images []containerImage, changed map[string]bool) error {
	for _, ci := range images {
		what := "image set to"
		if !changed[ci.container] {
			what = "image already"
		}
		if _, err := fmt.Fprintf(out, "%s: container %s %s %s\n", ref, ci.container, what, ci.image); err != nil {
			return err
		}
	}
	return nil
}
