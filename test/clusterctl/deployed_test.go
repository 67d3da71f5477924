package clusterctl

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/cmd/etcd-adapter/manager"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

// replica is one Pod of the rendered Deployment, run as a manager process: its container's
// arguments and environment, its volumes as local directories, its ports as local ones (a Pod has
// a network namespace of its own; processes share the host's).
type replica struct {
	*managerproc.Process
	// ports maps the container's ports (by number) to the local address serving them.
	ports map[int32]string
}

// addr returns the local address of the container port named name.
func (r *replica) addr(d *appsv1.Deployment, name string) string {
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == name {
			return r.ports[p.ContainerPort]
		}
	}
	return ""
}

// startReplica runs the manager binary as the Deployment's Pod would run it: the container's
// args and env as clusterctl rendered them, each Secret volume a directory kept in step with its
// Secret (the kubelet's part), each emptyDir an empty directory, and the in-cluster defaults an
// out-of-cluster process lacks given as flags: the webhook certificate directory (the
// manager's default path is where the Deployment mounts it), the leader election namespace
// (in a Pod controller-runtime reads it from the service account's namespace file) and the
// loopback host of the webhook server. Its log is logs/name.log.
func (m *management) startReplica(ctx context.Context, t *testing.T, bin managerproc.Binary, d *appsv1.Deployment, logs, name string) *replica {
	t.Helper()
	g := NewWithT(t)
	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	root := t.TempDir()
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		dir := filepath.Join(root, vm.Name)
		g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
		mounts[filepath.Clean(vm.MountPath)] = dir
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				m.syncSecretVolume(ctx, t, d.Namespace, v.Secret.SecretName, dir)
			}
		}
	}
	r := &replica{ports: map[int32]string{}}
	for _, p := range c.Ports {
		addr, err := managerproc.FreeAddr()
		g.Expect(err).NotTo(HaveOccurred())
		r.ports[p.ContainerPort] = addr
	}
	args := make([]string, 0, len(c.Args)+3)
	for _, a := range c.Args {
		args = append(args, localArg(a, mounts, r.ports))
	}
	certDir, ok := mounts[filepath.Clean(manager.DefaultWebhookCertDir)]
	g.Expect(ok).To(BeTrue(), "the Deployment mounts the webhook certificate where the manager reads it by default")
	args = append(args, "--webhook-cert-dir="+certDir, "--webhook-host=127.0.0.1", "--leader-elect-namespace="+d.Namespace)
	env := make([]string, 0, len(c.Env))
	for _, e := range c.Env {
		g.Expect(e.ValueFrom).To(BeNil(), "env %s: only literal values are run here", e.Name)
		env = append(env, e.Name+"="+e.Value)
	}
	p, err := bin.Start(ctx, managerproc.Options{Log: filepath.Join(logs, name+".log"), Args: args, Env: env, AsDeployed: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Kill() })
	r.Process = p
	return r
}

// localArg rewrites one container argument for a local process: a mount path becomes its
// directory, a container port (":8443", or the bare number of --webhook-port) its local address
// or port.
func localArg(a string, mounts map[string]string, ports map[int32]string) string {
	for path, dir := range mounts {
		a = strings.ReplaceAll(a, path, dir)
	}
	flag, value, ok := strings.Cut(a, "=")
	if !ok {
		return a
	}
	for port, addr := range ports {
		p := strconv.Itoa(int(port))
		switch value {
		case ":" + p:
			return flag + "=" + addr
		case p:
			_, local, _ := net.SplitHostPort(addr)
			return flag + "=" + local
		}
	}
	return a
}

// serviceBackends returns the Service's address (ClusterIP:port, what kube-apiserver dials) and
// the local addresses of replicas' container port it targets.
func (m *management) serviceBackends(ctx context.Context, g Gomega, d *appsv1.Deployment, name string, replicas ...*replica) (string, []string) {
	s := &corev1.Service{}
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, s)).To(Succeed())
	g.Expect(s.Spec.ClusterIP).NotTo(BeEmpty(), "kube-apiserver gave Service %s a ClusterIP", name)
	g.Expect(s.Spec.Ports).To(HaveLen(1))
	sp := s.Spec.Ports[0]
	var backends []string
	for _, r := range replicas {
		var addr string
		if sp.TargetPort.Type == intstr.String {
			addr = r.addr(d, sp.TargetPort.StrVal)
		} else {
			addr = r.ports[sp.TargetPort.IntVal]
		}
		g.Expect(addr).NotTo(BeEmpty(), "Service %s targets a port of the Deployment's container", name)
		backends = append(backends, addr)
	}
	return net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(sp.Port))), backends
}

// logDir is a directory for the processes' logs: ARTIFACTS when set, else a temporary directory
// kept (and named in the test's output) when the test fails.
func logDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("ARTIFACTS"); dir != "" {
		d := filepath.Join(dir, t.Name())
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	d, err := os.MkdirTemp("", "etcd-adapter-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the processes' logs are kept in %s", d)
			return
		}
		_ = os.RemoveAll(d)
	})
	return d
}

// describe names a replica for messages.
func (r *replica) String() string { return fmt.Sprintf("manager pid %d", r.Pid()) }
