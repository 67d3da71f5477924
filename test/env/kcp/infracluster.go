package kcp

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// ClusterKind is the test infrastructure cluster. The Cluster needs one: without an
// infrastructure reference Cluster API v1.14.2's Cluster controller never sets the Cluster's
// InfrastructureReady condition True (core/reconcilers/cluster/cluster_controller_status.go,
// setInfrastructureReadyCondition), and the MachineHealthCheck controller evaluates no Machine
// until it is (core/reconcilers/machinehealthcheck/machinehealthcheck_targets.go,
// needsRemediation), so nothing would ever be remediated.
const ClusterKind = "TestCluster"

const clusterPlural = "testclusters"

// ClusterCRD returns the CustomResourceDefinition of TestCluster, labelled with the v1beta2
// contract version.
func ClusterCRD() *apiextensionsv1.CustomResourceDefinition {
	open := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   clusterPlural + "." + infra.Group,
			Labels: map[string]string{clusterv1.GroupVersion.String(): infra.Version},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: infra.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: ClusterKind, ListKind: ClusterKind + "List", Plural: clusterPlural, Singular: "testcluster",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: infra.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"kind":       {Type: "string"},
						"metadata":   {Type: "object"},
						"spec":       {Type: "object", XPreserveUnknownFields: &open},
						"status":     {Type: "object", XPreserveUnknownFields: &open},
					},
				}},
			}},
		},
	}
}

func newTestCluster(namespace, name string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(infra.GroupVersion.WithKind(ClusterKind))
	c.SetNamespace(namespace)
	c.SetName(name)
	c.Object["spec"] = map[string]any{}
	return c
}

// clusterProvisioner reports every TestCluster provisioned at once.
type clusterProvisioner struct {
	client client.Client
}

func (p *clusterProvisioner) setupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("kcp-testcluster").For(newTestCluster("", "")).Complete(p); err != nil {
		return fmt.Errorf("failed to set up the %s provisioner: %w", ClusterKind, err)
	}
	return nil
}

// Reconcile sets status.initialization.provisioned.
func (p *clusterProvisioner) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := newTestCluster(req.Namespace, req.Name)
	if err := p.client.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if provisioned, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "provisioned"); provisioned {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedField(c.Object, true, "status", "initialization", "provisioned"); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to set status of %s %s: %w", ClusterKind, req, err)
	}
	if err := p.client.Status().Update(ctx, c); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to mark %s %s provisioned: %w", ClusterKind, req, err)
	}
	return ctrl.Result{}, nil
}
