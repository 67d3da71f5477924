package kcp

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// kubeadmConfigPath is where the kubeadm bootstrap provider's cloud-config writes the kubeadm
// configuration that `kubeadm init` / `kubeadm join` read.
const kubeadmConfigPath = "/run/kubeadm/kubeadm.yaml"

// etcdCA paths are where the cloud-config writes the etcd CA for kubeadm.
const (
	etcdCACertPath = "/etc/kubernetes/pki/etcd/ca.crt"
	etcdCAKeyPath  = "/etc/kubernetes/pki/etcd/ca.key"
)

// bootstrapData is what the provisioner reads from a Machine's cloud-config: whether it runs
// `kubeadm init` or `kubeadm join`, and the files it writes.
type bootstrapData struct {
	Init  bool
	files map[string]string
}

type cloudConfig struct {
	WriteFiles []struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"write_files"`
	RunCmd []any `json:"runcmd"`
}

// parseBootstrapData reads the kubeadm bootstrap provider's cloud-config.
func parseBootstrapData(data []byte) (*bootstrapData, error) {
	cc := cloudConfig{}
	if err := yaml.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("failed to parse the bootstrap cloud-config: %w", err)
	}
	bd := &bootstrapData{files: map[string]string{}}
	for _, f := range cc.WriteFiles {
		bd.files[f.Path] = f.Content
	}
	cmds := fmt.Sprint(cc.RunCmd...)
	switch {
	case strings.Contains(cmds, "kubeadm init"):
		bd.Init = true
	case strings.Contains(cmds, "kubeadm join"):
	default:
		return nil, fmt.Errorf("failed to find `kubeadm init` or `kubeadm join` in the bootstrap cloud-config runcmd")
	}
	return bd, nil
}

// clusterConfiguration returns the ClusterConfiguration document of the kubeadm config, which
// `kubeadm init` uploads to the kubeadm-config ConfigMap.
func (bd *bootstrapData) clusterConfiguration() (string, error) {
	for _, doc := range strings.Split(bd.files[kubeadmConfigPath], "\n---") {
		if strings.Contains(doc, "kind: ClusterConfiguration") {
			return strings.TrimPrefix(strings.TrimSpace(doc), "---\n"), nil
		}
	}
	return "", fmt.Errorf("failed to find a ClusterConfiguration in %s of the bootstrap data", kubeadmConfigPath)
}

// etcdCA returns the etcd CA certificate and key the cloud-config writes for kubeadm.
func (bd *bootstrapData) etcdCA() (certPEM, keyPEM []byte, err error) {
	c, k := bd.files[etcdCACertPath], bd.files[etcdCAKeyPath]
	if c == "" || k == "" {
		return nil, nil, fmt.Errorf("failed to find the etcd CA (%s, %s) in the bootstrap data", etcdCACertPath, etcdCAKeyPath)
	}
	return []byte(c), []byte(k), nil
}
