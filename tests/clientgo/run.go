package main

// The "run" command: a node agent's and an operator's calls, through a clientset with its
// defaults, against the server the kubeconfig names. Any failure ends it with exit 1.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// contentTypes records the Content-Type of every request body, to prove protobuf was sent.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]int // "METHOD content-type" -> count
	next http.RoundTripper
}

func (c *contentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	if ct := req.Header.Get("Content-Type"); ct != "" {
		c.mu.Lock()
		c.seen[req.Method+" "+ct]++
		c.mu.Unlock()
	}
	return c.next.RoundTrip(req)
}

type failure struct{ msg string }

func must(ok bool, format string, args ...any) {
	if !ok {
		panic(failure{fmt.Sprintf(format, args...)})
	}
}

func check(err error, what string) {
	if err != nil {
		panic(failure{fmt.Sprintf("%s: %v", what, err)})
	}
}

func cmdRun(kubeconfig string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			fmt.Fprintln(os.Stderr, "clientgo: FAIL:", f.msg)
			code = 1
		}
	}()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	check(err, "load kubeconfig")
	// The clientset's defaults, untouched: built-in types go as protobuf.
	must(config.ContentType == "", "kubeconfig set a content type: %q", config.ContentType)
	recorder := &contentTypes{seen: map[string]int{}}
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { recorder.next = rt; return recorder })
	cs, err := kubernetes.NewForConfig(config)
	check(err, "clientset")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns := "default"
	pods := cs.CoreV1().Pods(ns)

	// Node: create and read back.
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "clientgo-node", Labels: map[string]string{"kubernetes.io/hostname": "clientgo-node"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}},
	}
	createdNode, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	check(err, "create node")
	gotNode, err := cs.CoreV1().Nodes().Get(ctx, "clientgo-node", metav1.GetOptions{})
	check(err, "get node")
	must(gotNode.UID == createdNode.UID && gotNode.UID != "", "node uid %q vs %q", gotNode.UID, createdNode.UID)
	must(gotNode.Labels["kubernetes.io/hostname"] == "clientgo-node", "node labels lost: %v", gotNode.Labels)

	mkPod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "clientgo"}},
			Spec: corev1.PodSpec{
				NodeName:                      "clientgo-node",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				Containers: []corev1.Container{{
					Name: "app", Image: "nginx:1.27",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}},
			},
		}
	}

	// List, then watch from the list's version (an informer's start), then create.
	before, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=clientgo"})
	check(err, "list pods")
	must(len(before.Items) == 0, "pods labelled app=clientgo exist already: %d", len(before.Items))
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion, LabelSelector: "app=clientgo"})
	check(err, "watch pods")
	defer w.Stop()
	pod, err := pods.Create(ctx, mkPod("clientgo-a"), metav1.CreateOptions{})
	check(err, "create pod")
	must(pod.UID != "" && pod.ResourceVersion != "", "created pod lacks uid/resourceVersion")
	must(pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() == 100, "cpu request lost: %v",
		pod.Spec.Containers[0].Resources.Requests)

	got, err := pods.Get(ctx, "clientgo-a", metav1.GetOptions{})
	check(err, "get pod")
	must(got.UID == pod.UID, "get: uid %q, want %q", got.UID, pod.UID)

	got.Labels["stage"] = "updated"
	updated, err := pods.Update(ctx, got, metav1.UpdateOptions{})
	check(err, "update pod")
	must(updated.Labels["stage"] == "updated", "update lost the label: %v", updated.Labels)
	must(updated.ResourceVersion != got.ResourceVersion, "update kept resourceVersion %s", got.ResourceVersion)

	// Status: a strategic merge patch, then a protobuf PUT of the status subresource.
	patch := `{"status":{"phase":"Running","hostIP":"10.0.0.1","podIP":"10.1.0.9","podIPs":[{"ip":"10.1.0.9"}]}}`
	patched, err := pods.Patch(ctx, "clientgo-a", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	check(err, "patch pod status")
	must(patched.Status.Phase == corev1.PodRunning, "status patch: phase %q", patched.Status.Phase)
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	patched.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	patched.Status.StartTime = &now
	patched.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "nginx:1.27", Ready: false,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	status, err := pods.UpdateStatus(ctx, patched, metav1.UpdateOptions{})
	check(err, "update pod status")
	must(len(status.Status.ContainerStatuses) == 1 && status.Status.ContainerStatuses[0].State.Running != nil,
		"status update lost the container state: %+v", status.Status.ContainerStatuses)
	must(status.Status.StartTime != nil && status.Status.StartTime.Equal(&now), "startTime %v, want %v", status.Status.StartTime, now)

	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=clientgo"})
	check(err, "list pods")
	must(len(list.Items) == 1 && list.Items[0].Name == "clientgo-a", "list: %d items", len(list.Items))

	// Delete with DeleteOptions: a wrong UID precondition is a conflict, the right one deletes.
	wrong := types.UID("00000000-0000-0000-0000-000000000000")
	err = pods.Delete(ctx, "clientgo-a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}})
	must(apierrors.IsConflict(err), "delete with a wrong uid: want 409 Conflict, got %v", err)
	err = pods.Delete(ctx, "clientgo-a", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(5)), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	check(err, "delete pod with grace period and uid precondition")
	terminating, err := pods.Get(ctx, "clientgo-a", metav1.GetOptions{})
	if err == nil {
		must(terminating.DeletionTimestamp != nil, "deleted pod has no deletionTimestamp")
		must(terminating.DeletionGracePeriodSeconds != nil && *terminating.DeletionGracePeriodSeconds == 5,
			"deletionGracePeriodSeconds %v, want 5", terminating.DeletionGracePeriodSeconds)
	} else {
		must(apierrors.IsNotFound(err), "get after delete: %v", err)
	}

	// Evictions: policy/v1 as kubectl drain sends it (JSON), and the same as protobuf.
	for i, asProtobuf := range []bool{false, true} {
		name := fmt.Sprintf("clientgo-evict-%d", i)
		p, err := pods.Create(ctx, mkPod(name), metav1.CreateOptions{})
		check(err, "create pod "+name)
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(p.UID))}}
		if asProtobuf {
			err = cs.PolicyV1().RESTClient().Post().UseProtobufAsDefault().AbsPath("/api/v1").Namespace(ns).
				Resource("pods").Name(name).SubResource("eviction").Body(ev).Do(ctx).Error()
		} else {
			err = cs.PolicyV1().Evictions(ns).Evict(ctx, ev)
		}
		check(err, "evict "+name)
		gone, err := pods.Get(ctx, name, metav1.GetOptions{})
		must(apierrors.IsNotFound(err) || (err == nil && gone.DeletionTimestamp != nil), "evicted pod %s still there: %v", name, err)
	}
	err = cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Namespace: ns}})
	must(apierrors.IsNotFound(err), "evict a missing pod: want 404, got %v", err)

	// Node heartbeat and events, as a node agent sends them (protobuf).
	renew := metav1.NewMicroTime(time.Now().UTC().Truncate(time.Microsecond))
	leases := cs.CoordinationV1().Leases("kube-node-lease")
	lease, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "clientgo-node"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("clientgo-node"), LeaseDurationSeconds: ptr(int32(40)), RenewTime: &renew}}, metav1.CreateOptions{})
	check(err, "create lease")
	must(lease.Spec.RenewTime != nil && lease.Spec.RenewTime.Equal(&renew), "lease renewTime %v, want %v", lease.Spec.RenewTime, renew)
	later := metav1.NewMicroTime(renew.Add(10 * time.Second))
	lease.Spec.RenewTime = &later
	lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	check(err, "update lease")
	must(lease.Spec.RenewTime.Equal(&later), "lease renewTime after update %v, want %v", lease.Spec.RenewTime, later)
	_, err = cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "clientgo-a.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "clientgo-a", UID: pod.UID, APIVersion: "v1"},
		Reason:         "Started", Message: "Started container app", Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: "clientgo-node"}, FirstTimestamp: now, LastTimestamp: now}, metav1.CreateOptions{})
	check(err, "create core/v1 event")
	_, err = cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "clientgo-a.2"},
		EventTime: renew, ReportingController: "podstatus.local/clientgo", ReportingInstance: "clientgo-node",
		Action: "Pulling", Reason: "Pulling", Type: corev1.EventTypeNormal, Note: "Pulling image",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "clientgo-a", UID: pod.UID, APIVersion: "v1"}}, metav1.CreateOptions{})
	check(err, "create events.k8s.io/v1 event")

	// The watch saw the pod's life: added, modified, and deleted (or marked for deletion).
	seen := map[watch.EventType]bool{}
	deadline := time.After(10 * time.Second)
	for !(seen[watch.Added] && seen[watch.Modified] && seen[watch.Deleted]) {
		select {
		case ev, ok := <-w.ResultChan():
			must(ok, "watch closed early; saw %v", seen)
			must(ev.Type != watch.Error, "watch error: %v", ev.Object)
			p, isPod := ev.Object.(*corev1.Pod)
			must(isPod, "watch event object is %T", ev.Object)
			if p.Name == "clientgo-a" || ev.Type == watch.Deleted {
				seen[ev.Type] = true
			}
		case <-deadline:
			panic(failure{fmt.Sprintf("watch: after 10s saw only %v", seen)})
		}
	}

	// Everything above that sends a built-in object went as protobuf.
	recorder.mu.Lock()
	defer recorder.mu.Unlock()
	for _, verb := range []string{"POST", "PUT", "DELETE"} {
		key := verb + " application/vnd.kubernetes.protobuf"
		must(recorder.seen[key] > 0, "no %s request was sent as protobuf: %v", verb, recorder.seen)
	}
	var parts []string
	for k, v := range recorder.seen {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	fmt.Println("clientgo: OK;", strings.Join(parts, ", "))
	return 0
}
