// Command rbacsplit moves roles out of the file controller-gen generates
// (config/rbac/role.yaml) into the files of the installation parts that
// grant them, so that a mode's permissions are installed only with the mode:
//
//	rbacsplit config/rbac/role.yaml manager-certs-role=config/components/self-managed-certs/role.yaml
//
// Every Role and ClusterRole named on the left of an argument goes to the
// file on its right (several to one file keep their order); the rest stay.
// A named role that controller-gen did not generate is an error, so that a
// renamed marker cannot silently drop a permission.
package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

var separator = regexp.MustCompile(`(?m)^---\n`)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rbacsplit:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: rbacsplit ROLE_FILE NAME=FILE [NAME=FILE]")
	}
	src := args[0]
	dest := map[string]string{}
	var order []string
	for _, a := range args[1:] {
		name, file, ok := strings.Cut(a, "=")
		if !ok || name == "" || file == "" {
			return fmt.Errorf("argument %q: want NAME=FILE", a)
		}
		dest[name] = file
		order = append(order, file)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	out := map[string]*strings.Builder{src: {}}
	for _, f := range order {
		out[f] = &strings.Builder{}
	}
	seen := map[string]bool{}
	for _, doc := range separator.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		to := src
		if f, ok := dest[obj.Metadata.Name]; ok {
			to, seen[obj.Metadata.Name] = f, true
		}
		out[to].WriteString("---\n" + doc)
	}
	for name := range dest {
		if !seen[name] {
			return fmt.Errorf("%s holds no role %s (is a +kubebuilder:rbac marker's roleName changed?)", src, name)
		}
	}
	for f, b := range out {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
