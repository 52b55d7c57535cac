// Command podstatus-test-apiserver bundles a genuine etcd server, a genuine
// kube-apiserver, kube-controller-manager and kube-scheduler (all built from
// their upstream Go modules) into one binary for the podstatus test fixtures.
//
// Usage:
//
//	podstatus-test-apiserver etcd --data-dir DIR --listen-client-url URL --listen-peer-url URL
//	podstatus-test-apiserver kube-apiserver [kube-apiserver flags...]
//	podstatus-test-apiserver kube-controller-manager [flags...]
//	podstatus-test-apiserver kube-scheduler [flags...]
//	podstatus-test-apiserver version
//
// Each Kubernetes subcommand is the upstream command object run through cli.Run,
// exactly as the upstream main packages do; one process runs one component.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	_ "time/tzdata" // CronJob time zones, as the upstream controller-manager main imports

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream mains
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream mains
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream mains
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s etcd|kube-apiserver|kube-controller-manager|kube-scheduler|version [flags...]\n", os.Args[0])
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	sub := os.Args[1]
	// Make the subcommand see itself as argv[0] so cobra/flag help is sensible.
	os.Args = append([]string{sub}, os.Args[2:]...)
	switch sub {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "etcd":
		os.Exit(runEtcd())
	case "version":
		fmt.Println("k8s.io/kubernetes v1.37.2, go.etcd.io/etcd/server/v3 v3.7.0")
	default:
		usage()
	}
}

func runEtcd() int {
	fs := flag.NewFlagSet("etcd", flag.ExitOnError)
	dataDir := fs.String("data-dir", "", "etcd data directory (required)")
	clientURL := fs.String("listen-client-url", "http://127.0.0.1:2379", "client URL to listen on and advertise")
	peerURL := fs.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL to listen on and advertise")
	name := fs.String("name", "podstatus-test", "member name")
	logLevel := fs.String("log-level", "warn", "etcd log level (debug, info, warn, error)")
	startTimeout := fs.Duration("start-timeout", 60*time.Second, "how long to wait for etcd to become ready")
	_ = fs.Parse(os.Args[1:])
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		return 2
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: bad --listen-client-url: %v\n", err)
		return 2
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: bad --listen-peer-url: %v\n", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(*name)
	cfg.LogLevel = *logLevel
	// Test-only: trade durability for speed.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: start failed: %v\n", err)
		return 1
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", cu.String())
	case <-time.After(*startTimeout):
		e.Server.Stop()
		fmt.Fprintln(os.Stderr, "etcd: timed out waiting to become ready")
		return 1
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "etcd: received %v, shutting down\n", s)
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: server error: %v\n", err)
		return 1
	}
}
