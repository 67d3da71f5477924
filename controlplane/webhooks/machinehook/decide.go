package machinehook

import (
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// decision is what the webhook does with one new control-plane or etcd Machine.
type decision struct {
	// addHook puts the pre-terminate hook on the Machine.
	addHook bool
	// why is logged with the decision.
	why string
	// warning, when set, is returned to the client as an admission warning.
	warning string
}

// etcdMachineFacts are what a new etcd Machine's hook depends on beyond its Cluster's
// ControlPlaneEtcd.
type etcdMachineFacts struct {
	// etcdCluster is the Machine's cluster.x-k8s.io/etcd-cluster label: its EtcdadmCluster.
	etcdCluster string
	// owned is the EtcdadmCluster the Cluster owns, "" when it owns none.
	owned string
}

// decide says whether a new control-plane Machine of cluster gets the hook, or, with etcd set,
// a new etcd Machine of an EtcdadmCluster (label cluster.x-k8s.io/etcd-cluster, no control-plane
// label). cpe is the Cluster's ControlPlaneEtcd, nil when it has none (yet): then,
// for a Cluster this manager handles, the creation controller's rule says which mode it is going
// to get. For a Cluster outside this manager's --watch-filter or --namespace only an existing
// ControlPlaneEtcd counts: it shows that a manager handles the Cluster and will release the hook,
// which the default rule cannot show. embedded is true when the Cluster's control-plane object
// carries hook.EmbeddedRemovalAnnotation: its provider removes members, and no Machine gets
// etcd-adapter's hook. It is pure, so every rule has its own test.
func decide(cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, handled bool, etcd *etcdMachineFacts, embedded bool) decision {
	if !cluster.DeletionTimestamp.IsZero() {
		// The hook would be released without a removal anyway (nothing to keep quorum for).
		return decision{why: "the Cluster is being deleted"}
	}
	if etcd != nil {
		return decideEtcdMachine(cpe, *etcd)
	}
	if embedded {
		// Note: the ControlPlaneEtcd controller observes such a Cluster only and takes the hook
		// off; adding it would only make that controller take it off again.
		return decision{why: fmt.Sprintf("the Cluster's %s has annotation %s: its provider removes etcd members itself", cluster.Spec.ControlPlaneRef.Kind, hook.EmbeddedRemovalAnnotation)}
	}
	if cpe != nil {
		if !cpe.Spec.Backend.HostsMembersOnControlPlaneMachines() {
			// Its members run on no control-plane Machine: a hook would wait for no removal.
			return decision{why: fmt.Sprintf("ControlPlaneEtcd %s has backend %s, whose members run on no control-plane Machine", cpe.Name, cpe.Spec.Backend)}
		}
		if cpe.Spec.Mode == v1alpha1.ModeManage {
			return decision{addHook: true, why: fmt.Sprintf("ControlPlaneEtcd %s is in mode %s", cpe.Name, cpe.Spec.Mode)}
		}
		return decision{why: fmt.Sprintf("ControlPlaneEtcd %s is in mode %s", cpe.Name, cpe.Spec.Mode)}
	}
	if !handled {
		why := fmt.Sprintf("Cluster %s is outside this etcd-adapter manager's --watch-filter or --namespace and has no ControlPlaneEtcd yet", cluster.Name)
		return decision{why: why, warning: why + "; the pre-terminate hook is not added now, and is added by the manager that handles the Cluster"}
	}
	d, ok := creation.DefaultFor(cluster)
	switch {
	case !ok:
		return decision{why: fmt.Sprintf("the Cluster has no ControlPlaneEtcd and gets none by default (control plane %q, or opted out)", cluster.Spec.ControlPlaneRef.Kind)}
	case d.Mode != v1alpha1.ModeManage:
		return decision{why: fmt.Sprintf("the ControlPlaneEtcd the Cluster gets by default for %s is in mode %s", cluster.Spec.ControlPlaneRef.Kind, d.Mode)}
	}
	return decision{addHook: true, why: fmt.Sprintf("the ControlPlaneEtcd the Cluster gets by default for %s is in mode %s", cluster.Spec.ControlPlaneRef.Kind, d.Mode)}
}

// decideEtcdMachine says whether a new etcd Machine gets the hook: only when the Cluster's
// ControlPlaneEtcd exists, has backend external and is in mode Manage, and the Machine belongs to
// the EtcdadmCluster the Cluster owns: the controller releases hooks only on that EtcdadmCluster's
// Machines, so a hook on any other would never be released. The ControlPlaneEtcd an
// EtcdadmCluster's Cluster gets by default is in mode Observe, so without one there is no hook.
// Note: the etcdadm controller removes a member itself before it deletes its Machine
// (aws/etcdadm-controller controllers/scale.go removeEtcdMemberAndDeleteMachine), so the hook
// holds its own scale-down no longer than one pass of the ControlPlaneEtcd controller.
func decideEtcdMachine(cpe *v1alpha1.ControlPlaneEtcd, etcd etcdMachineFacts) decision {
	switch {
	case cpe == nil:
		return decision{why: "the Cluster has no ControlPlaneEtcd yet, and the one an EtcdadmCluster's Cluster gets by default is in mode Observe"}
	case cpe.Spec.Backend != v1alpha1.BackendExternal:
		return decision{why: fmt.Sprintf("ControlPlaneEtcd %s has backend %s, whose members run on no etcd Machine", cpe.Name, cpe.Spec.Backend)}
	case cpe.Spec.Mode != v1alpha1.ModeManage:
		return decision{why: fmt.Sprintf("ControlPlaneEtcd %s is in mode %s", cpe.Name, cpe.Spec.Mode)}
	case etcd.owned == "":
		why := fmt.Sprintf("the etcd Machine's Cluster owns no EtcdadmCluster, so no manager releases a hook on the Machines of EtcdadmCluster %s", etcd.etcdCluster)
		return decision{why: why, warning: why + "; etcd-adapter did not add its pre-terminate hook"}
	case etcd.etcdCluster != etcd.owned:
		why := fmt.Sprintf("the etcd Machine belongs to EtcdadmCluster %s, not to %s, the one its Cluster owns", etcd.etcdCluster, etcd.owned)
		return decision{why: why, warning: why + "; etcd-adapter did not add its pre-terminate hook"}
	}
	return decision{addHook: true, why: fmt.Sprintf("ControlPlaneEtcd %s of the etcd Machine's Cluster has backend %s and is in mode %s", cpe.Name, cpe.Spec.Backend, cpe.Spec.Mode)}
}
