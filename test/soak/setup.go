package soak

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdadm"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

const (
	// kcpHook is the pre-terminate hook KCP v1.14 puts on every control-plane Machine it creates
	// (sigs.k8s.io/cluster-api controlplane/kubeadm/internal/controllers/helpers.go).
	kcpHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/kcp-cleanup"
	// k3sHook is the bare hook key cluster-api-k3s puts on a Machine just before its own
	// scale-down or remediation deletes it.
	k3sHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix
	// members is the size of every scenario's cluster.
	members = 3
	// observationInterval is the ControlPlaneEtcds' spec.observationInterval.
	observationInterval = time.Second
	// setupTimeout bounds binding and hooking a new cluster's Machines.
	setupTimeout = 2 * time.Minute
	// unhealthyCondition is the Node condition the MachineHealthCheck of each kubeadm and K3s
	// scenario watches; the soak sets it on the Node of a member it stops.
	unhealthyCondition corev1.NodeConditionType = "EtcdMemberStopped"
)

var kubeadmControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}

// start builds the scenario's 3-member cluster of its backend, registered with a bound,
// etcd-adapter-hooked Machine per member and a ControlPlaneEtcd in mode Manage.
func (s *scenario) start(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "soak-" + s.backend + "-"}}
	if err := s.c.Create(ctx, ns); err != nil {
		return fmt.Errorf("failed to create a namespace: %w", err)
	}
	s.ns = ns.Name
	switch s.backend {
	case backendKubeadm:
		return s.startKubeadm(ctx)
	case backendK3s:
		return s.startK3s(ctx)
	default:
		return s.startEtcdadm(ctx)
	}
}

func (s *scenario) register(ctx context.Context, withEtcdCA bool) error {
	in := env.ClusterInput{Namespace: s.ns, Name: s.backend, Workload: s.wl.Config}
	if withEtcdCA {
		in.EtcdCACert, in.EtcdCAKey = s.etcd.CA().CertPEM(), s.etcd.CA().KeyPEM()
	}
	var err error
	s.cluster, err = env.RegisterCluster(ctx, s.c, in)
	return err
}

func (s *scenario) startKubeadm(ctx context.Context) error {
	k, err := workload.StartKubeadm(ctx, workload.KubeadmOptions{Members: members})
	if err != nil {
		return err
	}
	s.kubeadm, s.wl, s.etcd = k, k.APIServer, k.Etcd
	if err := s.register(ctx, true); err != nil {
		return err
	}
	for _, node := range k.Nodes {
		if err := s.bindInitial(ctx, node, kcpHook, k.Etcd.MemberOnNode(node)); err != nil {
			return err
		}
	}
	if err := s.createControlPlaneEtcd(ctx, v1alpha1.BackendKubeadm); err != nil {
		return err
	}
	// Note: the Machines carry KCP's kcp-cleanup hook, and the soak's KCP stand-in (provider.go)
	// runs it as KCP v1.14 does for spec.version >= 1.31 (last); etcd-adapter reads that order
	// from the Cluster's KubeadmControlPlane, so the Cluster has one.
	return s.useKubeadmControlPlane(ctx)
}

func (s *scenario) startK3s(ctx context.Context) error {
	k, err := workload.StartK3s(ctx, workload.K3sOptions{Members: members, Tick: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	s.k3s, s.wl, s.etcd = k, k.APIServer, k.Etcd
	if err := s.register(ctx, true); err != nil {
		return err
	}
	for _, node := range k.Nodes {
		if err := s.bindInitial(ctx, node, "", k.Etcd.MemberOnNode(node)); err != nil {
			return err
		}
	}
	return s.createControlPlaneEtcd(ctx, v1alpha1.BackendK3s)
}

// bindInitial creates the Machine of an initial Node and waits until Cluster API bound it.
func (s *scenario) bindInitial(ctx context.Context, node, hook string, m *etcdcluster.Member) error {
	if err := s.setProviderID(ctx, node); err != nil {
		return err
	}
	if _, err := s.createMachine(ctx, node, hook); err != nil {
		return err
	}
	s.addMachine(&machineRec{name: "m-" + node, node: node, member: m, providerHook: hook})
	return s.waitBound(ctx, "m-"+node)
}

func (s *scenario) waitBound(ctx context.Context, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		m := &clusterv1.Machine{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, m); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return m.Status.NodeRef.Name != "", nil
	})
}

