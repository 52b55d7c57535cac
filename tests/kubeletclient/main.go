// kubeletclient drives a podstatus node's kubelet API with client-go v0.37.2's own stream
// clients, the code kubectl runs: the WebSocket remote command executor (v5.channel.k8s.io)
// and the SPDY-over-WebSocket port-forward dialer (SPDY/3.1+portforward.k8s.io).
//
//	kubeletclient exec URL CERT KEY          stdin/stdout/stderr of the command; exits with its code
//	kubeletclient portforward URL CERT KEY   forwards 127.0.0.1:<any> to port 80; prints the local port
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: kubeletclient exec|portforward URL CERT KEY")
		os.Exit(2)
	}
	target, err := url.Parse(os.Args[2])
	if err != nil {
		fail(err)
	}
	config := &rest.Config{
		Host:            "https://" + target.Host,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true, CertFile: os.Args[3], KeyFile: os.Args[4]},
	}
	switch os.Args[1] {
	case "exec":
		executor, err := remotecommand.NewWebSocketExecutor(config, "GET", target.String())
		if err != nil {
			fail(err)
		}
		err = executor.StreamWithContext(context.Background(), remotecommand.StreamOptions{
			Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		})
		var exitErr exec.CodeExitError
		if errors.As(err, &exitErr) {
			os.Exit(exitErr.Code)
		}
		if err != nil {
			fail(err)
		}
	case "portforward":
		dialer, err := portforward.NewSPDYOverWebsocketDialer(target, config)
		if err != nil {
			fail(err)
		}
		stop, ready := make(chan struct{}), make(chan struct{})
		forwarder, err := portforward.New(dialer, []string{"0:80"}, stop, ready, io.Discard, os.Stderr)
		if err != nil {
			fail(err)
		}
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin) // runs until stdin closes
			close(stop)
		}()
		go func() {
			<-ready
			ports, err := forwarder.GetPorts()
			if err != nil {
				fail(err)
			}
			fmt.Printf("%d\n", ports[0].Local)
		}()
		if err := forwarder.ForwardPorts(); err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("unknown mode %q", os.Args[1]))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kubeletclient:", err)
	os.Exit(1)
}
