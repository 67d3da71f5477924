package docs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// TestRunbookPodCommands runs docs/runbooks.md's block that diagnoses a manager Pod that is not
// Ready (describe, the last log lines of every replica, the log of the last crash) against two
// Pods made from the manager Deployment's Pod template (config/manager/manager.yaml), bound to a
// Node whose kubelet stand-in serves their logs through the apiserver's pods/log. One replica
// crashed once: its previous container logged the panic.
func TestRunbookPodCommands(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(server.Stop()).To(Succeed()) })
	k, err := kubelet.Start(ctx, kubelet.Options{NodeName: "mgmt-0", Config: server.Config})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(k.Stop()).To(Succeed()) })

	g.Expect(server.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}})).To(Succeed())
	template := managerPodTemplate(g)
	pods := []string{managerDeployment + "-7d9f8b6c5-crash", managerDeployment + "-7d9f8b6c5-steady"}
	for _, name := range pods {
		pod := &corev1.Pod{ObjectMeta: *template.ObjectMeta.DeepCopy(), Spec: *template.Spec.DeepCopy()}
		pod.Namespace, pod.Name, pod.Spec.NodeName = managerNamespace, name, k.NodeName()
		g.Expect(server.Client.Create(ctx, pod)).To(Succeed())
		k.WriteContainerLog(managerNamespace, name, "manager", false, logLines(name, 150))
	}
	k.WriteContainerLog(managerNamespace, pods[0], "manager", true, "panic: runtime error: invalid memory address\n")

	block := shellBlock(g, "runbooks.md", "logs <pod> --previous")
	out := docblock.NewShell(t, g, server.Config).Run(g, "", fill(block, map[string]string{"<pod>": pods[0]}))

	for _, name := range pods {
		g.Expect(out).To(ContainSubstring("Name:         "+name), "describe shows every manager Pod")
		prefixed := fmt.Sprintf("[pod/%s/manager] ", name)
		g.Expect(strings.Count(out, prefixed)).To(Equal(100), "the last 100 lines of %s, each with its Pod", name)
		g.Expect(out).To(ContainSubstring(prefixed + name + " line 150\n"))
		g.Expect(out).NotTo(ContainSubstring(prefixed + name + " line 50\n"))
	}
	g.Expect(out).To(HaveSuffix("panic: runtime error: invalid memory address\n"), "the log of the crashed container")
}

// managerPodTemplate returns a Pod template with the labels and containers of the manager
// Deployment's in config/manager/manager.yaml: the labels the runbook selects by, the container it
// logs. (The file holds clusterctl variables, so only those fields are read.)
func managerPodTemplate(g Gomega) corev1.PodTemplateSpec {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var d struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
					Spec struct {
						Containers []struct {
							Name string `json:"name"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		g.Expect(decoder.Decode(&d)).To(Succeed(), "config/manager/manager.yaml has the manager Deployment")
		if d.Kind != "Deployment" {
			continue
		}
		template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: d.Spec.Template.Metadata.Labels}}
		for _, c := range d.Spec.Template.Spec.Containers {
			template.Spec.Containers = append(template.Spec.Containers, corev1.Container{Name: c.Name, Image: "registry.example.com/etcd-adapter:v0.1.0"})
		}
		return template
	}
}

// logLines is a log of n numbered lines.
func logLines(pod string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s line %d\n", pod, i)
	}
	return b.String()
}
