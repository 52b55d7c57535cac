package main

// The "wire" command: sample objects encoded by client-go's own serializers, both as
// protobuf (what a clientset sends) and as JSON, for podstatus's decoder round-trip test.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

func ptr[T any](v T) *T { return &v }

func samplePod() *corev1.Pod {
	t0 := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "default", UID: "1f7a9c2e-0000-4000-8000-000000000001",
			ResourceVersion: "42", Generation: 3, CreationTimestamp: t0,
			DeletionGracePeriodSeconds: ptr(int64(0)),
			Labels:                     map[string]string{"app": "web", "tier": ""},
			Annotations:                map[string]string{"note": "héllo"},
			Finalizers:                 []string{"example.com/keep"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u-rs", Controller: ptr(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: &t0, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`)},
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      "node-a",
			TerminationGracePeriodSeconds: ptr(int64(0)),
			ActiveDeadlineSeconds:         ptr(int64(600)),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27", Command: []string{"nginx", "-g", "daemon off;"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "EMPTY"},
					{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
					PeriodSeconds: 5,
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
				},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(false), RunAsUser: ptr(int64(0))},
			}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Gi"))}}}},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.1.0.5",
			PodIPs:    []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}},
			StartTime: &t0, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
				LastTransitionTime: t0, Reason: "ContainersNotReady", ObservedGeneration: 3}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: false, RestartCount: 0,
				Image: "nginx:1.27", ImageID: "", Started: ptr(false),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 137, Signal: 9, Reason: "OOMKilled", FinishedAt: t0}}}},
		},
	}
}

func sampleNode() *corev1.Node {
	t0 := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"kubernetes.io/hostname": "node-a"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}, Unschedulable: true,
			Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &t0}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("7Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: t0, LastTransitionTime: t0, Reason: "KubeletReady"}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo:        corev1.NodeSystemInfo{MachineID: "m", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
			Images:          []corev1.ContainerImage{{Names: []string{"nginx:1.27"}, SizeBytes: 1 << 34}},
		},
	}
}

func sampleDeleteOptions() *metav1.DeleteOptions {
	policy := metav1.DeletePropagationBackground
	return &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)),
		Preconditions:     &metav1.Preconditions{UID: ptr(types.UID("u-1")), ResourceVersion: ptr("7")},
		PropagationPolicy: &policy, DryRun: []string{"All"}}
}

func sampleEviction() *policyv1.Eviction {
	return &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(5)),
			Preconditions: &metav1.Preconditions{UID: ptr(types.UID("u-2"))}}}
}

func sampleLease() *coordinationv1.Lease {
	mt := metav1.NewMicroTime(time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC))
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-a"), LeaseDurationSeconds: ptr(int32(40)),
			RenewTime: &mt, LeaseTransitions: ptr(int32(0))}}
}

func sampleCoreEvent() *corev1.Event {
	t0 := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.1", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1", UID: "u-1", APIVersion: "v1"},
		Reason:         "Started", Message: "Started container app", Source: corev1.EventSource{Component: "kubelet", Host: "node-a"},
		FirstTimestamp: t0, LastTimestamp: t0, Count: 2, Type: corev1.EventTypeNormal}
}

func sampleEventsEvent() *eventsv1.Event {
	mt := metav1.NewMicroTime(time.Date(2026, 3, 4, 5, 6, 7, 500000000, time.UTC))
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.2", Namespace: "default"},
		EventTime: mt, ReportingController: "podstatus/node", ReportingInstance: "node-a", Action: "Started",
		Reason: "Started", Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "default"},
		Note: "Started container app", Type: "Normal",
		Series: &eventsv1.EventSeries{Count: 3, LastObservedTime: mt}}
}

type sample struct {
	Name     string          `json:"name"`
	Protobuf string          `json:"protobuf"`
	JSON     json.RawMessage `json:"json"`
}

func encodeAs(mediaType string, gv schema.GroupVersion, obj runtime.Object) ([]byte, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return nil, fmt.Errorf("no serializer for %s", mediaType)
	}
	return runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gv), obj)
}

func cmdWire() int {
	core := corev1.SchemeGroupVersion
	objects := []struct {
		name string
		gv   schema.GroupVersion
		obj  runtime.Object
	}{
		{"pod", core, samplePod()},
		{"node", core, sampleNode()},
		{"deleteoptions", core, sampleDeleteOptions()},
		{"eviction", policyv1.SchemeGroupVersion, sampleEviction()},
		{"lease", coordinationv1.SchemeGroupVersion, sampleLease()},
		{"event", core, sampleCoreEvent()},
		{"events.k8s.io-event", eventsv1.SchemeGroupVersion, sampleEventsEvent()},
		{"binding", core, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}},
	}
	var out []sample
	for _, o := range objects {
		pb, err := encodeAs("application/vnd.kubernetes.protobuf", o.gv, o.obj.DeepCopyObject())
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: protobuf: %v\n", o.name, err)
			return 1
		}
		js, err := encodeAs("application/json", o.gv, o.obj.DeepCopyObject())
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: json: %v\n", o.name, err)
			return 1
		}
		out = append(out, sample{o.name, base64.StdEncoding.EncodeToString(pb), js})
	}
	data, _ := json.MarshalIndent(out, "", " ")
	os.Stdout.Write(append(data, '\n'))
	return 0
}
