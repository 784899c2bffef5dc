package localcluster

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// UnpullableRegistry is a registry host no image can be pulled from: on a
// fake node, a container whose image is on it ("deckhand.invalid/app:1")
// waits ErrImagePull, then ImagePullBackOff, and is never ready, at pod
// start as after an in-place image update. The .invalid top-level domain
// never resolves (RFC 2606), so a real node fails the same pull.
const UnpullableRegistry = "deckhand.invalid"

// UnpullableImage returns an image reference on UnpullableRegistry.
func UnpullableImage(repository string) string {
	return UnpullableRegistry + "/" + repository
}

// podStartStages are the Stage objects that start a pod on kwok's fake
// nodes in place of kwok's stock pod-ready stage: image IDs, failed pulls
// and readiness probes' initial delays; see the file for what they emulate.
//
//go:embed kwokstages/pod-start.yaml
var podStartStages []byte

// podContainerRestartStages are the Stage objects that make kwok's fake
// nodes restart a container whose image changed, as a kubelet does; see the
// file for what they emulate.
//
//go:embed kwokstages/pod-container-restart.yaml
var podContainerRestartStages []byte

// podReadinessStages are the Stage objects that make a container whose
// readiness probe has an initialDelaySeconds ready once it has passed.
//
//go:embed kwokstages/pod-readiness.yaml
var podReadinessStages []byte

// podResizeStages are the Stage objects that make kwok's fake nodes report
// container resources and complete in-place resizes, as a kubelet does;
// see the file for what they emulate.
//
//go:embed kwokstages/pod-resize.yaml
var podResizeStages []byte

// replacedStockStages are kwok's stock Stages that Deckhand's replace.
var replacedStockStages = map[string]bool{"pod-ready": true}

// writeKwokStages writes the Stage configuration kwok runs with into the
// cluster directory: kwok's own node and pod lifecycle (built into BinDir by
// hack/k8s/build.sh from the pinned kwok module) but its pod start, followed
// by Deckhand's pod start, in-place container restart, readiness and resize.
func (c *Cluster) writeKwokStages() (string, error) {
	stock, err := os.ReadFile(filepath.Join(c.opts.BinDir, "kwok-stages.yaml"))
	if err != nil {
		return "", fmt.Errorf("kwok stages: %w", err)
	}
	var data []byte
	replaced := 0
	err = EachDocument(stock, func(doc []byte) error {
		var stage struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &stage); err != nil {
			return err
		}
		if replacedStockStages[stage.Metadata.Name] {
			replaced++
			return nil
		}
		if stage.Metadata.Name == "" {
			return nil
		}
		data = append(append(data, "---\n"...), doc...)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("kwok stages: %w", err)
	}
	// Two stages starting the same pod would race each other.
	if replaced != len(replacedStockStages) {
		return "", fmt.Errorf("kwok stages: %d of the stock stages %v found in %s", replaced, replacedStockStages, c.opts.BinDir)
	}
	for _, own := range [][]byte{podStartStages, podContainerRestartStages, podReadinessStages, podResizeStages} {
		data = append(append(append(data, "\n---\n"...), own...), '\n')
	}
	if c.opts.Metrics {
		data = append(append(append(data, "\n---\n"...), kwokMetricsConfig(!c.opts.ResourceMetricsOnly)...), '\n')
	}
	path := filepath.Join(c.dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, data, 0o600)
}

func (c *Cluster) startKwok(ctx context.Context) error {
	stages, err := c.writeKwokStages()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", c.KubeconfigPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", FakeNodeAnnotation + "=fake",
		"--cidr", "10.244.0.1/16",
		"--node-lease-duration-seconds", "40",
		"--config", stages,
		"--v", "WARN",
	}
	if c.opts.Metrics {
		server, err := c.kwokServerArgs()
		if err != nil {
			return err
		}
		args = append(args, server...)
	} else {
		args = append(args, "--node-ip", "10.0.0.1", "--server-address", "")
	}
	c.progress("starting kwok with %d fake node(s)", c.opts.FakeNodes)
	if err := c.startComponent("kwok", "kwok", args); err != nil {
		return err
	}
	for i := range c.opts.FakeNodes {
		if err := c.CreateFakeNode(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive("kwok"); err != nil {
			return false, err
		}
		nodes, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= c.opts.FakeNodes, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes did not become Ready: %w", err)
	}
	return nil
}

// FakeNodeResizeRoom is what a fake node has left for a pod's in-place
// resize: half its allocatable, the other half taken as used by other pods.
// A resize that makes a pod's requests (its containers' and native
// sidecars') exceed it comes back PodResizePending with reason Deferred, as
// from a kubelet without room for it (kwokstages/pod-resize.yaml, which
// holds the same figures).
var FakeNodeResizeRoom = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("500"),
	corev1.ResourceMemory: resource.MustParse("2Ti"),
}

// StaticCPUManagerNodePrefix starts the name of a fake node that plays a
// kubelet with the static CPU manager policy: a resize that changes the CPU
// of a Guaranteed pod on it comes back PodResizePending with reason
// Infeasible, as the kubelet (v1.36) reports it
// (kwokstages/pod-resize.yaml). Create one with CreateFakeNode.
const StaticCPUManagerNodePrefix = "kwok-static-cpu-"

// CreateFakeNode registers a node that kwok manages: large enough for any
// test, with no taints, so ordinary pods schedule on it.
func (c *Cluster) CreateFakeNode(ctx context.Context, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   resource.MustParse("20000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{FakeNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if c.opts.Metrics {
		node.Annotations[ResourceMetricsPathAnnotation] = ResourceMetricsPath(name)
	}
	_, err := c.clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
