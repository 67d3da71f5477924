package k3s

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_withdrawal(t *testing.T) {
	const member, other = "cp-2-1a2b3c4d", "cp-2-99999999"
	k := KeysFor(programK3s)
	m := etcd.Member{ID: MemberID(member), Name: member, NodeName: "cp-2"}
	request := map[string]any{k.Remove: nil, RemovingMemberAnnotation: nil, RemovalRequestedAtAnnotation: nil}
	tests := []struct {
		name        string
		annotations map[string]string
		want        map[string]any
	}{
		{"A Node gone has nothing to withdraw", nil, nil},
		{"A Node without a request or a claim has nothing to withdraw", map[string]string{k.NodeName: member}, nil},
		{"A pending request of this backend is withdrawn", map[string]string{
			k.NodeName: member, k.Remove: "true", RemovingMemberAnnotation: member, RemovalRequestedAtAnnotation: "2026-11-24T16:00:00Z",
		}, request},
		{"A request K3s refused (remove gone) is withdrawn, so a new one can be made", map[string]string{
			k.NodeName: member, RemovingMemberAnnotation: member, RemovalRequestedAtAnnotation: "2026-11-24T16:00:00Z",
		}, request},
		{"A request for another member is left alone", map[string]string{
			k.NodeName: member, k.Remove: "true", RemovingMemberAnnotation: other,
		}, nil},
		{"A claim the member's server disproved (node-name written back) is deleted with the request", map[string]string{
			k.NodeName: member, k.RemovedNodeName: member, RemovingMemberAnnotation: member, RemovalRequestedAtAnnotation: "2026-11-24T16:00:00Z",
		}, map[string]any{k.RemovedNodeName: nil, k.Remove: nil, RemovingMemberAnnotation: nil, RemovalRequestedAtAnnotation: nil}},
		{"A disproved claim made at nobody's recorded request is deleted with remove, which K3s would act on at once", map[string]string{
			k.NodeName: member, k.RemovedNodeName: member, k.Remove: "true",
		}, map[string]any{k.RemovedNodeName: nil, k.Remove: nil}},
		{"A claim whose member no Node names any more may be a real removal and is kept", map[string]string{
			k.RemovedNodeName: member, RemovingMemberAnnotation: member,
		}, nil},
		{"A claim for another member (the Node rejoined) is not this member's to withdraw", map[string]string{
			k.NodeName: member, k.RemovedNodeName: other,
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var n *corev1.Node
			if tt.annotations != nil {
				n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-2", Annotations: tt.annotations}}
			}
			g.Expect(withdrawal(n, m)).To(Equal(tt.want))
		})
	}
}

// TestBackend_RemoveMember_rejectionConfirmedLive: a cache that has not seen a withdrawal still
// shows the stopped attempt's record; RemoveMember re-reads the Node before it reports Rejected,
// so the new attempt is asked instead of being refused by the old one's annotations.
func TestBackend_RemoveMember_rejectionConfirmedLive(t *testing.T) {
	g := NewWithT(t)
	const version = "v1.34.2+k3s1"
	healthy := voter(ReasonMemberNotLearner, "", testNow)
	nodes := func(target *corev1.Node) []client.Object {
		return []client.Object{etcdNodeObj("cp-0", version, "cp-0-00000000", healthy), etcdNodeObj("cp-1", version, "cp-1-11111111", healthy), target}
	}
	member := "cp-2-22222222"
	// The stopped attempt: K3s refused and deleted remove; the record stays.
	stale := etcdNodeObj("cp-2", version, member, healthy, recorded(member, testNow.Add(-time.Hour)))
	withdrawn := etcdNodeObj("cp-2", version, member, healthy)
	live := fake.NewClientBuilder().WithObjects(nodes(withdrawn)...).Build()
	cache := fake.NewClientBuilder().WithObjects(nodes(stale)...).Build()
	b, err := New(Config{Client: live, Reader: cache, Now: func() time.Time { return testNow }})
	g.Expect(err).ToNot(HaveOccurred())

	r, err := b.RemoveMember(context.Background(), etcd.Member{ID: MemberID(member), Name: member, NodeName: "cp-2"})
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalInProgress), "reason: %s", r.Reason)
	got := &corev1.Node{}
	g.Expect(live.Get(context.Background(), client.ObjectKey{Name: "cp-2"}, got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKeyWithValue(k3sKeys.Remove, "true"), "the new attempt is asked")
}
