// Command clientgo drives podstatus's embedded API server with client-go v0.37.2 and its
// clientset's defaults (protobuf request bodies for built-in types).
//
//	clientgo run KUBECONFIG   the scenario; exits non-zero with a message on the first failure
//	clientgo wire             protobuf and JSON encodings of sample objects, as client-go makes them
//	clientgo schema           the protobuf wire schema of the decoded types (see schema.go)
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clientgo run KUBECONFIG | wire | schema")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "run":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: clientgo run KUBECONFIG")
			os.Exit(2)
		}
		os.Exit(cmdRun(os.Args[2]))
	case "wire":
		os.Exit(cmdWire())
	case "schema":
		os.Exit(cmdSchema())
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
