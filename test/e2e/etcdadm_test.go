package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdadm"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// The spec plays the etcdadm controller (aws/etcdadm-controller): it creates the EtcdadmCluster
// owned by its Cluster, the etcd Machines labelled and owned as that controller creates them
// (controllers/helpers.go generateMachine), the Secrets under the names it writes
// (controllers/certs.go), and status.endpoints once the members run (controllers/status.go
// updateStatus). etcd is real (3 TLS members, each on its own loopback address standing for its
// Machine's address), and Cluster API's own Machine controller runs the etcd Machines.
var _ = Describe("External etcd of an EtcdadmCluster", func() {
	It("gets an external ControlPlaneEtcd in Observe that reads status.endpoints, says why while there are none, binds each member to its etcd Machine, and guards the etcd Machines' deletion", func(ctx SpecContext) {
		By("a real 3-member TLS etcd, each member on its own address, and the Secrets of the Cluster's external etcd")
		ips := []string{"127.0.0.41", "127.0.0.42", "127.0.0.43"}
		x := startExternalEtcd(ctx, "eadm", membersAt("etcdadm", ips))
		etcdc, ns, cluster := x.Etcd, x.ns, x.cluster

		By("an EtcdadmCluster owned by the Cluster, with no status.endpoints yet, and a KubeadmControlPlane")
		ec := createEtcdadmCluster(ctx, cluster)
		// Note: the forks' KubeadmControlPlane gets its external endpoints from the etcd cluster;
		// this one lists none (its CRD refuses an empty list), so only the EtcdadmCluster's can
		// be dialled.
		useKubeadmControlPlane(ctx, cluster, nil)

		By("three etcd Machines as the etcdadm controller creates them: its labels, its controller reference, no control-plane label, no Node")
		var machines []*clusterv1.Machine
		for i, ip := range ips {
			machines = append(machines, createEtcdMachine(ctx, cluster, ec, fmt.Sprintf("%s-%d", ec.GetName(), i), ip, false))
		}

		By("etcd-adapter creates the Cluster's ControlPlaneEtcd: backend external, mode Observe")
		cpe := &v1alpha1.ControlPlaneEtcd{}
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)
		}, reconcileTimeout).Should(Succeed())
		Expect(cpe.Spec.Backend).To(Equal(v1alpha1.BackendExternal))
		Expect(cpe.Spec.Mode).To(Equal(v1alpha1.ModeObserve))
		before2 := cpe.DeepCopy()
		cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before2))).To(Succeed())

		By("with no status.endpoints yet, EtcdClusterHealthy is Unknown and says so; no member is listed")
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			c := findCondition(got, v1alpha1.EtcdClusterHealthyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(c.Message).To(ContainSubstring("EtcdadmCluster %s/%s has no status.endpoints yet", ns, ec.GetName()))
			g.Expect(got.Status.Members).To(BeEmpty())
		}, reconcileTimeout).Should(Succeed())

		By("the etcdadm controller writes status.endpoints: the members' client URLs, sorted, comma-separated")
		Expect(unstructured.SetNestedField(ec.Object, strings.Join(x.ClientURLs(), ","), "status", "endpoints")).To(Succeed())
		Expect(unstructured.SetNestedField(ec.Object, true, "status", "ready")).To(Succeed())
		Expect(mgmt.Client.Status().Update(ctx, ec)).To(Succeed())

		By("the status lists the 3 members, healthy, each bound to the etcd Machine whose address its peer URL names")
		want := map[string]string{}
		for i, m := range etcdc.Members() {
			want[m.Name()] = machines[i].Name
		}
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			g.Expect(got.Status.Members).To(HaveLen(3))
			bound := map[string]string{}
			for _, m := range got.Status.Members {
				g.Expect(m.Health).To(Equal(v1alpha1.MemberHealthy), "member %s: %s", m.Name, m.Message)
				bound[m.Name] = m.MachineName
			}
			g.Expect(bound).To(Equal(want))
			g.Expect(got.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(conditionStatus(got, v1alpha1.EtcdClusterHealthyCondition)).To(Equal(metav1.ConditionTrue), fmt.Sprint(findCondition(got, v1alpha1.EtcdClusterHealthyCondition)))
		}, reconcileTimeout).Should(Succeed())

		By("a member stops: deleting the etcd Machine of a healthy member is refused by the quorum guard")
		stopped := etcdc.Members()[2]
		Expect(etcdc.StopMember(ctx, stopped.Name())).To(Succeed())
		Eventually(func() string { return guardVerdict(ctx, machines[0]) }, reconcileTimeout).Should(ContainSubstring("would lose etcd quorum"))
		Expect(guardVerdict(ctx, machines[1])).To(ContainSubstring("would lose etcd quorum"))

		By("as the etcdadm controller scales down (controllers/scale.go removeEtcdMemberAndDeleteMachine): the stopped member is removed by its peer URL, then its Machine is deleted; the guard lets it through")
		cli, err := etcdc.Members()[0].NewClient(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cli.Close)
		list, err := cli.MemberList(ctx)
		Expect(err).NotTo(HaveOccurred())
		var removeID uint64
		for _, m := range list.Members {
			if slices.Contains(m.PeerURLs, stopped.PeerURL()) {
				removeID = m.ID
			}
		}
		Expect(removeID).NotTo(BeZero())
		_, err = cli.MemberRemove(ctx, removeID)
		Expect(err).NotTo(HaveOccurred())
		Expect(deleteMachine(ctx, machines[2])).To(BeEmpty(), "no warning: the Machine hosts no member any more")
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(machines[2]), &clusterv1.Machine{}))
		}, reconcileTimeout).Should(BeTrue(), "Cluster API's Machine controller deletes the etcd Machine")
	})
})

