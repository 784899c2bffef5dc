package localcluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// APIServerOutage stops kube-apiserver as RestartAPIServer does, calls
// whileDown while it is down, keeps it down for at least down in all, then
// starts it again with the same flags and port and waits until it is ready.
// While the API server is down nothing can change the cluster's stored
// state, so whileDown sees (through etcd, EtcdCount) exactly what existed
// at the moment it stopped.
func (c *Cluster) APIServerOutage(ctx context.Context, down time.Duration, whileDown func(ctx context.Context) error) error {
	p, spec, err := c.running("kube-apiserver")
	if err != nil {
		return err
	}
	p.stop(10 * time.Second)
	stopped := time.Now()
	var downErr error
	if whileDown != nil {
		downErr = whileDown(ctx)
	}
	if rest := down - time.Since(stopped); rest > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(rest):
		}
	}
	if err := c.startComponent("kube-apiserver", "kube-apiserver", spec.args); err != nil {
		return errors.Join(downErr, err)
	}
	return errors.Join(downErr, c.WaitAPIServerReady(ctx, 90*time.Second))
}

// running returns the component name's process and how it was started.
func (c *Cluster) running(name string) (*process, procSpec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[name]
	if !ok || p == nil {
		return nil, procSpec{}, fmt.Errorf("%s is not running", name)
	}
	return p, c.specs[name], nil
}

// EtcdCount counts the keys stored under prefix in the cluster's etcd
// ("/registry/pods/<namespace>/" for the pods of a namespace), through
// etcd's JSON gateway: it answers when kube-apiserver does not.
func (c *Cluster) EtcdCount(ctx context.Context, prefix string) (int, error) {
	_, spec, err := c.running("kube-apiserver")
	if err != nil {
		return 0, err
	}
	args := spec.args
	var etcdURL string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--etcd-servers" {
			etcdURL = args[i+1]
		}
	}
	if etcdURL == "" {
		return 0, errors.New("kube-apiserver has no --etcd-servers")
	}
	// The range [prefix, prefix+1) holds every key that starts with prefix.
	end := []byte(prefix)
	end[len(end)-1]++
	body, err := json.Marshal(map[string]any{
		"key":        base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end":  base64.StdEncoding.EncodeToString(end),
		"count_only": true,
	})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcdURL+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("etcd range %q: %s", prefix, resp.Status)
	}
	// The gateway writes int64 fields as strings; an empty range omits count.
	var out struct {
		Count string `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	if out.Count == "" {
		return 0, nil
	}
	return strconv.Atoi(out.Count)
}

// StopMetricsServer stops metrics-server, as a crash or an upgrade of it
// would. The APIService v1beta1.metrics.k8s.io stays registered, so the
// API server answers a request for metrics.k8s.io with an error, as a real
// cluster's does while its metrics-server is down.
func (c *Cluster) StopMetricsServer() error {
	p, _, err := c.running("metrics-server")
	if err != nil {
		return err
	}
	p.stop(10 * time.Second)
	return nil
}

// StartMetricsServer starts metrics-server again after StopMetricsServer,
// with the same flags and port, and waits until the API server reports its
// APIService Available. Its first PodMetrics come after two scrapes
// (MetricsServerResolution apart): it keeps no samples across a restart.
func (c *Cluster) StartMetricsServer(ctx context.Context) error {
	p, spec, err := c.running("metrics-server")
	if err != nil {
		return err
	}
	if done, _ := p.exited(); !done {
		return errors.New("metrics-server is running")
	}
	if err := c.startComponent("metrics-server", "metrics-server", spec.args); err != nil {
		return err
	}
	return c.waitAPIServiceAvailable(ctx, "v1beta1.metrics.k8s.io", 90*time.Second)
}
