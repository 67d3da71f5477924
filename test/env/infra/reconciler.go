package infra

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// MachineFinalizer keeps a TestMachine until the reconciler has seen its deletion, like a real
// provider that must release the instance first.
const MachineFinalizer = "infrastructure.test.etcd-adapter.io/testmachine"

// Reconciler provisions TestMachines at once (status.initialization.provisioned = true) and
// removes its finalizer when they are deleted.
type Reconciler struct {
	// Client reads and writes TestMachines in the management cluster.
	Client client.Client
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		return fmt.Errorf("failed to set up the %s reconciler: Client must not be nil", MachineKind)
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("testmachine").
		For(newMachineObject()).
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the %s reconciler: %w", MachineKind, err)
	}
	return nil
}

// Reconcile provisions or releases one TestMachine.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := newMachineObject()
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, m)
	}
	// Note: the finalizer is added before provisioning so a provisioned TestMachine is always
	// released through reconcileDelete.
	if controllerutil.AddFinalizer(m, MachineFinalizer) {
		if err := r.Client.Update(ctx, m); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add finalizer to %s %s: %w", MachineKind, req, err)
		}
		// No need to requeue here: the update triggers a new reconcile.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.reconcileProvisioned(ctx, m)
}

func (r *Reconciler) reconcileProvisioned(ctx context.Context, m *unstructured.Unstructured) error {
	key := client.ObjectKeyFromObject(m)
	provisioned, _, err := unstructured.NestedBool(m.Object, "status", "initialization", "provisioned")
	if err != nil {
		return fmt.Errorf("failed to read status.initialization.provisioned of %s %s: %w", MachineKind, key, err)
	}
	if provisioned {
		return nil
	}
	if err := unstructured.SetNestedField(m.Object, true, "status", "initialization", "provisioned"); err != nil {
		return fmt.Errorf("failed to set status.initialization.provisioned of %s %s: %w", MachineKind, key, err)
	}
	if err := r.Client.Status().Update(ctx, m); err != nil {
		return fmt.Errorf("failed to mark %s %s provisioned: %w", MachineKind, key, err)
	}
	ctrl.LoggerFrom(ctx).Info("TestMachine provisioned")
	return nil
}

func (r *Reconciler) reconcileDelete(ctx context.Context, m *unstructured.Unstructured) error {
	if !controllerutil.RemoveFinalizer(m, MachineFinalizer) {
		return nil
	}
	if err := r.Client.Update(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to remove finalizer from %s %s: %w", MachineKind, client.ObjectKeyFromObject(m), err)
	}
	ctrl.LoggerFrom(ctx).Info("TestMachine released")
	return nil
}
