package controlplaneetcd

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/internal/setby"
)

// checkClusterID decides whether the etcd this pass observed is the one whose cluster ID
// status.clusterID recorded (checkClusterID). The backend keeps the cluster ID it saw first
// only in memory: after a restart of etcd-adapter, or endpoints that now reach another Cluster's
// etcd whose CA signed the same client certificate, it would take that etcd for this Cluster's.
// A change is recorded as a Warning Event once, when first seen; a person's acceptance
// (v1alpha1.AcceptClusterIDAnnotation) as a Warning Event naming who set the annotation, and the
// annotation is taken off with the pass's patch.
func (r *Reconciler) checkClusterID(s *scope) {
	observed := ""
	if s.snapshot != nil {
		observed = clusterID(s.snapshot)
	}
	wasRefused := conditions.GetReason(s.cpe, v1alpha1.ClusterIDMatchedCondition) == v1alpha1.ClusterIDChangedReason
	s.clusterID = checkClusterID(clusterIDInput{Recorded: s.cpe.Status.ClusterID, Observed: observed,
		Accepted: s.cpe.Annotations[v1alpha1.AcceptClusterIDAnnotation], Object: "ControlPlaneEtcd " + s.cpe.Name})
	switch {
	case s.clusterID.Accepted:
		msg := fmt.Sprintf("%s; %s", s.clusterID.Condition.Message, setby.Annotation(s.cpe, v1alpha1.AcceptClusterIDAnnotation))
		delete(s.cpe.Annotations, v1alpha1.AcceptClusterIDAnnotation)
		r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventClusterIDAccepted, msg)
	case s.clusterID.Refuse && !wasRefused:
		r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventClusterIDChanged, s.clusterID.Condition.Message)
	}
}

// holdForClusterID keeps the hook of every held Machine while the etcd answering is not the one
// recorded, and says so in Progressing. What releases a hook without looking at etcd still does,
// one Machine per pass: a person's release annotation, the Cluster or its control plane being
// deleted.
func (r *Reconciler) holdForClusterID(ctx context.Context, s *scope, held []*clusterv1.Machine) (ctrl.Result, error) {
	var names []string
	for _, m := range held {
		if why := releaseWithoutRemoval(s, m); why != "" {
			return s.requeue(), r.releaseUnremoved(ctx, s, m, why)
		}
		names = append(names, m.Name)
	}
	if len(names) > 0 {
		s.progressing = progressingTrue(v1alpha1.ProgressingRemovalBlockedReason, fmt.Sprintf("Machines %s keep their hooks: %s",
			strings.Join(names, ", "), s.clusterID.Condition.Message))
	}
	return s.requeue(), nil
}