func (s *scenario) createControlPlaneEtcd(ctx context.Context, backend v1alpha1.Backend) error {
	cpe := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.cluster.Name},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: s.cluster.Name, Backend: backend, Mode: v1alpha1.ModeManage,
			ObservationInterval: &metav1.Duration{Duration: observationInterval}},
	}
	if err := s.c.Create(ctx, cpe); err != nil {
		return fmt.Errorf("failed to create the ControlPlaneEtcd: %w", err)
	}
	if err := s.createMHC(ctx); err != nil {
		return err
	}
	return s.waitHooks(ctx)
}

// createMHC watches the control-plane Machines' Nodes for unhealthyCondition.
func (s *scenario) createMHC(ctx context.Context) error {
	timeout := int32(1)
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "control-plane"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: s.cluster.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: unhealthyCondition, Status: corev1.ConditionTrue, TimeoutSeconds: &timeout},
			}},
		},
	}
	if err := s.c.Create(ctx, mhc); err != nil {
		return fmt.Errorf("failed to create the MachineHealthCheck: %w", err)
	}
	return nil
}

// waitHooks waits until etcd-adapter holds every Machine with its hook.
func (s *scenario) waitHooks(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		for _, r := range s.live() {
			m := &clusterv1.Machine{}
			if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: r.name}, m); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if m.Annotations[v1alpha1.PreTerminateHookAnnotation] != v1alpha1.PreTerminateHookValue {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("etcd-adapter did not hook every Machine: %w", err)
	}
	return nil
}

// startEtcdadm plays the etcdadm controller (aws/etcdadm-controller): a real external etcd, the
// Cluster's external etcd Secrets, an EtcdadmCluster with status.endpoints, and the etcd
// Machines it creates (controllers/helpers.go generateMachine); the ControlPlaneEtcd etcd-adapter
// creates in Observe is switched to Manage before the Machines exist.
func (s *scenario) startEtcdadm(ctx context.Context) error {
	var specs []etcdcluster.MemberSpec
	for i := range members {
		specs = append(specs, etcdcluster.MemberSpec{NodeName: fmt.Sprintf("etcd-%d", i), IP: s.nextIP()})
	}
	x, err := workload.StartExternal(ctx, workload.ExternalOptions{Members: specs})
	if err != nil {
		return err
	}
	s.external, s.wl, s.etcd = x, x.APIServer, x.Etcd
	if err := s.register(ctx, false); err != nil {
		return err
	}
	for _, secret := range x.Secrets(s.ns, s.cluster.Name) {
		if err := s.c.Create(ctx, secret); err != nil {
			return fmt.Errorf("failed to create Secret %s: %w", secret.Name, err)
		}
	}
	if err := s.createEtcdadmCluster(ctx); err != nil {
		return err
	}
	if err := s.useKubeadmControlPlane(ctx); err != nil {
		return err
	}
	if err := s.manageExternal(ctx); err != nil {
		return err
	}
	for _, m := range s.etcd.Members() {
		if err := s.createEtcdMachine(ctx, m); err != nil {
			return err
		}
	}
	return s.waitHooks(ctx)
}

func (s *scenario) createEtcdadmCluster(ctx context.Context) error {
	ec := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(members)}}}
	ec.SetGroupVersionKind(etcdadm.GVK)
	ec.SetNamespace(s.ns)
	ec.SetName(s.cluster.Name + "-etcd")
	ec.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: s.cluster.Name, UID: s.cluster.UID}})
	if err := s.c.Create(ctx, ec); err != nil {
		return fmt.Errorf("failed to create the EtcdadmCluster: %w", err)
	}
	s.ec = ec
	return s.writeEndpoints(ctx)
}

// writeEndpoints writes status.endpoints as the etcdadm controller does (controllers/status.go
// updateStatus): the client URLs of the members, sorted, comma-separated.
func (s *scenario) writeEndpoints(ctx context.Context) error {
	var urls []string
	for _, r := range s.live() {
		if _, removed := s.worldRemovedBy(r.member.ID()); !removed {
			urls = append(urls, r.member.ClientURL())
		}
	}
	if len(urls) == 0 {
		for _, m := range s.etcd.Members() {
			urls = append(urls, m.ClientURL())
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(etcdadm.GVK)
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(s.ec), got); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		_ = unstructured.SetNestedField(got.Object, strings.Join(sorted(urls), ","), "status", "endpoints")
		_ = unstructured.SetNestedField(got.Object, true, "status", "ready")
		return s.c.Status().Update(ctx, got) == nil, nil
	})
}

