package kubelet

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncPods acts on every Pod bound to the Node: it finishes graceful deletions and reports
// the others Running and Ready.
func (k *Kubelet) syncPods(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := k.client.List(ctx, pods, client.MatchingFields{"spec.nodeName": k.opts.NodeName}); err != nil {
		return fmt.Errorf("failed to list Pods on Node %s: %w", k.opts.NodeName, err)
	}
	var errs []error
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			errs = append(errs, k.finishDeletion(ctx, pod))
			continue
		}
		errs = append(errs, k.markRunning(ctx, pod))
	}
	return errors.Join(errs...)
}

// finishDeletion deletes the Pod with grace period 0, as a kubelet does once the Pod's
// containers stopped. The UID precondition keeps it from deleting a re-created Pod.
func (k *Kubelet) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	err := k.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("failed to finish deletion of Pod %s: %w", client.ObjectKeyFromObject(pod), err)
	}
	return nil
}

// markRunning reports the Pod Running and Ready unless it already is.
func (k *Kubelet) markRunning(ctx context.Context, pod *corev1.Pod) error {
	if isRunningAndReady(pod) {
		return nil
	}
	setRunning(&pod.Status, pod.Spec.Containers, k.opts.NodeIP)
	if err := k.client.Status().Update(ctx, pod); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("failed to update Pod %s status: %w", client.ObjectKeyFromObject(pod), err))
	}
	return nil
}

// isRunningAndReady reports whether the Pod is Running with a true Ready condition.
func isRunningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setRunning writes a Running, Ready status with one running container status per container,
// on the host network of the Node whose address is ip.
func setRunning(status *corev1.PodStatus, containers []corev1.Container, ip string) {
	now := metav1.Now()
	status.Phase = corev1.PodRunning
	status.HostIP = ip
	status.HostIPs = []corev1.HostIP{{IP: ip}}
	status.PodIP = ip
	status.PodIPs = []corev1.PodIP{{IP: ip}}
	status.StartTime = &now
	status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		status.Conditions = append(status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	status.ContainerStatuses = nil
	for _, c := range containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// ptrTo returns a pointer to v.
func ptrTo[T any](v T) *T { return &v }
