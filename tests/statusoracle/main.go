// The status oracle: the real k8s.io/kubernetes/pkg/kubelet/status manager of v1.37.2, driven one
// operation at a time, for the differential test in tests/test_status_oracle.py.
//
// It reads operations as JSON lines on stdin and answers each with one JSON line on stdout: the
// requests the manager sent during the operation (verb, and the patch body), what the operation
// returned, and the manager's cached status of every pod UID seen so far. The API server is an
// in-memory pod store behind client-go's fake clientset (reactors below), the pod manager is the
// kubelet's own basic pod manager, and sync passes run when told (an overlay adds an exported
// hook for syncBatch to the package, see export_status.go.in), so a run is deterministic.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/metrics"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	status "podstatus.local/tests/statusoracle/upstreamstatus"
)

// op is one line of input; which fields matter depends on Op.
type op struct {
	Op          string          `json:"op"`
	Pod         json.RawMessage `json:"pod,omitempty"`
	Server      *bool           `json:"server,omitempty"`
	Node        *bool           `json:"node,omitempty"`
	Namespace   string          `json:"namespace,omitempty"`
	Name        string          `json:"name,omitempty"`
	UID         string          `json:"uid,omitempty"`
	UIDs        []string        `json:"uids,omitempty"`
	Status      json.RawMessage `json:"status,omitempty"`
	ContainerID string          `json:"container_id,omitempty"`
	Value       bool            `json:"value,omitempty"`
	All         bool            `json:"all,omitempty"`
	Verb        string          `json:"verb,omitempty"`
	Code        int             `json:"code,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Message     string          `json:"message,omitempty"`
	Generation  int64           `json:"generation,omitempty"`
	What        string          `json:"what,omitempty"`
}

type request struct {
	Verb      string          `json:"verb"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Patch     json.RawMessage `json:"patch,omitempty"`
	UID       string          `json:"uid,omitempty"`
	Grace     *int64          `json:"grace,omitempty"`
	Error     int             `json:"error,omitempty"`
}

type answer struct {
	Requests []request                     `json:"requests"`
	Ret      any                           `json:"ret"`
	Statuses map[string]*v1.PodStatus      `json:"statuses"`
	Resize   map[string][]*v1.PodCondition `json:"resize,omitempty"`
	Error    string                        `json:"error,omitempty"`
}

// server is the in-memory API server behind the fake clientset: pods by namespace/name.
type server struct {
	pods     map[string]*v1.Pod
	failNext map[string][]int // "verb name" -> status codes of the next failures of that pod
	requests []request
}

func key(namespace, name string) string { return namespace + "/" + name }

var podsResource = schema.GroupResource{Resource: "pods"}

func apiError(code int, name string) error {
	switch code {
	case 404:
		return apierrors.NewNotFound(podsResource, name)
	case 409:
		return apierrors.NewConflict(podsResource, name, fmt.Errorf("injected conflict"))
	case 422:
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name, nil)
	case 429:
		return apierrors.NewTooManyRequests("injected", 1)
	case 503:
		return apierrors.NewServiceUnavailable("injected")
	default:
		return apierrors.NewInternalError(fmt.Errorf("injected error"))
	}
}

func (s *server) injected(verb, name string) int {
	k := verb + " " + name
	if codes := s.failNext[k]; len(codes) > 0 {
		s.failNext[k] = codes[1:]
		return codes[0]
	}
	return 0
}

func isTerminal(phase v1.PodPhase) bool { return phase == v1.PodSucceeded || phase == v1.PodFailed }

