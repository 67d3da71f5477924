package operator

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// clusterctlObjects returns the objects `clusterctl init --addon etcd-adapter:<version>` creates
// from r with variables in clusterctl.yaml: clusterctl's own library (the main module's Cluster
// API version) reads the release from a local repository, renders the variables and adds its
// labels, as init does before it applies them.
func clusterctlObjects(ctx context.Context, t *testing.T, r release, version string, variables map[string]string) []unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	// clusterctl reads ~/.config/cluster-api (its overrides folder) and ~/.cluster-api; keep them
	// out of the test.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	cfg := map[string]any{
		"providers": []map[string]string{{
			"name": addon, "type": string(clusterctlv1.AddonProviderType),
			"url": "file://" + filepath.Join(r.dir, "addon-components.yaml"),
		}},
	}
	for k, v := range variables {
		cfg[k] = v
	}
	b, err := yaml.Marshal(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	configFile := filepath.Join(t.TempDir(), "clusterctl.yaml")
	g.Expect(os.WriteFile(configFile, b, 0o600)).To(Succeed())
	c, err := clusterctlclient.New(ctx, configFile)
	g.Expect(err).NotTo(HaveOccurred())
	components, err := c.GetProviderComponents(ctx, addon, clusterctlv1.AddonProviderType, clusterctlclient.ComponentsOptions{
		Version: version, TargetNamespace: addonNamespace,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return components.Objs()
}

// expectSameAsClusterctl checks that every object clusterctl init would create from the same
// release and variables is in m holding all of its rendered content (labels, annotations and
// every field; what the apiserver and the operator add on top, such as defaults and owner
// references, is left alone), and that m holds no other object of those kinds with the
// addon's provider label. The Namespace is the exception: the operator installs into the
// provider's own namespace, which exists before it, and does not apply the components'.
func expectSameAsClusterctl(ctx context.Context, g Gomega, m *env.Management, want []unstructured.Unstructured) {
	kinds := map[string]unstructured.Unstructured{}
	names := map[string]bool{}
	for _, w := range want {
		if w.GetKind() == "Namespace" {
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(w.GroupVersionKind())
		key := client.ObjectKeyFromObject(&w)
		g.Expect(m.Client.Get(ctx, key, got)).To(Succeed(), "%s %s", w.GetKind(), key)
		wantMeta := map[string]any{}
		for _, field := range []string{"labels", "annotations"} {
			wantMeta[field], _, _ = unstructured.NestedFieldNoCopy(w.Object, "metadata", field)
		}
		g.Expect(contains(wantMeta, got.Object["metadata"], w.GetKind()+" "+key.String()+".metadata")).To(Succeed())
		for k, v := range w.Object {
			if k == "metadata" || k == "status" {
				continue
			}
			g.Expect(contains(v, got.Object[k], w.GetKind()+" "+key.String()+"."+k)).To(Succeed())
		}
		kinds[w.GetAPIVersion()+"/"+w.GetKind()] = w
		// The live object's key: clusterctl sets the target namespace also on kinds it does not know
		// to be cluster-scoped (ValidatingAdmissionPolicyBinding), which the apiserver stores without.
		names[w.GetKind()+" "+client.ObjectKeyFromObject(got).String()] = true
	}
	for _, w := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(w.GroupVersionKind().GroupVersion().WithKind(w.GetKind() + "List"))
		g.Expect(m.Client.List(ctx, list, client.MatchingLabels{clusterv1.ProviderNameLabel: addonLabel})).To(Succeed())
		for i := range list.Items {
			key := w.GetKind() + " " + client.ObjectKeyFromObject(&list.Items[i]).String()
			g.Expect(names).To(HaveKey(key), "an object clusterctl init would not create")
		}
	}
}
