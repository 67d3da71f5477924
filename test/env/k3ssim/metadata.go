package k3ssim

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registerNode creates a server's Node if it does not exist, as its kubelet would, with its
// InternalIP; the kubelet stand-in then makes it Ready.
func (s *Simulator) registerNode(ctx context.Context, name, ip string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.opts.ClusterLabels}}
	if err := s.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to register Node %s: %w", name, err)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses": []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		"nodeInfo":  map[string]string{"kubeletVersion": s.profileFor(name).Version},
	}})
	if err != nil {
		return fmt.Errorf("failed to marshal Node %s status patch: %w", name, err)
	}
	if err := s.client.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to write Node %s addresses and kubeletVersion: %w", name, err)
	}
	return s.kubelet.Start(ctx, name)
}

// desiredMetadata returns the labels and annotations the metadata controller keeps on a
// server's own Node (k3s pkg/etcd/metadata_controller.go).
func (s *Simulator) desiredMetadata(srv server) (labels, annotations map[string]string) {
	labels = map[string]string{EtcdRoleLabel: "true"}
	if !srv.etcdOnly {
		labels[ControlPlaneRoleLabel] = "true"
	}
	for k, v := range s.opts.ClusterLabels {
		// Not K3s's: keeps a Node registered by someone else (a kubelet stand-in) in scope.
		labels[k] = v
	}
	if srv.profile.MasterLabel {
		labels[MasterRoleLabel] = "true"
	}
	annotations = map[string]string{s.profile.Keys.NodeName: srv.member, s.profile.Keys.NodeAddress: srv.ip}
	return labels, annotations
}

// syncMetadata is the metadata controller of one running server: it writes its member name,
// advertise IP and role labels on its own Node when any differs, and keeps
// status.nodeInfo.kubeletVersion on the simulated version. A missing Node is left alone.
func (s *Simulator) syncMetadata(ctx context.Context, srv server) error {
	node := &corev1.Node{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: srv.node}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	labels, annotations := s.desiredMetadata(srv)
	if !hasAll(node.Labels, labels) || !hasAll(node.Annotations, annotations) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
		if err != nil {
			return fmt.Errorf("failed to marshal Node %s metadata patch: %w", srv.node, err)
		}
		if err := s.client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("failed to write etcd metadata on Node %s: %w", srv.node, err)
		}
	}
	if node.Status.NodeInfo.KubeletVersion == srv.profile.Version {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]string{"kubeletVersion": srv.profile.Version}}})
	if err != nil {
		return fmt.Errorf("failed to marshal Node %s kubeletVersion patch: %w", srv.node, err)
	}
	if err := s.client.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to write kubeletVersion on Node %s: %w", srv.node, err)
	}
	return nil
}

// hasAll reports whether have contains every key of want with the same value.
func hasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
