package kubectlplugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// options are what every subcommand shares: the kubeconfig flags and the
// output streams.
type options struct {
	configFlags *genericclioptions.ConfigFlags
	streams     genericiooptions.IOStreams
}

// client returns a client for the cluster the kubeconfig flags name; its
// scheme knows the core types and Deckhand's.
func (o *options) client() (client.Client, error) {
	cfg, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	s, types := runtime.NewScheme(), runtime.NewSchemeBuilder(clientgoscheme.AddToScheme, deckhandv1alpha1.AddToScheme)
	if err := types.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// namespacedClient returns a client and the namespace to work in.
func (o *options) namespacedClient() (client.Client, string, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := o.client()
	return c, ns, err
}

// resourceClient returns a dynamic client of kind k's resource, limited to
// namespace ns when k is namespaced (ns "" is every namespace).
func (o *options) resourceClient(k kind, ns string) (dynamic.ResourceInterface, error) {
	cfg, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := dc.Resource(k.resource())
	if !k.namespaced() {
		return r, nil
	}
	return r.Namespace(ns), nil
}

// objectPrinter is the printer of -o format: json or yaml, as kubectl get
// prints them.
func objectPrinter(format string) (printers.ResourcePrinter, error) {
	p, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter(format)
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unknown output format %q: expected json or yaml", format)
	}
	return p, err
}

// printTable prints rows (cells separated by tabs) under header as aligned
// columns, or empty alone when there are no rows.
func printTable(out io.Writer, empty, header string, rows []string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, empty)
		return err
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, header)
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	return w.Flush()
}

// namespace is -n, else the kubeconfig context's namespace, else "default".
func (o *options) namespace() (string, error) {
	ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// NewRootCommand returns the kubectl-deckhand command with every
// subcommand, writing to streams.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{configFlags: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-deckhand",
		Short: "Inspect and operate Deckhand's SidecarSets, PodSets, WebServers and RestartSchedules",
		Long: `kubectl deckhand shows how Deckhand's rollouts are going and why a pod did or
did not get its sidecars, waits for a rollout to finish, sets images, and pauses,
resumes or triggers Deckhand's objects.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.configFlags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newStatusCommand(o),
		newListCommand(o),
		newSetCommand(o),
		newPauseCommand(o, true),
		newPauseCommand(o, false),
		newWhyCommand(o),
		newRestartNowCommand(o),
		newRollbackCommand(o),
		newHistoryCommand(o),
		newPlanCommand(o),
		newVersionCommand(o),
	)
	return root
}

// kind is a Deckhand kind as the commands name it on the command line.
type kind string

const (
	kindSidecarSet      kind = "sidecarset"
	kindPodSet          kind = "podset"
	kindWebServer       kind = "webserver"
	kindRestartSchedule kind = "restartschedule"
)

// allKinds are every Deckhand kind, in the order list prints them.
var allKinds = []kind{kindSidecarSet, kindPodSet, kindWebServer, kindRestartSchedule}

// resource is the kind's API resource.
func (k kind) resource() schema.GroupVersionResource {
	return deckhandv1alpha1.GroupVersion.WithResource(string(k) + "s")
}

// namespaced is false for SidecarSets, which are cluster-scoped.
func (k kind) namespaced() bool { return k != kindSidecarSet }

// key is the object key of NAME of kind k in namespace ns.
func (k kind) key(ns, name string) client.ObjectKey {
	if !k.namespaced() {
		ns = ""
	}
	return client.ObjectKey{Namespace: ns, Name: name}
}

// parseKind accepts a kind's singular, plural and short names, as kubectl
// does.
func parseKind(s string, allowed ...kind) (kind, error) {
	var k kind
	switch strings.ToLower(s) {
	case "sidecarset", "sidecarsets", "scs", "sset":
		k = kindSidecarSet
	case "podset", "podsets", "pset":
		k = kindPodSet
	case "webserver", "webservers", "ws", "web", "mws", "myweb":
		k = kindWebServer
	case "restartschedule", "restartschedules", "rsched":
		k = kindRestartSchedule
	}
	for _, a := range allowed {
		if k == a {
			return k, nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown kind %q: expected one of %s", s, strings.Join(names, ", "))
}