func (s *scenario) useKubeadmControlPlane(ctx context.Context) error {
	kcp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"version": "v1.34.0",
		"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": infra.Group, "kind": "TestMachineTemplate", "name": s.cluster.Name,
		}}},
	}}}
	kcp.SetGroupVersionKind(kubeadmControlPlaneGVK)
	kcp.SetNamespace(s.ns)
	kcp.SetName(s.cluster.Name)
	if err := s.c.Create(ctx, kcp); err != nil {
		return fmt.Errorf("failed to create the KubeadmControlPlane: %w", err)
	}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(s.cluster), s.cluster); err != nil {
		return err
	}
	before := s.cluster.DeepCopy()
	s.cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: kubeadmControlPlaneGVK.Group, Kind: kubeadmControlPlaneGVK.Kind, Name: s.cluster.Name}
	return s.c.Patch(ctx, s.cluster, client.MergeFrom(before))
}

// manageExternal waits for the ControlPlaneEtcd etcd-adapter creates for the EtcdadmCluster and
// switches it to mode Manage.
func (s *scenario) manageExternal(ctx context.Context) error {
	cpe := &v1alpha1.ControlPlaneEtcd{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		return s.c.Get(ctx, client.ObjectKeyFromObject(s.cluster), cpe) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("etcd-adapter did not create the external ControlPlaneEtcd: %w", err)
	}
	before := cpe.DeepCopy()
	cpe.Spec.Mode = v1alpha1.ModeManage
	cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
	return s.c.Patch(ctx, cpe, client.MergeFrom(before))
}

// createEtcdMachine creates the etcd Machine of member m as the etcdadm controller does: its
// labels, the EtcdadmCluster as controller, no Node; its address is the member's.
func (s *scenario) createEtcdMachine(ctx context.Context, em *etcdcluster.Member) error {
	name := fmt.Sprintf("%s-%s", s.ec.GetName(), em.NodeName())
	im := infra.NewMachine(s.ns, name, "test://etcd/"+s.ns+"/"+name)
	if err := s.c.Create(ctx, im); err != nil {
		return fmt.Errorf("failed to create TestMachine %s: %w", name, err)
	}
	isController := true
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.ns, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name, backends.EtcdClusterLabel: s.ec.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: etcdadm.GVK.GroupVersion().String(), Kind: etcdadm.GVK.Kind,
				Name: s.ec.GetName(), UID: s.ec.GetUID(), Controller: &isController}},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName:       s.cluster.Name,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infra.Group, Kind: infra.MachineKind, Name: name},
		},
	}
	if err := s.c.Create(ctx, m); err != nil {
		return fmt.Errorf("failed to create etcd Machine %s: %w", name, err)
	}
	s.addMachine(&machineRec{name: name, ip: em.IP(), member: em})
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(im.GroupVersionKind())
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(im), got); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		before := got.DeepCopy()
		_ = unstructured.SetNestedSlice(got.Object, []any{map[string]any{"type": string(clusterv1.MachineInternalIP), "address": em.IP()}}, "status", "addresses")
		if err := s.c.Status().Patch(ctx, got, client.MergeFrom(before)); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		return true, nil
	})
}

// close stops the workload cluster and leaves its objects to the management cluster's end; the
// ControlPlaneEtcd is deleted so that etcd-adapter stops reaching for the stopped etcd.
func (s *scenario) close(ctx context.Context) error {
	var errs []error
	if s.cluster != nil {
		err := s.c.Delete(ctx, &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.cluster.Name}})
		errs = append(errs, client.IgnoreNotFound(err))
	}
	switch {
	case s.kubeadm != nil:
		errs = append(errs, s.kubeadm.Close())
	case s.k3s != nil:
		errs = append(errs, s.k3s.Close())
	case s.external != nil:
		errs = append(errs, s.external.Close())
	}
	return errors.Join(errs...)
}
