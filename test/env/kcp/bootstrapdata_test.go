package kcp

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// initCloudConfig is the shape of the kubeadm bootstrap provider's cloud-config, cut down.
const initCloudConfig = `## template: jinja
#cloud-config

write_files:
-   path: /etc/kubernetes/pki/etcd/ca.crt
    owner: root:root
    permissions: '0640'
    content: |
      CERT
-   path: /etc/kubernetes/pki/etcd/ca.key
    owner: root:root
    permissions: '0600'
    content: |
      KEY
-   path: /run/kubeadm/kubeadm.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: ClusterConfiguration
      clusterName: kcp
      kubernetesVersion: v1.36.3
      
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
runcmd:
  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
`

func TestParseBootstrapDataInit(t *testing.T) {
	g := NewWithT(t)
	bd, err := parseBootstrapData([]byte(initCloudConfig))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bd.Init).To(BeTrue())
	cfg, err := bd.clusterConfiguration()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(HavePrefix("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration"))
	g.Expect(cfg).NotTo(ContainSubstring("InitConfiguration"))
	crt, key, err := bd.etcdCA()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(crt)).To(Equal("CERT\n"))
	g.Expect(string(key)).To(Equal("KEY\n"))
}

func TestParseBootstrapDataJoin(t *testing.T) {
	g := NewWithT(t)
	bd, err := parseBootstrapData([]byte("#cloud-config\nruncmd:\n  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bd.Init).To(BeFalse())
	_, _, err = bd.etcdCA()
	g.Expect(err).To(HaveOccurred())
}

func TestParseBootstrapDataNeither(t *testing.T) {
	g := NewWithT(t)
	_, err := parseBootstrapData([]byte("#cloud-config\nruncmd:\n  - echo hello\n"))
	g.Expect(err).To(MatchError(ContainSubstring("kubeadm init")))
}

func Test_joinOrderOf(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		want workload.JoinOrder
	}{
		{"v1.36 has ControlPlaneKubeletLocalMode GA: etcd first", "kubernetesVersion: v1.36.3\n", workload.JoinEtcdFirst},
		{"v1.34 with the gate on by default: etcd first", "kubernetesVersion: v1.34.1\n", workload.JoinEtcdFirst},
		{"v1.34 with the gate off: Node first", "kubernetesVersion: v1.34.1\nfeatureGates:\n  ControlPlaneKubeletLocalMode: false\n", workload.JoinNodeFirst},
		{"v1.32 with the gate off by default: Node first", "kubernetesVersion: v1.32.4\n", workload.JoinNodeFirst},
		{"v1.32 with the gate on, as KubeadmControlPlane sets it from v1.31: etcd first", "kubernetesVersion: v1.32.4\nfeatureGates:\n  ControlPlaneKubeletLocalMode: true\n", workload.JoinEtcdFirst},
		{"v1.30 has no such gate: Node first", "kubernetesVersion: v1.30.2\nfeatureGates:\n  ControlPlaneKubeletLocalMode: true\n", workload.JoinNodeFirst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := joinOrderOf(tt.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
	t.Run("A ClusterConfiguration without a version is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := joinOrderOf("clusterName: kcp\n")
		g.Expect(err).To(MatchError(ContainSubstring("kubernetesVersion")))
	})
}
