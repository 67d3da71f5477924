package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/test/env/docblock"
)

// makeCall is one `make` the block ran: its arguments, the FLEET_* variables of its environment
// and the commands `make -n` printed for them.
type makeCall struct {
	args     []string
	fleetEnv []string
	commands []string
}

// runMakeBlock runs a block of `make` commands, as the page gives it, with bash (-e, -u,
// pipefail) in the repository, where a shell function `make` stands in for make: it records its
// arguments and the FLEET_* variables it was given, and runs the real make with -n.
//
// What runs: bash runs the block; the real make reads the Makefile (its $(shell ...) functions
// run, so `go list ./...` does), and prints the commands of the targets and of their
// prerequisites without running them; a recipe line naming $(MAKE) (test-modules) runs, with -n
// again. What does not run: no recipe: no demo, no test, no benchmark, no build.
func runMakeBlock(t *testing.T, g Gomega, block string) []makeCall {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	g.Expect(err).NotTo(HaveOccurred())
	rec := t.TempDir()
	prelude := `cd ` + root + `
n=0
make() {
  n=$((n+1))
  printf '%s\n' "$@" > ` + rec + `/$n.args
  { env | grep '^FLEET_' | sort || true; } > ` + rec + `/$n.env
  command make -n "$@" > ` + rec + `/$n.out
}
`
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+prelude+block)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	g.Expect(cmd.Run()).To(Succeed(), "the block:\n%s\nfailed:\n%s", block, out.String())

	var calls []makeCall
	for i := 1; ; i++ {
		args, err := os.ReadFile(filepath.Join(rec, strconv.Itoa(i)+".args"))
		if os.IsNotExist(err) {
			return calls
		}
		g.Expect(err).NotTo(HaveOccurred())
		env, err := os.ReadFile(filepath.Join(rec, strconv.Itoa(i)+".env"))
		g.Expect(err).NotTo(HaveOccurred())
		commands, err := os.ReadFile(filepath.Join(rec, strconv.Itoa(i)+".out"))
		g.Expect(err).NotTo(HaveOccurred())
		calls = append(calls, makeCall{args: strings.Fields(string(args)), fleetEnv: strings.Fields(string(env)), commands: lines(string(commands))})
	}
}

// cleanEnv is this process's environment without make's own variables (when `make test` runs
// this test) or FLEET_* settings: the block's make sees only what the block sets.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL" || strings.HasPrefix(name, "FLEET_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestReadmeMakeBlock runs README.md's block (`make run`, `make test`) with make -n
// (runMakeBlock): `make run` is the demo's binary, and `make test` tests every package of the
// main module (so this one too) and the nested modules, after building the test binaries.
func TestReadmeMakeBlock(t *testing.T) {
	g := NewWithT(t)
	block := docblock.ShellBlock(g, repoRoot, "README.md", "make test")
	calls := runMakeBlock(t, g, block)
	g.Expect(calls).To(HaveLen(2))

	g.Expect(calls[0].args).To(Equal([]string{"run"}))
	g.Expect(calls[0].commands).To(Equal([]string{"go run ./test/demo/cmd/etcd-adapter-demo"}))
	g.Expect(filepath.Join(repoRoot, "test", "demo", "cmd", "etcd-adapter-demo", "main.go")).To(BeAnExistingFile())

	g.Expect(calls[1].args).To(Equal([]string{"test"}))
	var goTest string
	for _, c := range calls[1].commands {
		// The main module's go test; the nested modules' is in a loop of its own.
		if strings.Contains(c, " go test ") && !strings.Contains(c, "for m in") {
			g.Expect(goTest).To(BeEmpty(), "one go test of the main module")
			goTest = c
		}
	}
	g.Expect(goTest).To(HavePrefix(`KUBEBUILDER_ASSETS="$(hack/build-assets.sh `), "the test binaries are built first")
	g.Expect(goTest).To(HaveSuffix(" -count=1 -timeout 70m"))
	pkgs := goList(g)
	g.Expect(pkgs).To(ContainElement("github.com/etcd-adapter/etcd-adapter/test/docs"))
	tested := map[string]bool{}
	for _, f := range strings.Fields(goTest) {
		tested[strings.Replace(f, "./", "github.com/etcd-adapter/etcd-adapter/", 1)] = true
	}
	for _, p := range pkgs {
		g.Expect(tested).To(HaveKey(p), "make test tests %s", p)
	}
	g.Expect(calls[1].commands).To(ContainElement(ContainSubstring("for m in pkg/etcd pkg/k3s examples/k3sprovider; do")),
		"make test tests the nested modules")
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lines(string(ci))).To(ContainElement("make test"), "`.ci/run` runs exactly this")
}