// In mode Manage the etcd Machines carry etcd-adapter's pre-terminate hook. The etcdadm
// controller has no hook of its own: it removes a member by its peer URL and then deletes the
// Machine (aws/etcdadm-controller controllers/scale.go removeEtcdMemberAndDeleteMachine), so its
// scale-down must find the hook released at once, and a deletion by a person must get the
// member removed before the hook goes.
var _ = Describe("External etcd of an EtcdadmCluster in mode Manage", func() {
	It("hooks the etcd Machines; a person's deletion removes the member before the hook goes; the etcdadm controller's own scale-down is not held", func(ctx SpecContext) {
		By("a real 3-member TLS etcd, an EtcdadmCluster with status.endpoints, a KubeadmControlPlane")
		ips := []string{"127.0.0.44", "127.0.0.45", "127.0.0.46"}
		x := startExternalEtcd(ctx, "eadm-m", membersAt("eadm-manage", ips))
		etcdc, cluster := x.Etcd, x.cluster
		ec := createEtcdadmCluster(ctx, cluster)
		Expect(unstructured.SetNestedField(ec.Object, strings.Join(x.ClientURLs(), ","), "status", "endpoints")).To(Succeed())
		Expect(mgmt.Client.Status().Update(ctx, ec)).To(Succeed())
		useKubeadmControlPlane(ctx, cluster, nil)

		By("the Cluster's external ControlPlaneEtcd is switched to mode Manage (the CRD accepts it)")
		cpe := &v1alpha1.ControlPlaneEtcd{}
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cpe)
		}, reconcileTimeout).Should(Succeed())
		Expect(cpe.Spec.Backend).To(Equal(v1alpha1.BackendExternal))
		before2 := cpe.DeepCopy()
		cpe.Spec.Mode = v1alpha1.ModeManage
		cpe.Spec.ObservationInterval = &metav1.Duration{Duration: observationInterval}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before2))).To(Succeed())

		By("three etcd Machines as the etcdadm controller creates them: the webhook puts the pre-terminate hook on each")
		var machines []*clusterv1.Machine
		for i, ip := range ips {
			machines = append(machines, createEtcdMachine(ctx, cluster, ec, fmt.Sprintf("%s-%d", ec.GetName(), i), ip, true))
		}
		ids := map[string]uint64{}
		for i, m := range etcdc.Members() {
			ids[machines[i].Name] = m.ID()
		}
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			g.Expect(got.Status.Members).To(HaveLen(3))
			for _, m := range got.Status.Members {
				g.Expect(m.Health).To(Equal(v1alpha1.MemberHealthy), "member %s: %s", m.Name, m.Message)
				g.Expect(m.MachineName).NotTo(BeEmpty(), "member %s", m.Name)
			}
			c := findCondition(got, v1alpha1.ProgressingCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).NotTo(Equal(v1alpha1.ProgressingModeNotSupportedReason), c.Message)
		}, reconcileTimeout).Should(Succeed())
		cli, err := etcdc.Members()[0].NewClient(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cli.Close)
		memberIDs := func() []uint64 {
			list, err := cli.MemberList(ctx)
			Expect(err).NotTo(HaveOccurred())
			var out []uint64
			for _, m := range list.Members {
				out = append(out, m.ID)
			}
			return out
		}

		By("a person deletes an etcd Machine whose member is healthy: etcd-adapter removes the member from etcd, then releases the hook, and Cluster API deletes the Machine")
		person := machines[2]
		Expect(deleteMachine(ctx, person)).To(BeEmpty(), "3 healthy members: removing one keeps quorum")
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(person), &clusterv1.Machine{})
		}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound))
		Expect(memberIDs()).To(ConsistOf(ids[machines[0].Name], ids[machines[1].Name]), "its member is gone, the other two are kept")
		// Note: the recorder writes Events asynchronously; the Machine going does not wait for them.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, person) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", v1alpha1.EventMemberRemoved), HaveField("Message", ContainSubstring(strconv.FormatUint(ids[person.Name], 16))))),
			"the Machine's own removal flow removed its member")
		got := &v1alpha1.ControlPlaneEtcd{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
		Expect(got.Status.Removal).NotTo(BeNil())
		Expect(got.Status.Removal.MachineName).To(Equal(person.Name))
		Expect(got.Status.Removal.MemberID).To(Equal(strconv.FormatUint(ids[person.Name], 16)))
		Expect(got.Status.Removal.Result).To(Equal(v1alpha1.RemovalRemoved), "confirmed removed before the hook went")
		Eventually(func(g Gomega) {
			got := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
			g.Expect(got.Status.Members).To(HaveLen(2))
			g.Expect(got.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(conditionStatus(got, v1alpha1.AvailableCondition)).To(Equal(metav1.ConditionTrue))
		}, reconcileTimeout).Should(Succeed())

		By("the etcdadm controller scales down (removeEtcdMemberAndDeleteMachine): it removes the member by its peer URL, then deletes the Machine; the hook is released with no second removal")
		scaled := machines[1]
		list, err := cli.MemberList(ctx)
		Expect(err).NotTo(HaveOccurred())
		var removeID uint64
		for _, m := range list.Members {
			if slices.Contains(m.PeerURLs, etcdc.Members()[1].PeerURL()) {
				removeID = m.ID
			}
		}
		Expect(removeID).To(Equal(ids[scaled.Name]))
		_, err = cli.MemberRemove(ctx, removeID)
		Expect(err).NotTo(HaveOccurred())
		Expect(deleteMachine(ctx, scaled)).To(BeEmpty(), "no warning: the Machine hosts no member any more")
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(scaled), &clusterv1.Machine{})
		}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound), "the hook does not hold the etcdadm controller's own deletion")
		Expect(memberIDs()).To(ConsistOf(ids[machines[0].Name]), "the last member is kept")
		// Note: the recorder writes Events asynchronously, HookReleased after the hook went. It
		// writes them in order, and a MemberRemoved of this Machine's flow would be recorded
		// before its HookReleased: once HookReleased is written, such a MemberRemoved would be too.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, scaled) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", v1alpha1.EventHookReleased), HaveField("Message", ContainSubstring("no etcd member belongs to etcd Machine %s", scaled.Name)))))
		Expect(eventsAbout(ctx, scaled)).NotTo(ContainElement(HaveField("Reason", v1alpha1.EventMemberRemoved)), "etcd-adapter removed nothing more")
	}, SpecTimeout(5*time.Minute))
})

