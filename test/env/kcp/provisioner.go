package kcp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// ProviderIDPrefix is the scheme of the providerIDs the provisioner gives TestMachines and Nodes.
const ProviderIDPrefix = "test://"

// provisioner is the infrastructure provider of KCP's TestMachines: it "boots" the host once
// the Machine's bootstrap data exists and runs what the data says (kubeadm init or join, see
// workloadCluster.provision), then reports the TestMachine provisioned with its providerID. On
// deletion it powers the host off (workloadCluster.release).
type provisioner struct {
	client   client.Client
	workload *workloadCluster
}

func (p *provisioner) setupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("kcp-testmachine").
		For(newTestMachine()).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToTestMachine)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 5}).
		Complete(p)
	if err != nil {
		return fmt.Errorf("failed to set up the %s provisioner: %w", infra.MachineKind, err)
	}
	return nil
}

// machineToTestMachine wakes the provisioner when a Machine gets its bootstrap data.
func machineToTestMachine(_ context.Context, o client.Object) []ctrl.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.InfrastructureRef.Kind != infra.MachineKind {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
}

func newTestMachine() *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(infra.GroupVersion.WithKind(infra.MachineKind))
	return m
}

// Reconcile provisions or releases one TestMachine.
func (p *provisioner) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tm := newTestMachine()
	if err := p.client.Get(ctx, req.NamespacedName, tm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tm.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, p.reconcileDelete(ctx, tm)
	}
	if controllerutil.AddFinalizer(tm, infra.MachineFinalizer) {
		if err := p.client.Update(ctx, tm); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add finalizer to %s %s: %w", infra.MachineKind, req, err)
		}
		return ctrl.Result{}, nil
	}
	if provisioned, _, _ := unstructured.NestedBool(tm.Object, "status", "initialization", "provisioned"); provisioned {
		return ctrl.Result{}, nil
	}
	bd, err := p.bootstrapData(ctx, tm)
	if err != nil || bd == nil {
		return ctrl.Result{}, err
	}
	providerID := ProviderIDPrefix + tm.GetName()
	if err := p.workload.provision(ctx, tm.GetName(), providerID, bd, p.bound(tm)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, p.markProvisioned(ctx, tm, providerID)
}

// bootstrapData returns the owning Machine's bootstrap data, or nil while there is none yet
// (the Machine watch brings the TestMachine back).
func (p *provisioner) bootstrapData(ctx context.Context, tm *unstructured.Unstructured) (*bootstrapData, error) {
	owner := ownerMachineName(tm)
	if owner == "" {
		return nil, nil
	}
	m := &clusterv1.Machine{}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: tm.GetNamespace(), Name: owner}, m); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if m.Spec.Bootstrap.DataSecretName == nil {
		return nil, nil
	}
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: m.Namespace, Name: *m.Spec.Bootstrap.DataSecretName}
	if err := p.client.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("failed to get the bootstrap data of Machine %s: %w", owner, err)
	}
	return parseBootstrapData(s.Data["value"])
}

// bound reports whether Cluster API set the nodeRef of the TestMachine's Machine.
func (p *provisioner) bound(tm *unstructured.Unstructured) boundFunc {
	key := client.ObjectKey{Namespace: tm.GetNamespace(), Name: ownerMachineName(tm)}
	return func(ctx context.Context) (bool, error) {
		m := &clusterv1.Machine{}
		if err := p.client.Get(ctx, key, m); err != nil {
			return false, fmt.Errorf("failed to get Machine %s: %w", key, err)
		}
		return m.Status.NodeRef.IsDefined(), nil
	}
}

func ownerMachineName(tm *unstructured.Unstructured) string {
	for _, ref := range tm.GetOwnerReferences() {
		if ref.Kind == "Machine" && ref.APIVersion == clusterv1.GroupVersion.String() {
			return ref.Name
		}
	}
	return ""
}

// markProvisioned sets spec.providerID and status.initialization.provisioned.
func (p *provisioner) markProvisioned(ctx context.Context, tm *unstructured.Unstructured, providerID string) error {
	key := client.ObjectKeyFromObject(tm)
	if err := unstructured.SetNestedField(tm.Object, providerID, "spec", "providerID"); err != nil {
		return fmt.Errorf("failed to set spec.providerID of %s %s: %w", infra.MachineKind, key, err)
	}
	if err := p.client.Update(ctx, tm); err != nil {
		return fmt.Errorf("failed to set spec.providerID of %s %s: %w", infra.MachineKind, key, err)
	}
	if err := unstructured.SetNestedField(tm.Object, true, "status", "initialization", "provisioned"); err != nil {
		return fmt.Errorf("failed to set status of %s %s: %w", infra.MachineKind, key, err)
	}
	if err := p.client.Status().Update(ctx, tm); err != nil {
		return fmt.Errorf("failed to mark %s %s provisioned: %w", infra.MachineKind, key, err)
	}
	return nil
}

func (p *provisioner) reconcileDelete(ctx context.Context, tm *unstructured.Unstructured) error {
	if !controllerutil.ContainsFinalizer(tm, infra.MachineFinalizer) {
		return nil
	}
	if err := p.workload.release(ctx, tm.GetName()); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(tm, infra.MachineFinalizer)
	if err := p.client.Update(ctx, tm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to remove finalizer from %s %s: %w", infra.MachineKind, client.ObjectKeyFromObject(tm), err)
	}
	return nil
}
