// Command devcluster is `make run`: it starts a local control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok with one
// fake node), installs Deckhand's CRDs and webhooks, runs the deckhand
// manager in the foreground and applies the samples once it is ready.
// Ctrl-C stops everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

func main() {
	var (
		deckhand = flag.String("deckhand", "bin/deckhand", "The deckhand manager binary.")
		k8sBin   = flag.String("k8s-bin", localcluster.DefaultBinDir(), "Directory of the control-plane binaries.")
		dir      = flag.String("dir", ".dev", "Working directory; the admin kubeconfig is written to <dir>/kubeconfig.")
		samples  = flag.String("samples", "config/samples", "Directory of sample objects applied once Deckhand is ready (empty: none).")
		nodes    = flag.Int("nodes", 1, "Number of kwok fake nodes.")
	)
	flag.Parse()
	if err := run(*deckhand, *k8sBin, *dir, *samples, *nodes); err != nil {
		fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
		os.Exit(1)
	}
}

func run(deckhandBin, k8sBin, dir, samples string, nodes int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	clusterDir := filepath.Join(dir, "cluster")
	// Every run starts from an empty etcd: a previous run's objects would
	// refer to ports and certificates that no longer exist.
	if err := os.RemoveAll(clusterDir); err != nil {
		return err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}

	opts := localcluster.Full(nodes)
	opts.BinDir = k8sBin
	opts.Dir = clusterDir
	opts.Progress = os.Stdout
	// Resource metrics (kubectl top pods) and Prometheus' GPU memory of the
	// pods, simulated from their annotations (localcluster/metrics.go).
	opts.Metrics = true
	started := time.Now()
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println(">> stopping the local cluster")
		cluster.Stop()
		fmt.Println(">> stopped; no process left behind")
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := copyFile(cluster.KubeconfigPath, kubeconfig); err != nil {
		return err
	}
	// Prometheus listens on a free port: a query trigger written in a
	// terminal reads the address from here (docs/restartschedule.md).
	if err := os.WriteFile(filepath.Join(dir, "prometheus-url"), []byte(cluster.PrometheusURL+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Printf(">> control plane ready in %s\n", time.Since(started).Round(100*time.Millisecond))

	fmt.Println(">> installing CRDs")
	if err := localcluster.InstallCRDs(cluster.Config, filepath.Join(root, "config", "crd", "bases")); err != nil {
		return err
	}
	// WebServers attach to Gateways through HTTPRoutes; no Gateway
	// controller runs here, so routes are made but never accepted.
	fmt.Println(">> installing the Gateway API's Gateway and HTTPRoute CRDs")
	if err := localcluster.InstallGatewayAPI(cluster.Config, root); err != nil {
		return err
	}
	certDir := filepath.Join(dir, "webhook-certs")
	ca, err := localcluster.LocalWebhookCerts(certDir)
	if err != nil {
		return err
	}
	port, err := localcluster.FreePort()
	if err != nil {
		return err
	}
	hooks := localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		CABundle:     ca,
	}
	fmt.Println(">> installing webhook configurations (calling https://127.0.0.1:" + strconv.Itoa(port) + ")")
	if err := hooks.Install(ctx, cluster.Clientset()); err != nil {
		return err
	}

	// The manager runs as it would in a real installation: as its
	// ServiceAccount, with the least-privilege roles of config/default.
	id, err := cluster.InstallManagerIdentity(ctx, root)
	if err != nil {
		return err
	}
	// ... and under the admission policy a real installation puts on that
	// ServiceAccount (docs/security.md), so a write it refuses shows here.
	if err := cluster.InstallAdmissionPolicy(ctx, root); err != nil {
		return err
	}
	fmt.Printf(">> starting deckhand as %s (logs follow)\n", id.User)
	mgr, err := cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary:      deckhandBin,
		Kubeconfig:  id.Kubeconfig,
		WebhookPort: port,
		CertDir:     certDir,
		Stdout:      os.Stdout,
		// The walkthrough of docs/sidecarset.md shows spec.patchPodMetadata
		// with a key this allows, and the refusal of one it does not, and
		// Policy mode (the identity has the policy-injection role).
		Args: []string{"--leader-elect=false", "--zap-devel", "--sidecarset-pod-metadata-allowlist=example.com/*", "--sidecarset-policy-injection"},
	})
	if err != nil {
		return err
	}
	defer mgr.Stop()

	if samples != "" {
		if _, err := os.Stat(samples); err == nil {
			fmt.Println(">> applying samples from " + samples)
			if err := localcluster.ApplyManifests(ctx, cluster.Config, deckhandv1alpha1.FieldManager+"-samples", samples); err != nil {
				fmt.Fprintf(os.Stderr, ">> applying samples failed: %v\n", err)
			}
		}
	}

	kubectl := filepath.Join(k8sBin, "kubectl")
	fmt.Printf(`
================================================================================
 Deckhand is running against a local cluster (Ctrl-C stops everything).

   export KUBECONFIG=%s
   alias kubectl=%s

   kubectl get nodes
   kubectl get sidecarsets,podsets,webservers,restartschedules -A
   kubectl get pods -A
   kubectl top pods -A

 metrics-server (metrics.k8s.io):              %s
 Prometheus (%s of the pods): %s (also in %s)

 Component logs: %s/*.log
================================================================================
`, kubeconfig, kubectl, cluster.MetricsServerURL, localcluster.DCGMFramebufferUsedMetric, cluster.PrometheusURL, filepath.Join(dir, "prometheus-url"), clusterDir)

	select {
	case <-ctx.Done():
		fmt.Println("\n>> interrupted")
	case <-mgr.Done():
		return fmt.Errorf("deckhand exited")
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