// createEtcdMachine creates an etcd Machine of the EtcdadmCluster ec as the etcdadm controller does
// (aws/etcdadm-controller controllers/helpers.go generateMachine: labels cluster-name and
// etcd-cluster, the EtcdadmCluster as controller) on a TestMachine whose status.addresses hold ip
// as an InternalIP, which Cluster API's Machine controller copies to the Machine. hooked says
// whether the Machine hook webhook must have put etcd-adapter's pre-terminate hook on it at
// creation (mode Manage).
func createEtcdMachine(ctx context.Context, cluster *clusterv1.Cluster, ec *unstructured.Unstructured, name, ip string, hooked bool) *clusterv1.Machine {
	m := createEtcdMachineWithoutAddress(ctx, cluster, ec, name, hooked)
	setEtcdMachineAddress(ctx, m, ip)
	return m
}

// createEtcdMachineWithoutAddress creates an etcd Machine and its infrastructure Machine as the
// etcdadm controller does, before the infrastructure provider reports the host's address.
func createEtcdMachineWithoutAddress(ctx context.Context, cluster *clusterv1.Cluster, ec *unstructured.Unstructured, name string, hooked bool) *clusterv1.Machine {
	im := infra.NewMachine(cluster.Namespace, name, "test://etcd/"+name)
	Expect(mgmt.Client.Create(ctx, im)).To(Succeed())
	isController := true
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.Namespace, Name: name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name, backends.EtcdClusterLabel: ec.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: etcdadm.GVK.GroupVersion().String(), Kind: etcdadm.GVK.Kind,
				Name: ec.GetName(), UID: ec.GetUID(), Controller: &isController}},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster.Name,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infra.Group, Kind: infra.MachineKind, Name: name},
		},
	}
	Expect(mgmt.Client.Create(ctx, m)).To(Succeed())
	if hooked {
		Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue), "the webhook hooks the etcd Machine at creation")
	} else {
		Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
	}
	return m
}

