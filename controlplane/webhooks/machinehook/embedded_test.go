package machinehook

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// rke2ControlPlaneGVK is cluster-api-provider-rke2's control-plane kind, installed here without
// its schema (TestWebhook's cases create no object of it, so they are unchanged).
var rke2ControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta1", Kind: "RKE2ControlPlane"}

func installRKE2ControlPlaneCRD(ctx context.Context, g Gomega) {
	gvk := rke2ControlPlaneGVK
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "rke2controlplanes." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind, ListKind: gvk.Kind + "List", Plural: "rke2controlplanes", Singular: "rke2controlplane"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}}},
		},
	}
	if err := apiServer.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return apiServer.Client.List(ctx, list)
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
}

// TestWebhook_embeddedRemoval: a control-plane Machine of a Cluster whose RKE2ControlPlane says its
// provider removes members itself gets no etcd-adapter hook, even with a ControlPlaneEtcd in
// Manage; without the annotation it gets it.
func TestWebhook_embeddedRemoval(t *testing.T) {
	tests := []struct {
		name     string
		annotate bool
		wantHook bool
	}{
		{name: "with the annotation: no hook", annotate: true},
		{name: "without it: the hook, as mode Manage asks", wantHook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			installRKE2ControlPlaneCRD(ctx, g)
			ns := createNamespace(ctx, g)
			cluster := createCluster(ctx, g, ns, rke2ControlPlaneGVK.Kind, nil, false)
			cp := &unstructured.Unstructured{}
			cp.SetGroupVersionKind(rke2ControlPlaneGVK)
			cp.SetNamespace(ns)
			cp.SetName(cluster.Spec.ControlPlaneRef.Name)
			if tt.annotate {
				cp.SetAnnotations(map[string]string{hook.EmbeddedRemovalAnnotation: hook.PreTerminateHookPrefix + "/rke2-etcd"})
			}
			g.Expect(apiServer.Client.Create(ctx, cp)).To(Succeed())
			createControlPlaneEtcd(ctx, g, cluster, v1alpha1.ModeManage)

			c, warnings := warningClient(g)
			m := newMachine(ns, "m", cluster.Name, true)
			g.Expect(c.Create(ctx, m)).To(Succeed())
			if tt.wantHook {
				g.Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
			} else {
				g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			}
			g.Expect(warnings.list()).To(BeEmpty())
		})
	}
}
