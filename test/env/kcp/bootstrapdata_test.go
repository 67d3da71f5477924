package kcp

import (
	"testing"

	. "github.com/onsi/gomega"
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
