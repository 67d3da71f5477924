package etcd

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheckMembers(t *testing.T) {
	many := func(n int) []Member {
		out := make([]Member, n)
		for i := range out {
			out[i] = Member{ID: uint64(i + 1), Name: "m", ClientURLs: []string{"https://10.0.0.1:2379"}}
		}
		return out
	}
	urls := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "https://" + strings.Repeat("a", size-len("https://"))
		}
		return out
	}
	tests := []struct {
		name    string
		members []Member
		tooLong bool
	}{
		{name: "no member list", members: nil},
		{name: "MaxMembers members are read", members: many(MaxMembers)},
		{name: "one member more is too large", members: many(MaxMembers + 1), tooLong: true},
		{name: "a name of MaxMemberNameBytes is read", members: []Member{{ID: 1, Name: strings.Repeat("n", MaxMemberNameBytes)}}},
		{name: "a longer name is too large", members: []Member{{ID: 1, Name: strings.Repeat("n", MaxMemberNameBytes+1)}}, tooLong: true},
		{name: "MaxMemberURLs client URLs are read", members: []Member{{ID: 1, ClientURLs: urls(MaxMemberURLs, MaxURLBytes)}}},
		{name: "more client URLs are too large", members: []Member{{ID: 1, ClientURLs: urls(MaxMemberURLs+1, 20)}}, tooLong: true},
		{name: "more peer URLs are too large", members: []Member{{ID: 1, PeerURLs: urls(MaxMemberURLs+1, 20)}}, tooLong: true},
		{name: "a longer URL is too large", members: []Member{{ID: 1, PeerURLs: urls(1, MaxURLBytes+1)}}, tooLong: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckMembers(tt.members)
			if !tt.tooLong {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ErrTooLarge))
			g.Expect(errors.Is(err, ErrInvalidInput)).To(BeTrue(), "too large is bad input: retrying will not help")
		})
	}
}