// goList lists the packages of the main module.
func goList(g Gomega) []string {
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = repoRoot
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred())
	return lines(string(out))
}

// fleetSetting matches a FLEET_* variable a block sets.
var fleetSetting = regexp.MustCompile(`\bFLEET_\w+=[^\s;]+`)

// TestBenchmarksFleetBlock runs docs/benchmarks.md's 1,000-Cluster block with make -n
// (runMakeBlock): make bench-fleet is the fleet benchmark's go test, which make runs with the
// environment it was given (GNU make passes it to recipes), so the block's FLEET_* settings
// reach the benchmark: the Makefile sets none of them, and test/fleetbench reads each.
func TestBenchmarksFleetBlock(t *testing.T) {
	g := NewWithT(t)
	block := docblock.ShellBlock(g, filepath.Join(repoRoot, "docs"), "benchmarks.md", "make bench-fleet")
	want := fleetSetting.FindAllString(block, -1)
	g.Expect(want).To(ContainElement("FLEET_SHARE=100"))
	sort.Strings(want)

	calls := runMakeBlock(t, g, block)
	g.Expect(calls).To(HaveLen(1))
	g.Expect(calls[0].args).To(Equal([]string{"bench-fleet"}))
	g.Expect(calls[0].fleetEnv).To(Equal(want), "make is given the block's settings")
	g.Expect(calls[0].commands).To(ContainElement(MatchRegexp(
		`^KUBEBUILDER_ASSETS="\$\(hack/build-assets.sh [^)]*\)" go test ./test/fleetbench -run '\^\$' -bench BenchmarkFleet -benchtime 1x -count=1 -timeout \d+m$`)))
	g.Expect(strings.Join(calls[0].commands, "\n")).NotTo(ContainSubstring("FLEET_"), "make overrides no FLEET_ setting")

	read := fleetbenchReads(g)
	for _, kv := range want {
		name, _, _ := strings.Cut(kv, "=")
		g.Expect(read).To(HaveKey(name), "test/fleetbench reads %s", name)
	}
}

// fleetbenchRead matches test/fleetbench reading a setting: os.Getenv("FLEET_X"), or
// fleetInts(b, "FLEET_X", ...), which reads os.Getenv(name).
var fleetbenchRead = regexp.MustCompile(`(?:os\.Getenv\(|fleetInts\(b, )"(FLEET_\w+)"`)

// fleetbenchReads returns the FLEET_* settings test/fleetbench's Go source reads.
func fleetbenchReads(g Gomega) map[string]bool {
	files, err := filepath.Glob(filepath.Join(repoRoot, "test", "fleetbench", "*.go"))
	g.Expect(err).NotTo(HaveOccurred())
	var src strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		src.Write(data)
	}
	g.Expect(src.String()).To(MatchRegexp(`func fleetInts\(b \*testing.B, name string[^{]*\{\n\ts := os.Getenv\(name\)`))
	read := map[string]bool{}
	for _, m := range fleetbenchRead.FindAllStringSubmatch(src.String(), -1) {
		read[m[1]] = true
	}
	return read
}
