package kubelet

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// containerLogsPath is the prefix the apiserver uses for pods/log:
// /containerLogs/{namespace}/{pod}/{container} (k8s.io/kubernetes pkg/kubelet/server/server.go,
// getContainerLogs).
const containerLogsPath = "/containerLogs/"

// logKey names the log of one instance of a container: the running one, or the previous one
// (`kubectl logs --previous`).
type logKey struct {
	namespace, pod, container string
	previous                  bool
}

// WriteContainerLog sets the log the stand-in serves for a container of a Pod on its Node, as
// the container runtime would have written it; previous sets the log of the instance before
// the last restart. A container with no log written serves an empty log, and one with no
// previous log refuses --previous, as the kubelet does for a container that never restarted.
func (k *Kubelet) WriteContainerLog(namespace, pod, container string, previous bool, log string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.logs == nil {
		k.logs = map[logKey]string{}
	}
	k.logs[logKey{namespace: namespace, pod: pod, container: container, previous: previous}] = log
}

// serveContainerLogs answers pods/log for a Pod on this Node with the log written for it,
// honouring the previous and tailLines options (the kubelet's own answers for a missing Pod,
// container and previous instance, k8s.io/kubernetes pkg/kubelet/server/server.go and
// pkg/kubelet/kuberuntime/kuberuntime_container.go, GetContainerLogs).
func (k *Kubelet) serveContainerLogs(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, containerLogsPath), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		http.Error(w, fmt.Sprintf("invalid container logs path %q", req.URL.Path), http.StatusBadRequest)
		return
	}
	pod := &corev1.Pod{}
	err := k.client.Get(req.Context(), client.ObjectKey{Namespace: parts[0], Name: parts[1]}, pod)
	if err != nil || pod.Spec.NodeName != k.opts.NodeName {
		http.Error(w, fmt.Sprintf("pod %q does not exist", parts[1]), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, parts[2]) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", parts[2], parts[1]), http.StatusNotFound)
		return
	}
	query := req.URL.Query()
	key := logKey{namespace: parts[0], pod: parts[1], container: parts[2], previous: query.Get("previous") == "true"}
	k.mu.Lock()
	log, ok := k.logs[key]
	k.mu.Unlock()
	if !ok && key.previous {
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", key.container, key.pod), http.StatusBadRequest)
		return
	}
	if tail := query.Get("tailLines"); tail != "" {
		n, err := strconv.Atoi(tail)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("invalid tailLines %q", tail), http.StatusUnprocessableEntity)
			return
		}
		log = lastLines(log, n)
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(log))
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// lastLines returns the last n lines of log, each with its newline.
func lastLines(log string, n int) string {
	lines := strings.SplitAfter(log, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}