func (s *server) react(action core.Action) (bool, runtime.Object, error) {
	ns := action.GetNamespace()
	// By verb: a PatchAction is a GetAction too (both have GetName).
	switch action.GetVerb() {
	case "get":
		a := action.(core.GetAction)
		req := request{Verb: "get", Namespace: ns, Name: a.GetName()}
		defer func() { s.requests = append(s.requests, req) }()
		if code := s.injected("get", a.GetName()); code != 0 {
			req.Error = code
			return true, nil, apiError(code, a.GetName())
		}
		pod, ok := s.pods[key(ns, a.GetName())]
		if !ok {
			req.Error = 404
			return true, nil, apierrors.NewNotFound(podsResource, a.GetName())
		}
		return true, pod.DeepCopy(), nil
	case "patch":
		a := action.(core.PatchAction)
		req := request{Verb: "patch", Namespace: ns, Name: a.GetName(), Patch: append(json.RawMessage(nil), a.GetPatch()...)}
		defer func() { s.requests = append(s.requests, req) }()
		if code := s.injected("patch", a.GetName()); code != 0 {
			req.Error = code
			return true, nil, apiError(code, a.GetName())
		}
		stored, ok := s.pods[key(ns, a.GetName())]
		if !ok {
			req.Error = 404
			return true, nil, apierrors.NewNotFound(podsResource, a.GetName())
		}
		var body struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
			Status json.RawMessage `json:"status"`
		}
		if err := json.Unmarshal(a.GetPatch(), &body); err != nil {
			req.Error = 400
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if body.Metadata.UID != "" && body.Metadata.UID != string(stored.UID) {
			req.Error = 409
			return true, nil, apierrors.NewConflict(podsResource, a.GetName(), fmt.Errorf("uid precondition"))
		}
		if len(body.Status) == 0 {
			return true, stored.DeepCopy(), nil
		}
		// The pods/status subresource takes the status only.
		old, _ := json.Marshal(v1.Pod{Status: stored.Status})
		patch, _ := json.Marshal(map[string]json.RawMessage{"status": body.Status})
		merged, err := strategicpatch.StrategicMergePatch(old, patch, v1.Pod{})
		if err != nil {
			req.Error = 400
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		var result v1.Pod
		if err := json.Unmarshal(merged, &result); err != nil {
			req.Error = 400
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		// The API server's validation: a terminal phase never goes back.
		if isTerminal(stored.Status.Phase) && !isTerminal(result.Status.Phase) {
			req.Error = 422
			return true, nil, apiError(422, a.GetName())
		}
		updated := stored.DeepCopy()
		updated.Status = result.Status
		s.pods[key(ns, a.GetName())] = updated
		return true, updated.DeepCopy(), nil
	case "delete":
		a := action.(core.DeleteAction)
		opts := a.GetDeleteOptions()
		req := request{Verb: "delete", Namespace: ns, Name: a.GetName(), Grace: opts.GracePeriodSeconds}
		if opts.Preconditions != nil && opts.Preconditions.UID != nil {
			req.UID = string(*opts.Preconditions.UID)
		}
		defer func() { s.requests = append(s.requests, req) }()
		if code := s.injected("delete", a.GetName()); code != 0 {
			req.Error = code
			return true, nil, apiError(code, a.GetName())
		}
		stored, ok := s.pods[key(ns, a.GetName())]
		if !ok {
			req.Error = 404
			return true, nil, apierrors.NewNotFound(podsResource, a.GetName())
		}
		if req.UID != "" && req.UID != string(stored.UID) {
			req.Error = 409
			return true, nil, apierrors.NewConflict(podsResource, a.GetName(), fmt.Errorf("uid precondition"))
		}
		delete(s.pods, key(ns, a.GetName()))
		return true, nil, nil
	}
	return true, nil, apierrors.NewBadRequest(fmt.Sprintf("unexpected request %s", action.GetVerb()))
}

// safety is the pod deletion safety provider: whether a pod's containers could still run, by
// namespace/name (true unless told otherwise).
type safety struct{ stopped map[string]bool }

func (f *safety) PodCouldHaveRunningContainers(pod *v1.Pod) bool {
	return !f.stopped[key(pod.Namespace, pod.Name)]
}

type noStartupLatency struct{}

func (noStartupLatency) RecordStatusUpdated(klog.Logger, *v1.Pod) {}
func (noStartupLatency) DeletePodStartupState(types.UID)          {}

type oracle struct {
	ctx     context.Context
	logger  klog.Logger
	srv     *server
	pods    kubepod.Manager
	safe    *safety
	mgr     status.Manager
	seen    map[string]bool
	lastPod map[string]*v1.Pod // the last pod object given for a UID (the pod manager may have dropped it)
	node    map[string]*v1.Pod // what the pod manager holds, by nodeKey
}

func newOracle() *oracle {
	srv := &server{pods: map[string]*v1.Pod{}, failNext: map[string][]int{}}
	client := fake.NewSimpleClientset()
	client.PrependReactor("*", "pods", srv.react)
	pods := kubepod.NewBasicPodManager()
	safe := &safety{stopped: map[string]bool{}}
	logger := logr.Discard()
	return &oracle{
		ctx:     klog.NewContext(context.Background(), logger),
		logger:  logger,
		srv:     srv,
		pods:    pods,
		safe:    safe,
		mgr:     status.NewManager(client, pods, safe, noStartupLatency{}),
		seen:    map[string]bool{},
		lastPod: map[string]*v1.Pod{},
		node:    map[string]*v1.Pod{},
	}
}

func (o *oracle) pod(uid string) (*v1.Pod, error) {
	if pod, ok := o.pods.GetPodByUID(types.UID(uid)); ok {
		return pod, nil
	}
	if pod, ok := o.lastPod[uid]; ok {
		return pod, nil
	}
	return nil, fmt.Errorf("unknown pod UID %q", uid)
}

// apiUpdate is what another API client does to a pod (the same as apply_api_update in
// tests/statusoracle_harness.py).
func apiUpdate(pod *v1.Pod, what string) error {
	fixed := func(text string) metav1.Time {
		t, err := time.Parse(time.RFC3339, text)
		if err != nil {
			panic(err)
		}
		return metav1.NewTime(t)
	}
	switch what {
	case "delete":
		t := fixed("2020-01-01T00:01:00Z")
		grace := int64(30)
		pod.DeletionTimestamp = &t
		pod.DeletionGracePeriodSeconds = &grace
	case "disruption":
		condition := v1.PodCondition{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			Reason:             "EvictionByEvictionAPI",
			Message:            "Eviction API: evicting",
			LastTransitionTime: fixed("2020-01-01T00:00:05Z"),
		}
		conditions := []v1.PodCondition{condition}
		for _, c := range pod.Status.Conditions {
			if c.Type != v1.DisruptionTarget {
				conditions = append(conditions, c)
			}
		}
		pod.Status.Conditions = conditions
	case "generation":
		pod.Generation++
	case "claims":
		claim := "claim-1"
		pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "claim", ResourceClaimName: &claim}}
	case "label":
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["touched"] = "yes"
	default:
		return fmt.Errorf("unknown api update %q", what)
	}
	return nil
}

