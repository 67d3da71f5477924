// Package samples_test checks the example manifests of config/samples against a real
// kube-apiserver with etcd-adapter's and Cluster API's CRDs installed.
package samples_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// providerSamples are the ControlPlaneEtcd examples the docs point at, one per provider, and the
// opt-out Cluster; a missing one fails the test, so the docs' links cannot rot.
var providerSamples = []string{
	"controlplaneetcd-kcp-stacked.yaml",
	"controlplaneetcd-kcp-external.yaml",
	"controlplaneetcd-k3s.yaml",
	"controlplaneetcd-rke2.yaml",
	"controlplaneetcd-etcdadm.yaml",
	"cluster-opt-out.yaml",
}

// TestSamples_validate creates every object of every config/samples/*.yaml as a server-side dry
// run with strict field validation, so a field the CRD does not know, a value its enums or CEL
// rules refuse, or a missing required field fails the test; nothing is stored.
func TestSamples_validate(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	for _, name := range providerSamples {
		g.Expect(name).To(BeAnExistingFile(), "config/samples has the sample the docs link to")
	}
	files, err := filepath.Glob("*.yaml")
	g.Expect(err).NotTo(HaveOccurred())

	capiCRDs, err := capi.CoreCRDDir()
	g.Expect(err).NotTo(HaveOccurred())
	server, err := env.StartAPIServer(env.APIServerOptions{
		CRDDirectoryPaths: []string{filepath.Join("..", "crd", "bases"), capiCRDs},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(server.Stop()).To(Succeed()) })

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "samples"}}
	g.Expect(server.Client.Create(ctx, ns)).To(Succeed())
	strict := client.WithFieldValidation(server.Client, metav1.FieldValidationStrict)

	for _, file := range files {
		objs, err := decode(file)
		g.Expect(err).NotTo(HaveOccurred(), "%s is YAML", file)
		g.Expect(objs).NotTo(BeEmpty(), "%s holds an object", file)
		for _, o := range objs {
			o.SetNamespace(ns.Name)
			g.Expect(strict.Create(ctx, o, client.DryRunAll)).To(Succeed(),
				"%s: %s %s is accepted by the apiserver", file, o.GetKind(), o.GetName())
		}
	}
}

// decode reads every YAML document of a file as an object.
func decode(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		o := &unstructured.Unstructured{}
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		// Note: a kustomization.yaml is the kustomize CLI's input, not an object of the apiserver.
		if len(o.Object) == 0 || strings.TrimSpace(o.GetKind()) == "" || o.GetKind() == "Kustomization" {
			continue
		}
		objs = append(objs, o)
	}
}
