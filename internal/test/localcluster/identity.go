package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The manager's identity as config/default installs it.
const (
	ManagerNamespace      = "deckhand-system"
	ManagerServiceAccount = "deckhand-controller-manager"
)

// identityKinds are the objects of config/default that make up the
// manager's identity and permissions.
var identityKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
}

// ManagerIdentity is the manager's ServiceAccount, bound to the roles that
// config/default generates, installed in a cluster.
type ManagerIdentity struct {
	// Config authenticates as the ServiceAccount (a TokenRequest token).
	Config *rest.Config
	// Kubeconfig is a file with the same credentials.
	Kubeconfig string
	// User is the ServiceAccount's user name.
	User string
}

// InstallManagerIdentity renders config/default of the repository at root
// with kubectl's kustomize, applies its Namespace, ServiceAccount and RBAC
// objects, and returns credentials of that ServiceAccount: the identity and
// least-privilege roles the manager has in a real installation. Calling it
// again re-applies the roles and returns the first credentials.
func (c *Cluster) InstallManagerIdentity(ctx context.Context, root string) (*ManagerIdentity, error) {
	c.identityMu.Lock()
	defer c.identityMu.Unlock()
	out, err := exec.CommandContext(ctx, filepath.Join(c.opts.BinDir, "kubectl"), "kustomize", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, exitErr.Stderr)
		}
		return nil, fmt.Errorf("kubectl kustomize config/default: %w", err)
	}
	a, err := newApplier(c.Config, "deckhand-localcluster")
	if err != nil {
		return nil, err
	}
	err = eachObject(out, func(obj *unstructured.Unstructured) error {
		if !identityKinds[obj.GetKind()] {
			return nil
		}
		return a.applyObject(ctx, obj)
	})
	if err != nil {
		return nil, err
	}
	if c.identity != nil {
		return c.identity, nil
	}

	path := filepath.Join(c.dir, "deckhand-sa.kubeconfig")
	// Long enough for any `make run` session.
	user, err := c.WriteServiceAccountKubeconfig(ctx, path, ManagerNamespace, ManagerServiceAccount, 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	c.identity = &ManagerIdentity{Config: cfg, Kubeconfig: path, User: user}
	return c.identity, nil
}

// ManagerRefusals returns the lines of every log of a manager started by
// StartDeckhand that record an API request refused for lack of permission,
// oldest manager first.
func (c *Cluster) ManagerRefusals() []string {
	c.mu.Lock()
	managers := append([]*DeckhandProcess(nil), c.managers...)
	c.mu.Unlock()
	var out []string
	for _, d := range managers {
		out = append(out, ForbiddenLines(d.Logs(1<<30))...)
	}
	return out
}

// IsForbidden reports whether a log line (or an API error's text) records
// an API request the API server refused for lack of permission: an
// authorization denial (`User "..." cannot create resource ...`) or the
// owner-reference admission's (`cannot set blockOwnerDeletion ...`, `cannot
// set an ownerRef ...`). Admission answers 403 for other reasons too (an
// exceeded ResourceQuota, Pod Security, a namespace being deleted); those
// describe the request or the namespace, not a missing permission, and
// never say "cannot".
func IsForbidden(line string) bool {
	// NOTE: "cannot set blockOwnerDeletion ... because cannot find
	// RESTMapping" is the OwnerReferencesPermissionEnforcement plugin of an
	// API server that has not yet rediscovered the owner's CRD (just after a
	// restart), not a missing permission; the missing permission reads
	// "cannot set blockOwnerDeletion if an ownerReference refers to a
	// resource you can't set finalizers on" and still counts.
	return (strings.Contains(line, "forbidden") || strings.Contains(line, "Forbidden")) &&
		strings.Contains(line, " cannot ") && !strings.Contains(line, "cannot find RESTMapping")
}

// ForbiddenLines are the lines of log that record a refused API request.
func ForbiddenLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if IsForbidden(l) {
			out = append(out, l)
		}
	}
	return out
}
