// Package docblock runs the documentation's shell blocks as the pages give them: a block is
// taken from a page's ```sh fences unchanged (Blocks) and run with bash and the test assets'
// kubectl against a test apiserver. test/docs, test/operator and hack/release-manifests use it.
package docblock

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// ShellBlock returns the one shell block (```sh, ```bash or ```shell, indented or not) of
// docsDir/page that contains s, as the page gives it. Tests select the blocks they run with it
// and with string literals for page and s, which test/docs' TestEveryShellBlockIsRun reads.
func ShellBlock(g gomega.Gomega, docsDir, page, s string) string {
	doc, err := os.ReadFile(filepath.Join(docsDir, page))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var found []string
	for _, b := range Blocks(string(doc)) {
		if b.Shell() && strings.Contains(b.Body, s) {
			found = append(found, b.Body)
		}
	}
	g.Expect(found).To(gomega.HaveLen(1), "%s has one shell block with %q", page, s)
	return found[0]
}

// stepStart matches the comment that opens a numbered step of a block: "# 3. Stop the manager".
var stepStart = regexp.MustCompile(`^# (\d+)\. `)

// Steps splits a block whose steps are opened by "# N. " comments into the text of each step,
// keyed by N; a step runs to the next one.
func Steps(g gomega.Gomega, block string) map[string]string {
	out := map[string]string{}
	current := ""
	for _, line := range strings.Split(block, "\n") {
		if m := stepStart.FindStringSubmatch(line); m != nil {
			current = m[1]
		}
		g.Expect(current).NotTo(gomega.BeEmpty(), "the block opens with a numbered step: %q", line)
		out[current] += line + "\n"
	}
	return out
}

// Shell runs the docs' blocks with bash and kubectl v1.36.3 from the test assets on the PATH,
// against a test apiserver, in a HOME of its own (kubectl's discovery cache).
type Shell struct {
	kubeconfig string
	home       string
	path       string
}

// NewShell writes a kubeconfig for cfg and finds kubectl in the test assets.
func NewShell(t testing.TB, g gomega.Gomega, cfg *rest.Config) *Shell {
	t.Helper()
	assets, err := env.AssetsDir()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	kubectl := filepath.Join(assets, "kubectl")
	// A missing kubectl is an error, never a skip: `make envtest-assets` builds it.
	g.Expect(kubectl).To(gomega.BeAnExistingFile(), "kubectl in the test assets (run `make envtest-assets`)")
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	g.Expect(WriteKubeconfig(cfg, kubeconfig)).To(gomega.Succeed())
	return &Shell{kubeconfig: kubeconfig, home: home, path: assets + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// Run runs script, unchanged, with bash (-e, -u, pipefail) after prelude (for example a
// stand-in for clusterctl, or a cd) and returns its standard output; a failing script fails
// the test.
func (s *Shell) Run(g gomega.Gomega, prelude, script string) string {
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+prelude+"\n"+script)
	cmd.Env = []string{"KUBECONFIG=" + s.kubeconfig, "HOME=" + s.home, "PATH=" + s.path}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the docs' commands:\n%s\nfailed:\n%s%s", script, stdout.String(), stderr.String())
	return stdout.String()
}

// Clusterctl returns the clusterctl binary of the test assets (Cluster API's, at the version
// hack/tools/clusterctl names), which NewShell puts on the PATH. A missing clusterctl fails the
// test, never skips it: `make envtest-assets` builds it.
func Clusterctl(g gomega.Gomega) string {
	assets, err := env.AssetsDir()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	clusterctl := filepath.Join(assets, "clusterctl")
	g.Expect(clusterctl).To(gomega.BeAnExistingFile(), "clusterctl in the test assets (run `make envtest-assets`)")
	return clusterctl
}

// WriteKubeconfig writes a kubeconfig for cfg (a client certificate of system:masters) whose
// context has no namespace, as an administrator's usually has none but default.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("failed to write the kubeconfig %s: %w", path, err)
	}
	return nil
}
