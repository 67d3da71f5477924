package handback

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// apiServer is a real apiserver with Cluster API's, the test infrastructure's and etcd-adapter's
// CRDs, for the tests that run Reconcile against it.
var apiServer *env.APIServer

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	crdDir, err := capi.CoreCRDDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := env.Scheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	apiServer, err = env.StartAPIServer(env.APIServerOptions{
		Scheme:            s,
		CRDs:              []*apiextensionsv1.CustomResourceDefinition{infra.MachineCRD()},
		CRDDirectoryPaths: []string{crdDir, filepath.Join("..", "..", "..", "config", "crd", "bases")},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start the apiserver: %v\n", err)
		return 1
	}
	defer func() {
		if err := apiServer.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop the apiserver: %v\n", err)
		}
	}()
	return m.Run()
}
