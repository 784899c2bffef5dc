// Package command is the shell of the one-argument programs `make manifests`
// runs from hack/: the usage line, and an error on stderr under the
// program's name with a non-zero exit status, so that make stops.
package command

import (
	"fmt"
	"os"
)

// Main runs run with the program's one argument, described by arg in the
// usage line; it exits 2 on a wrong number of arguments and 1 when run fails.
func Main(name, arg string, run func(string) error) {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: %s %s\n", name, arg)
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
