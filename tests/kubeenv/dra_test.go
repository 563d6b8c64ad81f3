package kubeenv

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
)

// TestResourceClaimsAsPlexusSees: with deploy/base's RBAC, plexus reads a
// pod's claims and the ResourceClaim a DRA driver allocated and reported
// on (resource.k8s.io/v1), and nothing more of resource.k8s.io. No kubelet
// DRA driver runs here: the test writes the claim's status as the
// scheduler and the driver would.
func TestResourceClaimsAsPlexusSees(t *testing.T) {
	e := ForTest(t, Options{})
	ctx := t.Context()
	admin, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(ctx, false, deployFile(t, "base/crd.yaml"), deployFile(t, "base/rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	const ns = "dra"
	if err := e.CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}

	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-nics"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    "nic",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "net.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
		}}}},
	}
	claim, err = admin.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimName := claim.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "nics"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "nics", ResourceClaimName: &claimName}},
		},
	}
	pod, err = admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the scheduler (allocation, reservation) and then the driver
	// (device status with network data) write.
	claim.Status = resourcev1.ResourceClaimStatus{
		Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "nic", Driver: "net.example.com", Pool: "node-1", Device: "vf-0"},
			{Request: "nic", Driver: "net.example.com", Pool: "node-1", Device: "vf-1"},
		}}},
		ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
	}
	if claim, err = admin.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim.Status.Devices = []resourcev1.AllocatedDeviceStatus{{
		Driver: "net.example.com", Pool: "node-1", Device: "vf-1",
		NetworkData: &resourcev1.NetworkDeviceData{InterfaceName: "enp24s2f1", HardwareAddress: "02:00:00:00:00:11", IPs: []string{"10.9.0.11/24"}},
	}}
	if _, err = admin.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	saCfg, err := e.NodeServiceAccountConfig(ctx, "kube-system", "plexus", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	src, err := kube.New(saCfg, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Pod(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"nics": "web-nics"}; !reflect.DeepEqual(got.ResourceClaims, want) {
		t.Errorf("pod's claims %v, want %v", got.ResourceClaims, want)
	}
	rc, err := src.ResourceClaim(ctx, ns, "web-nics")
	if err != nil {
		t.Fatal(err)
	}
	want := &source.ResourceClaim{Namespace: ns, Name: "web-nics", ReservedFor: []string{string(pod.UID)}, Devices: []source.ClaimDevice{
		{Request: "nic", Driver: "net.example.com", Pool: "node-1", Device: "vf-0"},
		{Request: "nic", Driver: "net.example.com", Pool: "node-1", Device: "vf-1",
			InterfaceName: "enp24s2f1", HardwareAddress: "02:00:00:00:00:11", IPs: []string{"10.9.0.11/24"}},
	}}
	if !reflect.DeepEqual(rc, want) {
		t.Errorf("claim as plexus reads it:\n got %+v\nwant %+v", rc, want)
	}
	if _, err := src.ResourceClaim(ctx, ns, "missing"); err == nil {
		t.Error("a missing claim read without error")
	}

	// Least privilege: get, and nothing else of resource.k8s.io.
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list resourceclaims as plexus: %v, want Forbidden", err)
	}
	if _, err := sa.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("update claim status as plexus: %v, want Forbidden", err)
	}
	if _, err := sa.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list resourceslices as plexus: %v, want Forbidden", err)
	}
}
