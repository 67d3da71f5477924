package quorumguard

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// clusterTurn lets the requests of one Cluster that reach this process be decided one at a time,
// so that they do not race each other on the admission record; the record (admissionRecord)
// is what serialises admissions across replicas.
type clusterTurn struct {
	// token holds one value while a request of the Cluster is being decided.
	token chan struct{}
}

// maxRecordAttempts bounds how often one request decides again after another replica recorded
// an admission of the same Cluster first.
const maxRecordAttempts = 5

// takeTurn waits until no other request of the Cluster is being decided, at most TurnTimeout.
func (g *Guard) takeTurn(ctx context.Context, key client.ObjectKey) (*clusterTurn, bool) {
	g.mu.Lock()
	if g.clusters == nil {
		g.clusters = map[client.ObjectKey]*clusterTurn{}
	}
	turn, ok := g.clusters[key]
	if !ok {
		turn = &clusterTurn{token: make(chan struct{}, 1)}
		g.clusters[key] = turn
	}
	g.mu.Unlock()
	wait := g.TurnTimeout
	if wait <= 0 {
		wait = DefaultTurnTimeout
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case turn.token <- struct{}{}:
		return turn, true
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil, false
}

func (g *Guard) endTurn(turn *clusterTurn) { <-turn.token }

// decideInTurn decides while holding the Cluster's turn: it sees every deletion under way, the
// ones the apiserver shows and the ones any replica of the guard recorded as admitted that it
// does not show yet. An admission counts only once recorded: when another replica recorded one
// since the record was read, the decision is made again on the new record.
func (g *Guard) decideInTurn(ctx context.Context, d deletion, dryRun bool) outcome {
	if d.skip {
		// Note: a skipped deletion is still recorded as admitted, so the deletions after it count
		// its member as going; it goes through unchecked even when the record cannot be written.
		out := allowedWithWarning(d.cpe, v1alpha1.EventQuorumGuardSkipped, skipped(d.m))
		if !dryRun {
			if err := g.recordSkipped(ctx, d); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Failed to record a deletion let through by skip-quorum-guard", "Machine", klog.KObj(d.m))
			}
		}
		return out
	}
	snap, observeErr := g.observe(ctx, d.cluster, d.cpe)
	for attempt := 1; ; attempt++ {
		rec, machines, out, ok := g.readState(ctx, d.cluster, d.cpe, d.hosts)
		if !ok {
			return out
		}
		now := time.Now()
		out = g.project(d, machines, rec.underWay(machines, d.m, now), snap, observeErr)
		if !out.resp.Allowed || dryRun {
			return out
		}
		err := g.writeRecord(ctx, d.cluster, rec, d.m, machines, now)
		switch {
		case err == nil:
			return out
		case !lostRace(err):
			return outcome{cpe: d.cpe, resp: admission.Errored(http.StatusInternalServerError, err)}
		case attempt == maxRecordAttempts:
			return outcome{cpe: d.cpe, resp: admission.Denied(fmt.Sprintf(
				"other deletions of control-plane Machines of Cluster %s kept being admitted by the etcd quorum guard while this one was checked; try again", d.cluster.Name))}
		}
	}
}

// readState reads the admission record and the Machines whose members are projected; when it
// cannot, the outcome refuses the deletion (ok false): without them the deletions under way are
// not known.
func (g *Guard) readState(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, hosts []client.ListOption) (*admissionRecord, []clusterv1.Machine, outcome, bool) {
	rec, err := g.readRecord(ctx, cluster)
	if err != nil {
		return nil, nil, outcome{cpe: cpe, resp: admission.Errored(http.StatusInternalServerError, err)}, false
	}
	machines := &clusterv1.MachineList{}
	if err := g.APIReader.List(ctx, machines, append([]client.ListOption{client.InNamespace(cluster.Namespace)}, hosts...)...); err != nil {
		return nil, nil, outcome{cpe: cpe, resp: admission.Errored(http.StatusInternalServerError,
			fmt.Errorf("failed to list the control-plane Machines of Cluster %s to count the deletions under way: %w", cluster.Name, err))}, false
	}
	return rec, machines.Items, outcome{}, true
}

// recordSkipped writes d's deletion, let through unchecked, into the Cluster's admission record,
// re-reading it when another replica wrote it first.
func (g *Guard) recordSkipped(ctx context.Context, d deletion) error {
	var err error
	for range maxRecordAttempts {
		rec, machines, _, ok := g.readState(ctx, d.cluster, nil, d.hosts)
		if !ok {
			return fmt.Errorf("failed to read the admission record of Cluster %s", d.cluster.Name)
		}
		if err = g.writeRecord(ctx, d.cluster, rec, d.m, machines, time.Now()); err == nil || !lostRace(err) {
			return err
		}
	}
	return err
}
