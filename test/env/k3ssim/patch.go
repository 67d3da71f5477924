package k3ssim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jsonPatch is an RFC 6902 patch. K3s writes each annotation outcome as one patch (k3s
// pkg/etcd/member_controller.go), so an observer never sees a half-written result.
type jsonPatch []map[string]any

// annotationPath escapes an annotation key into a JSON pointer.
func annotationPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// sameVersion makes the patch fail when the Node changed since it was read, so a decision is
// never applied to a Node it was not made on (the sync is requeued instead).
func sameVersion(node *corev1.Node) jsonPatch {
	return jsonPatch{{"op": "test", "path": "/metadata/resourceVersion", "value": node.ResourceVersion}}
}

func (p jsonPatch) add(key, value string) jsonPatch {
	return append(p, map[string]any{"op": "add", "path": annotationPath(key), "value": value})
}

func (p jsonPatch) remove(key string) jsonPatch {
	return append(p, map[string]any{"op": "remove", "path": annotationPath(key)})
}

// apply sends the patch for node.
func (p jsonPatch) apply(ctx context.Context, c client.Client, node *corev1.Node) error {
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to marshal JSON patch for Node %s: %w", node.Name, err)
	}
	if err := c.Patch(ctx, node, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("failed to patch annotations of Node %s: %w", node.Name, err)
	}
	return nil
}
