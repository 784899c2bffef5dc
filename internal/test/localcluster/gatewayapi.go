package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// gatewayAPICRDs are the Gateway API CRDs a WebServer's HTTPRoute needs:
// the route itself and the Gateway it attaches to.
var gatewayAPICRDs = []string{"gateway.networking.k8s.io_gateways.yaml", "gateway.networking.k8s.io_httproutes.yaml"}

// InstallGatewayAPI installs the Gateway API's Gateway and HTTPRoute CRDs
// (the standard channel) from the sigs.k8s.io/gateway-api module the main
// module requires, as a cluster with the Gateway API has them. No Gateway
// controller runs: a test plays its part where it needs one.
func InstallGatewayAPI(cfg *rest.Config, root string) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("finding the sigs.k8s.io/gateway-api module: %w: %s", err, stderr.String())
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	dir, err := os.MkdirTemp("", "gateway-api-crds-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, name := range gatewayAPICRDs {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return InstallCRDs(cfg, dir)
}
