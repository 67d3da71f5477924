// Package v1alpha1 holds the etcd-adapter API: the condition types, reasons and annotation keys
// every part of the project uses, defined once here.
//
// The etcd health conditions alias the KubeadmControlPlane (KCP) v1beta2 constants on purpose:
// a provider that adopts this project keeps the condition types and reasons its users already
// alert on.
package v1alpha1
