// Package install holds static checks of the installation manifests
// (dist/install.yaml, config/certmanager); see install_test.go.
package install
