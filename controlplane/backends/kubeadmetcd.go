package backends

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// KubeadmControlPlaneKind is Cluster API's KubeadmControlPlane kind.
const KubeadmControlPlaneKind = "KubeadmControlPlane"

// externalEtcdPath is where a KubeadmControlPlane says its etcd is external. The path is the same
// in KubeadmControlPlane v1beta1 and v1beta2 (Cluster API api/bootstrap/kubeadm/v1beta2
// ExternalEtcd: `json:"external,omitempty,omitzero"`, so the field is absent unless set).
var externalEtcdPath = []string{"spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd", "external"}

// KubeadmEtcd is how a KubeadmControlPlane runs etcd.
type KubeadmEtcd struct {
	// External is true when spec.kubeadmConfigSpec.clusterConfiguration.etcd.external is set:
	// etcd runs outside the control-plane Machines, and KCP skips every etcd check.
	External bool
	// Endpoints are external.endpoints, the members' client URLs the apiserver uses.
	Endpoints []string
}

// KubeadmEtcdOf reads how the KubeadmControlPlane obj runs etcd. An external etcd without
// endpoints, or with endpoints that are not a list of strings, is an error wrapping
// etcd.ErrInvalidInput (with External still true): which members to ask is then not known, and
// nothing is guessed.
func KubeadmEtcdOf(obj *unstructured.Unstructured) (KubeadmEtcd, error) {
	ext, found, err := unstructured.NestedFieldNoCopy(obj.Object, externalEtcdPath...)
	if err != nil {
		return KubeadmEtcd{}, fmt.Errorf("%w: KubeadmControlPlane %s: failed to read spec.kubeadmConfigSpec.clusterConfiguration.etcd.external: %w",
			etcd.ErrInvalidInput, client.ObjectKeyFromObject(obj), err)
	}
	if !found || ext == nil {
		return KubeadmEtcd{}, nil
	}
	endpoints, _, err := unstructured.NestedStringSlice(obj.Object, append(externalEtcdPath, "endpoints")...)
	if err != nil {
		return KubeadmEtcd{External: true}, fmt.Errorf("%w: KubeadmControlPlane %s: spec.kubeadmConfigSpec.clusterConfiguration.etcd.external.endpoints is not a list of URLs: %w",
			etcd.ErrInvalidInput, client.ObjectKeyFromObject(obj), err)
	}
	if len(endpoints) == 0 {
		return KubeadmEtcd{External: true}, fmt.Errorf("%w: KubeadmControlPlane %s: spec.kubeadmConfigSpec.clusterConfiguration.etcd.external lists no endpoints",
			etcd.ErrInvalidInput, client.ObjectKeyFromObject(obj))
	}
	return KubeadmEtcd{External: true, Endpoints: endpoints}, nil
}
