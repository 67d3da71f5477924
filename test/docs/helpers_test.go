package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// docsDir is the repository's docs directory, from this package's directory.
var docsDir = filepath.Join("..", "..", "docs")

// shellBlock returns the one ```sh block of docs/<page> that contains s, as the page gives it.
func shellBlock(g Gomega, page, s string) string {
	doc, err := os.ReadFile(filepath.Join(docsDir, page))
	g.Expect(err).NotTo(HaveOccurred())
	var found []string
	for _, p := range strings.Split(string(doc), "```sh\n")[1:] {
		block, _, _ := strings.Cut(p, "```")
		if strings.Contains(block, s) {
			found = append(found, block)
		}
	}
	g.Expect(found).To(HaveLen(1), "docs/%s has one sh block with %q", page, s)
	return found[0]
}

// stepStart matches the comment that opens a numbered step of a block: "# 3. Stop the manager".
var stepStart = regexp.MustCompile(`^# (\d+)\. `)

// steps splits a block whose steps are opened by "# N. " comments into the text of each step,
// keyed by N; a step runs to the next one.
func steps(g Gomega, block string) map[string]string {
	out := map[string]string{}
	current := ""
	for _, line := range strings.Split(block, "\n") {
		if m := stepStart.FindStringSubmatch(line); m != nil {
			current = m[1]
		}
		g.Expect(current).NotTo(BeEmpty(), "the block opens with a numbered step: %q", line)
		out[current] += line + "\n"
	}
	return out
}

// fill replaces the placeholders of a block (<ns>, <machine>) with the names of this test's objects.
func fill(block string, values map[string]string) string {
	for k, v := range values {
		block = strings.ReplaceAll(block, k, v)
	}
	return block
}

// shell runs the docs' blocks with bash and kubectl v1.36.3 from the test assets on the PATH,
// against the test apiserver, in a HOME of its own (kubectl's discovery cache).
type shell struct {
	kubeconfig string
	home       string
	path       string
}

// newShell writes a kubeconfig for cfg and finds kubectl in the test assets.
func newShell(t *testing.T, g Gomega, cfg *rest.Config) *shell {
	assets, err := env.AssetsDir()
	g.Expect(err).NotTo(HaveOccurred())
	kubectl := filepath.Join(assets, "kubectl")
	// A missing kubectl is an error, never a skip: `make envtest-assets` builds it.
	g.Expect(kubectl).To(BeAnExistingFile(), "kubectl in the test assets (run `make envtest-assets`)")
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	g.Expect(writeKubeconfig(cfg, kubeconfig)).To(Succeed())
	return &shell{kubeconfig: kubeconfig, home: home, path: assets + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// run runs script, unchanged, with bash (-e, -u, pipefail) after prelude (for example a
// stand-in for clusterctl) and returns its standard output; a failing script fails the test.
func (s *shell) run(g Gomega, prelude, script string) string {
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+prelude+"\n"+script)
	cmd.Env = []string{"KUBECONFIG=" + s.kubeconfig, "HOME=" + s.home, "PATH=" + s.path}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	g.Expect(err).NotTo(HaveOccurred(), "the docs' commands:\n%s\nfailed:\n%s%s", script, stdout.String(), stderr.String())
	return stdout.String()
}

// writeKubeconfig writes a kubeconfig for cfg (a client certificate of system:masters) whose
// context has no namespace, as an administrator's usually has none but default.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}
