package hookbench

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