// setEtcdMachineAddress reports the host's address on the Machine's infrastructure Machine, as
// the infrastructure provider does, and waits until Cluster API copied it to the Machine.
func setEtcdMachineAddress(ctx context.Context, m *clusterv1.Machine, ip string) {
	im := infra.NewMachine(m.Namespace, m.Spec.InfrastructureRef.Name, "")
	Eventually(func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(im.GroupVersionKind())
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(im), got); err != nil {
			return err
		}
		before := got.DeepCopy()
		if err := unstructured.SetNestedSlice(got.Object, []any{map[string]any{"type": string(clusterv1.MachineInternalIP), "address": ip}}, "status", "addresses"); err != nil {
			return err
		}
		return mgmt.Client.Status().Patch(ctx, got, client.MergeFrom(before))
	}, reconcileTimeout).Should(Succeed())
	Eventually(func(g Gomega) {
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)
		if apierrors.IsNotFound(err) && !m.DeletionTimestamp.IsZero() {
			return // a deleting Machine may go as soon as its address was copied
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m.Status.Addresses).To(ContainElement(HaveField("Address", ip)))
	}, reconcileTimeout).Should(Succeed())
}

// createEtcdadmCluster creates the EtcdadmCluster of the Cluster as the forks' Cluster controller
// links it: named <cluster>-etcd, owned by the Cluster, 3 replicas, no status yet.
func createEtcdadmCluster(ctx context.Context, cluster *clusterv1.Cluster) *unstructured.Unstructured {
	ec := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(3)}}}
	ec.SetGroupVersionKind(etcdadm.GVK)
	ec.SetNamespace(cluster.Namespace)
	ec.SetName(cluster.Name + "-etcd")
	ec.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID}})
	Expect(mgmt.Client.Create(ctx, ec)).To(Succeed())
	return ec
}

// membersAt names len(ips) members <prefix>-<i>, each on its own address: the address of its
// etcd Machine.
func membersAt(prefix string, ips []string) []etcdcluster.MemberSpec {
	specs := etcdcluster.Nodes(prefix, len(ips))
	for i := range specs {
		specs[i].IP = ips[i]
	}
	return specs
}
