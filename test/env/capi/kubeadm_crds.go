package capi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// kubeadmCRDFiles are the CRD manifests of KubeadmControlPlane and of the kubeadm bootstrap
// provider, relative to the cluster-api module.
var kubeadmCRDFiles = []string{
	"controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
	"controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanetemplates.yaml",
	"bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml",
	"bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
}

// kubeadmContractVersion is the version of the kubeadm kinds that implements the v1beta2 contract.
const kubeadmContractVersion = "v1beta2"

// KubeadmCRDs returns the CRDs of KubeadmControlPlane and KubeadmConfig (with their templates)
// from the cluster-api module the code is built with, labelled
// `cluster.x-k8s.io/v1beta2: v1beta2` as the providers' kustomizations label them.
//
// Note: the label is not in the base manifests; without it Cluster API cannot tell which version
// of a kind implements the contract and the Cluster and Machine controllers refuse the references.
func KubeadmCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := moduleDir()
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range kubeadmCRDFiles {
		crd, err := readCRD(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[clusterv1.GroupVersion.String()] = kubeadmContractVersion
		crd.SetLabels(labels)
		crds = append(crds, crd)
	}
	return crds, nil
}

// readCRD decodes the one CRD in a manifest file.
func readCRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read CRD manifest (try `go mod download %s`): %w", modulePath, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	if err := dec.Decode(crd); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("failed to decode CRD manifest %s: %w", path, err)
	}
	if crd.Name == "" {
		return nil, fmt.Errorf("failed to decode CRD manifest %s: no CustomResourceDefinition in it", path)
	}
	return crd, nil
}
