package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// installCore installs the core provider with the operator: a CoreProvider cluster-api of the
// Cluster API version of go.mod, from a ConfigMap holding Cluster API's metadata.yaml and its
// CRDs with one Deployment. No Deployment controller runs in the test environment; once the
// operator installed it, the test sets the Deployment's Available condition as that controller
// would, and waits for the operator's health check to call the CoreProvider Ready, which the
// operator requires before installing any other provider.
func installCore(ctx context.Context, t *testing.T, m *env.Management) {
	t.Helper()
	g := NewWithT(t)
	crdDir, err := capi.CoreCRDDir()
	g.Expect(err).NotTo(HaveOccurred())
	moduleDir := filepath.Join(crdDir, "..", "..", "..", "..")
	_, version, _ := strings.Cut(filepath.Base(moduleDir), "@")
	g.Expect(version).To(HavePrefix("v"), "Cluster API's version from its module directory %s", moduleDir)
	metadata, err := os.ReadFile(filepath.Join(moduleDir, "metadata.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	docs := []string{coreDeployment(version)}
	entries, err := os.ReadDir(crdDir)
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(crdDir, e.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		docs = append(docs, string(b))
	}
	g.Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: coreNamespace}})).To(Succeed())
	cm, err := sourceConfigMap(coreNamespace, coreName, version, []byte(strings.Join(docs, "\n---\n")), metadata)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Client.Create(ctx, cm)).To(Succeed())
	core := newProvider("CoreProvider", coreNamespace, coreName, version)
	g.Expect(m.Client.Create(ctx, core)).To(Succeed())
	waitInstalled(ctx, t, m.Client, core, version)

	// The operator applies the components again from its cache right after the install; the
	// status is written on the Deployment it re-read.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: coreNamespace, Name: coreDeploymentName}, d); err != nil {
			return err
		}
		g.Expect(d.OwnerReferences).To(ContainElement(HaveField("Kind", "CoreProvider")), "the health check finds the CoreProvider by the Deployment's owner")
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 1, 1, 1, 1
		d.Status.Conditions = []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
			Message: "Deployment has minimum availability.", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		return m.Client.Status().Update(ctx, d)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(core), core)).To(Succeed())
		g.Expect(condition(core, clusterv1.ReadyCondition)).To(HaveKeyWithValue("status", "True"))
	}, installTimeout, 200*time.Millisecond).Should(Succeed(), "the operator's health check calls the CoreProvider Ready")
}

// coreDeployment is the core provider's Deployment as the components of a Cluster API release
// name it.
func coreDeployment(version string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  selector:
    matchLabels:
      cluster.x-k8s.io/provider: cluster-api
  template:
    metadata:
      labels:
        cluster.x-k8s.io/provider: cluster-api
    spec:
      containers:
      - name: manager
        image: registry.k8s.io/cluster-api/cluster-api-controller:%[3]s
`, coreDeploymentName, coreNamespace, version)
}