// remember keeps the pod object given for a UID; statuses are reported for the node's own UIDs
// (not mirror pods': their statuses are the static pods').
func (o *oracle) remember(pod *v1.Pod) {
	o.lastPod[string(pod.UID)] = pod.DeepCopy()
	if !kubetypes.IsMirrorPod(pod) {
		o.seen[string(pod.UID)] = true
	}
}

func nodeKey(pod *v1.Pod) string {
	return fmt.Sprintf("%s/%s/%v", pod.Namespace, pod.Name, kubetypes.IsMirrorPod(pod))
}

// learn gives the pod manager a pod as the kubelet's pod sources do: a pod of the same name (and
// kind, mirror or not) with another UID was deleted first, so the manager forgets it.
func (o *oracle) learn(pod *v1.Pod) {
	if held, ok := o.node[nodeKey(pod)]; ok && held.UID != pod.UID {
		o.pods.RemovePod(held)
	}
	o.node[nodeKey(pod)] = pod.DeepCopy()
	o.pods.UpdatePod(pod.DeepCopy())
}

func enabled(flag *bool) bool { return flag == nil || *flag }

func (o *oracle) apply(in op) (any, error) {
	switch in.Op {
	case "add_pod", "update_pod":
		var pod v1.Pod
		if err := json.Unmarshal(in.Pod, &pod); err != nil {
			return nil, fmt.Errorf("pod: %w", err)
		}
		o.remember(&pod)
		if enabled(in.Server) {
			o.srv.pods[key(pod.Namespace, pod.Name)] = pod.DeepCopy()
		}
		if enabled(in.Node) {
			o.learn(&pod)
		}
		return nil, nil
	case "remove_pod":
		if enabled(in.Server) {
			delete(o.srv.pods, key(in.Namespace, in.Name))
		}
		if enabled(in.Node) {
			// Only a pod the pod manager holds: the kubelet's sources remove what they added.
			if pod, err := o.pod(in.UID); err == nil {
				if held, ok := o.node[nodeKey(pod)]; ok && held.UID == pod.UID {
					o.pods.RemovePod(held)
					delete(o.node, nodeKey(pod))
				}
			}
		}
		return nil, nil
	case "watch":
		// The pod manager learns the server's copy of a pod, as the kubelet's watch delivers it.
		if pod, ok := o.srv.pods[key(in.Namespace, in.Name)]; ok {
			o.remember(pod)
			o.learn(pod)
		}
		return nil, nil
	case "api_update":
		stored, ok := o.srv.pods[key(in.Namespace, in.Name)]
		if !ok {
			return nil, nil
		}
		pod := stored.DeepCopy()
		if err := apiUpdate(pod, in.What); err != nil {
			return nil, err
		}
		o.srv.pods[key(in.Namespace, in.Name)] = pod
		if enabled(in.Node) {
			o.remember(pod)
			o.learn(pod)
		}
		return nil, nil
	case "set_pod_status":
		pod, err := o.pod(in.UID)
		if err != nil {
			return nil, err
		}
		var st v1.PodStatus
		if err := json.Unmarshal(in.Status, &st); err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		cached, changed := o.mgr.SetPodStatus(o.logger, pod, st)
		return map[string]any{"status": cached, "changed": changed}, nil
	case "set_container_readiness", "set_container_startup":
		var cid kubecontainer.ContainerID
		if err := cid.ParseString(in.ContainerID); err != nil {
			return nil, err
		}
		if in.Op == "set_container_readiness" {
			o.mgr.SetContainerReadiness(o.logger, types.UID(in.UID), cid, in.Value)
		} else {
			o.mgr.SetContainerStartup(o.logger, types.UID(in.UID), cid, in.Value)
		}
		return nil, nil
	case "terminate_pod":
		pod, err := o.pod(in.UID)
		if err != nil {
			return nil, err
		}
		o.mgr.TerminatePod(o.logger, pod)
		return nil, nil
	case "remove_orphaned_statuses":
		keep := map[types.UID]bool{}
		for _, uid := range in.UIDs {
			keep[types.UID(uid)] = true
		}
		o.mgr.RemoveOrphanedStatuses(o.logger, keep)
		return nil, nil
	case "sync":
		return status.OracleSyncBatch(o.ctx, o.mgr, in.All), nil
	case "fail":
		// Per pod: upstream's pass walks a map, so "the next GET" of any pod is not well defined.
		k := in.Verb + " " + in.Name
		o.srv.failNext[k] = append(o.srv.failNext[k], in.Code)
		return nil, nil
	case "set_could_have_running":
		o.safe.stopped[key(in.Namespace, in.Name)] = !in.Value
		return nil, nil
	case "set_resize_pending":
		return o.mgr.SetPodResizePendingCondition(types.UID(in.UID), in.Reason, in.Message, in.Generation), nil
	case "set_resize_in_progress":
		gen, changed := o.mgr.SetPodResizeInProgressCondition(types.UID(in.UID), in.Reason, in.Message, in.Generation)
		return []any{gen, changed}, nil
	case "clear_resize_pending":
		o.mgr.ClearPodResizePendingCondition(types.UID(in.UID), metrics.DeferredResizeResolutionAccepted)
		return nil, nil
	case "clear_resize_in_progress":
		gen, cleared := o.mgr.ClearPodResizeInProgressCondition(types.UID(in.UID))
		return []any{gen, cleared}, nil
	case "backfill_resize":
		var pods []*v1.Pod
		for _, uid := range in.UIDs {
			if pod, err := o.pod(uid); err == nil {
				pods = append(pods, pod)
			}
		}
		o.mgr.BackfillPodResizeConditions(pods)
		return nil, nil
	case "resize_state":
		return map[string]any{
			"deferred":   o.mgr.IsPodResizeDeferred(types.UID(in.UID)),
			"infeasible": o.mgr.IsPodResizeInfeasible(types.UID(in.UID)),
		}, nil
	}
	return nil, fmt.Errorf("unknown op %q", in.Op)
}

func (o *oracle) answer(ret any, err error) answer {
	out := answer{Requests: o.srv.requests, Ret: ret, Statuses: map[string]*v1.PodStatus{}}
	if out.Requests == nil {
		out.Requests = []request{}
	}
	o.srv.requests = nil
	if err != nil {
		out.Error = err.Error()
	}
	uids := make([]string, 0, len(o.seen))
	for uid := range o.seen {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		if st, ok := o.mgr.GetPodStatus(types.UID(uid)); ok {
			out.Statuses[uid] = &st
		} else {
			out.Statuses[uid] = nil
		}
		if conds := o.mgr.GetPodResizeConditions(types.UID(uid)); len(conds) > 0 {
			if out.Resize == nil {
				out.Resize = map[string][]*v1.PodCondition{}
			}
			out.Resize[uid] = conds
		}
	}
	return out
}

func main() {
	o := newOracle()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		line := in.Bytes()
		if len(line) == 0 {
			continue
		}
		var next op
		var ret any
		err := json.Unmarshal(line, &next)
		if err == nil {
			if next.Op == "reset" {
				o = newOracle()
			} else {
				ret, err = o.apply(next)
			}
		}
		if err := enc.Encode(o.answer(ret, err)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
