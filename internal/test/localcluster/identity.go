package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
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
// least-privilege roles the manager has in a real installation. The roles of
// policy injection (config/components/policy-injection, which the default
// install leaves out) are applied too: the tests and `make run` run
// SidecarSets in Policy mode. Calling it again re-applies the roles and
// returns the first credentials.
func (c *Cluster) InstallManagerIdentity(ctx context.Context, root string) (*ManagerIdentity, error) {
	c.identityMu.Lock()
	defer c.identityMu.Unlock()
	out, err := c.renderDefault(ctx, root, "../components/policy-injection")
	if err != nil {
		return nil, err
	}
	err = c.applyKinds(ctx, out, identityKinds)
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

// admissionPolicyKinds are the objects of config/default that confine what
// the manager's ServiceAccount may write (config/admission-policy).
var admissionPolicyKinds = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// InstallAdmissionPolicy applies the ValidatingAdmissionPolicy and binding
// of config/default that confine the writes of the manager's ServiceAccount,
// as a real installation has them. The API server enforces a new policy
// once its informer has it: callers wait for a write it refuses.
func (c *Cluster) InstallAdmissionPolicy(ctx context.Context, root string) error {
	out, err := c.renderDefault(ctx, root)
	if err != nil {
		return err
	}
	return c.applyKinds(ctx, out, admissionPolicyKinds)
}

// renderDefault renders config/default of the repository at root, with the
// optional components (paths relative to config/default) turned on.
func (c *Cluster) renderDefault(ctx context.Context, root string, components ...string) ([]byte, error) {
	dir := filepath.Join(root, "config", "default")
	if len(components) > 0 {
		// An overlay cannot add a component to config/default's own list
		// (its namePrefix and namespace would not reach it): render a copy
		// of config/ whose config/default lists them.
		tmp, err := os.MkdirTemp(c.dir, "config-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := os.CopyFS(filepath.Join(tmp, "config"), os.DirFS(filepath.Join(root, "config"))); err != nil {
			return nil, err
		}
		dir = filepath.Join(tmp, "config", "default")
		k := filepath.Join(dir, "kustomization.yaml")
		data, err := os.ReadFile(k)
		if err != nil {
			return nil, err
		}
		const list = "\ncomponents:\n"
		if !strings.Contains(string(data), list) {
			return nil, fmt.Errorf("config/default/kustomization.yaml has no components list")
		}
		add := list
		for _, comp := range components {
			add += "- " + comp + "\n"
		}
		if err := os.WriteFile(k, []byte(strings.Replace(string(data), list, add, 1)), 0o644); err != nil {
			return nil, err
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(c.opts.BinDir, "kubectl"), "kustomize", dir).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, exitErr.Stderr)
		}
		return nil, fmt.Errorf("kubectl kustomize config/default: %w", err)
	}
	return out, nil
}

// applyKinds server-side applies the objects of rendered whose kind is in kinds.
func (c *Cluster) applyKinds(ctx context.Context, rendered []byte, kinds map[string]bool) error {
	a, err := newApplier(c.Config, "deckhand-localcluster")
	if err != nil {
		return err
	}
	return eachObject(rendered, func(obj *unstructured.Unstructured) error {
		if !kinds[obj.GetKind()] {
			return nil
		}
		return a.applyObject(ctx, obj)
	})
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
//
// A refusal by Deckhand's own ValidatingAdmissionPolicy
// (config/admission-policy) counts too: it says the manager wrote something
// its code is not meant to write.
func IsForbidden(line string) bool {
	if strings.Contains(line, "ValidatingAdmissionPolicy 'deckhand-manager-writes'") {
		return true
	}
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
