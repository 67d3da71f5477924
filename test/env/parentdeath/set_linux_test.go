package parentdeath

import (
	"os/exec"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSet(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Set(cmd)
	g.Expect(cmd.SysProcAttr.Pdeathsig).To(Equal(syscall.SIGKILL))
	g.Expect(cmd.SysProcAttr.Setpgid).To(BeTrue(), "the other attributes are kept")
}
