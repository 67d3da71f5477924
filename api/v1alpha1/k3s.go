package v1alpha1

import "github.com/etcd-adapter/etcd-adapter/pkg/k3s"

// Annotations the K3s backend writes on a workload cluster's Node, defined in package k3s (see
// there why they exist), so the backend needs nothing from this API.
const (
	// K3sRemovingMemberAnnotation is k3s.RemovingMemberAnnotation.
	K3sRemovingMemberAnnotation = k3s.RemovingMemberAnnotation

	// K3sRemovalRequestedAtAnnotation is k3s.RemovalRequestedAtAnnotation.
	K3sRemovalRequestedAtAnnotation = k3s.RemovalRequestedAtAnnotation

	// K3sRemovalConfirmedAnnotation is k3s.RemovalConfirmedAnnotation.
	K3sRemovalConfirmedAnnotation = k3s.RemovalConfirmedAnnotation
)
