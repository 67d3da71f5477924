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
// /containerLogs/{namespace}/{pod}/{container} (k8s.io/kubernetes v1.36.3
// pkg/kubelet/server/server.go getContainerLogs).
const containerLogsPath = "/containerLogs/"

// containerLog is what the stand-in serves as a container's log: the running instance's, and
// the last terminated instance's (what `kubectl logs --previous` asks for).
type containerLog struct {
	current, previous string
	hasPrevious       bool
}

// SetLog makes the stand-in serve current as the log of container in Pod namespace/pod on its
// Node, and previous as the log of its last terminated instance. A container the stand-in has
// no log for serves an empty log, and a --previous request for it fails, as the kubelet's does
// for a container that never restarted.
func (k *Kubelet) SetLog(namespace, pod, container, current, previous string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.logs == nil {
		k.logs = map[string]containerLog{}
	}
	k.logs[namespace+"/"+pod+"/"+container] = containerLog{current: current, previous: previous, hasPrevious: true}
}

// serveContainerLogs answers a pods/log request the apiserver passed on: the container must be
// in the spec of a Pod bound to this Node; previous and tailLines are honoured as the kubelet
// does, the other options are not.
func (k *Kubelet) serveContainerLogs(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, containerLogsPath), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		http.Error(w, fmt.Sprintf("invalid container logs path %q", req.URL.Path), http.StatusBadRequest)
		return
	}
	pod := &corev1.Pod{}
	if err := k.client.Get(req.Context(), client.ObjectKey{Namespace: parts[0], Name: parts[1]}, pod); err != nil || pod.Spec.NodeName != k.opts.NodeName {
		http.Error(w, fmt.Sprintf("pod %q does not exist", parts[1]), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, parts[2]) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", parts[2], parts[1]), http.StatusNotFound)
		return
	}
	k.mu.Lock()
	l := k.logs[strings.Join(parts, "/")]
	k.mu.Unlock()
	text := l.current
	if req.URL.Query().Get("previous") == "true" {
		if !l.hasPrevious {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", parts[2], parts[1]), http.StatusBadRequest)
			return
		}
		text = l.previous
	}
	if s := req.URL.Query().Get("tailLines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("invalid tailLines %q", s), http.StatusBadRequest)
			return
		}
		text = tail(text, n)
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(text))
}

// hasContainer reports whether the Pod's spec has a container of that name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.Name == name {
			return true
		}
	}
	return false
}

// tail returns the last n lines of a log whose lines end in a newline.
func tail(log string, n int) string {
	lines := strings.SplitAfter(log, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}
