package fake

import (
	"context"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Maintenance is the scripted maintenance of a Cluster: Defragment and DisarmAlarms run safe on
// AtCall (ObserveResponse when nil), as the backends run it on the observation made right before
// the call, and return their Response/Error pair when it lets them go.
type Maintenance struct {
	// AtCall, when set, is the observation made right before a maintenance call, in place of
	// ObserveResponse: etcd changed between the pass's observation and the call.
	AtCall *etcd.Snapshot

	DefragmentResponse etcd.Defragmentation
	DefragmentError    error
	DisarmError        error

	// Defragmented records every Defragment call that safe let go.
	Defragmented []etcd.Member
	// Disarmed records every DisarmAlarms call that safe let go.
	Disarmed [][]etcd.ActiveAlarm
}

// Defragment runs safe on AtCall (or ObserveResponse), records the call and returns DefragmentResponse (its
// Member set to m) and DefragmentError.
func (c *Cluster) Defragment(_ context.Context, m etcd.Member, safe func(*etcd.Snapshot) error) (etcd.Defragmentation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := safe(c.atCall()); err != nil {
		return etcd.Defragmentation{}, err
	}
	c.Defragmented = append(c.Defragmented, m)
	d := c.DefragmentResponse
	d.Member = m
	return d, c.DefragmentError
}

// DisarmAlarms runs safe on AtCall (or ObserveResponse), records the call and returns DisarmError.
func (c *Cluster) DisarmAlarms(_ context.Context, alarms []etcd.ActiveAlarm, safe func(*etcd.Snapshot) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := safe(c.atCall()); err != nil {
		return err
	}
	c.Disarmed = append(c.Disarmed, alarms)
	return c.DisarmError
}

func (c *Cluster) atCall() *etcd.Snapshot {
	if c.AtCall != nil {
		return c.AtCall
	}
	return c.ObserveResponse
}
