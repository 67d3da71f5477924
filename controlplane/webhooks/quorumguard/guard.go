package quorumguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Path is where the webhook is served.
const Path = "/validate-cluster-x-k8s-io-v1beta2-machine-etcd-quorum"

// DefaultObserveTimeout bounds the observation the guard makes per request; with
// DefaultTurnTimeout it stays inside the webhook's 10 s timeout.
const DefaultObserveTimeout = 5 * time.Second

// DefaultTurnTimeout bounds how long a request waits for the other requests of the same Cluster
// to be decided (admissions of one Cluster are decided one at a time). A request that waits
// longer is refused ("try again"), not left to the apiserver's timeout: the webhook's
// failurePolicy is Ignore, so a request that times out would be let through unchecked.
const DefaultTurnTimeout = 3 * time.Second

// admittedTTL is how long the guard counts a deletion it admitted as under way while the
// apiserver does not show the Machine deleting yet. The apiserver writes a deletion only after
// every validating webhook answered, and a webhook's timeoutSeconds is at most 30; a deletion not
// seen after that was refused by another webhook or failed, and is forgotten.
const admittedTTL = 40 * time.Second

// Note: sideEffects=NoneOnDryRun, since the guard records Events on the Machine and the
// ControlPlaneEtcd, except for a dry-run request (kubectl delete --dry-run=server).
//
// +kubebuilder:webhook:path=/validate-cluster-x-k8s-io-v1beta2-machine-etcd-quorum,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=cluster.x-k8s.io,resources=machines,verbs=delete,versions=v1beta2,name=etcd-quorum.etcdadapter.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// backendsFor hands out the etcd.Cluster of a Cluster; backends.Registry is the one in use.
type backendsFor interface {
	For(ctx context.Context, cluster *clusterv1.Cluster, backend v1alpha1.Backend) (etcd.Cluster, error)
}

var _ backendsFor = &backends.Registry{}

// Guard is the quorum guard.
type Guard struct {
	// Client reads the management cluster (the manager's cached client).
	Client client.Reader
	// APIReader reads the Cluster's control-plane Machines and its admission record (a Lease)
	// uncached, so the deletions under way are seen as soon as the apiserver wrote them; nil
	// means the manager's APIReader.
	APIReader client.Reader
	// Writer writes the admission records; nil means the manager's client.
	Writer client.Writer
	// RESTMapper maps the Cluster's spec.controlPlaneRef to a version; nil means the manager's.
	RESTMapper meta.RESTMapper
	// Backends hands out each Cluster's etcd.Cluster (a *backends.Registry).
	Backends backendsFor
	// Recorder records an Event for every refusal and every deletion let through with a warning,
	// on the Machine and on the ControlPlaneEtcd; nil means the manager's recorder.
	Recorder record.EventRecorder
	// ObserveTimeout bounds one observation; zero means DefaultObserveTimeout.
	ObserveTimeout time.Duration
	// TurnTimeout bounds the wait for other admissions of the same Cluster; zero means
	// DefaultTurnTimeout.
	TurnTimeout time.Duration

	decoder admission.Decoder

	mu       sync.Mutex
	clusters map[client.ObjectKey]*clusterTurn
}

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

// SetupWithManager registers the guard on the manager's webhook server.
func (g *Guard) SetupWithManager(mgr ctrl.Manager) error {
	if g.Client == nil || g.Backends == nil {
		return errors.New("failed to set up the quorum guard: Client and Backends are required")
	}
	if g.APIReader == nil {
		g.APIReader = mgr.GetAPIReader()
	}
	if g.Writer == nil {
		g.Writer = mgr.GetClient()
	}
	if g.RESTMapper == nil {
		g.RESTMapper = mgr.GetRESTMapper()
	}
	if g.Recorder == nil {
		g.Recorder = mgr.GetEventRecorderFor("etcd-adapter-quorum-guard")
	}
	g.decoder = admission.NewDecoder(mgr.GetScheme())
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: g})
	return nil
}

// outcome is the guard's answer to one request and the Event that goes with it.
type outcome struct {
	resp admission.Response
	// cpe is the Cluster's ControlPlaneEtcd, when the guard found one.
	cpe *v1alpha1.ControlPlaneEtcd
	// eventReason is empty when the answer deserves no Event (a plain allow). The Event's message
	// is the denial's message or the warning.
	eventReason string
	// why says, for the log, why a deletion was let through without a check.
	why string
}

func allowed(why string) outcome { return outcome{resp: admission.Allowed(""), why: why} }

// allowedWithWarning lets the deletion through and says why it may be unsafe, to the client and
// as a Warning Event.
func allowedWithWarning(cpe *v1alpha1.ControlPlaneEtcd, reason, warning string) outcome {
	return outcome{resp: admission.Allowed("").WithWarnings(warning), cpe: cpe, eventReason: reason}
}

func denied(cpe *v1alpha1.ControlPlaneEtcd, reason, msg string) outcome {
	return outcome{resp: admission.Denied(msg), cpe: cpe, eventReason: reason}
}

// Handle decides one admission request.
func (g *Guard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	m := &clusterv1.Machine{}
	if err := g.decoder.DecodeRaw(req.OldObject, m); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("failed to decode the Machine: %w", err))
	}
	dryRun := req.DryRun != nil && *req.DryRun
	out := g.decide(ctx, m, dryRun)
	ctrl.LoggerFrom(ctx).V(2).Info("Quorum guard", "Machine", klog.KObj(m), "allowed", out.resp.Allowed, "why", out.why, "warnings", out.resp.Warnings, "dryRun", dryRun)
	if !dryRun {
		g.record(m, out)
	}
	return out.resp
}

// record puts the outcome's Event on the Machine and on the ControlPlaneEtcd, so `kubectl
// describe` of either shows who was refused or let through, and why.
func (g *Guard) record(m *clusterv1.Machine, out outcome) {
	if out.eventReason == "" || g.Recorder == nil {
		return
	}
	msg := strings.Join(out.resp.Warnings, "; ")
	if !out.resp.Allowed && out.resp.Result != nil {
		msg = out.resp.Result.Message
	}
	g.Recorder.Event(m, corev1.EventTypeWarning, out.eventReason, msg)
	if out.cpe != nil {
		g.Recorder.Event(out.cpe, corev1.EventTypeWarning, out.eventReason, msg)
	}
}

func (g *Guard) decide(ctx context.Context, m *clusterv1.Machine, dryRun bool) outcome {
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	etcdCluster, etcdMachine := m.Labels[backends.EtcdClusterLabel]
	if !cp && !etcdMachine {
		return allowed("neither a control-plane Machine nor an etcd Machine")
	}
	if !m.DeletionTimestamp.IsZero() {
		return allowed("the Machine is already being deleted")
	}
	cluster := &clusterv1.Cluster{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return allowed(fmt.Sprintf("failed to get Cluster %s: %v", m.Spec.ClusterName, err))
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return allowed("the Cluster is being deleted")
	}
	if annotations.IsPaused(cluster, cluster) {
		return pausedClusterDeletion(m, cluster)
	}
	cpe, err := creation.ControlPlaneEtcdOf(ctx, g.Client, cluster)
	switch {
	case err != nil:
		return allowed(err.Error())
	case cpe == nil:
		return allowed("the Cluster has no ControlPlaneEtcd")
	case cp && !cpe.Spec.Backend.HostsMembersOnControlPlaneMachines():
		// Note: an external etcd's members run on no control-plane Machine (KubeadmControlPlane
		// with clusterConfiguration.etcd.external), so deleting one removes no member, whatever
		// etcd's health; its members are not matched to these Machines by name or address.
		return allowed(fmt.Sprintf("ControlPlaneEtcd %s has backend %s: its members run on no control-plane Machine, so deleting one removes no etcd member", cpe.Name, cpe.Spec.Backend))
	}
	// hosts select the Machines whose members this deletion is projected with: the Cluster's
	// control-plane Machines, or the etcd Machines of its EtcdadmCluster.
	hosts := []client.ListOption{client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}}
	if cp {
		deleting, err := g.controlPlaneDeleting(ctx, cluster)
		if err != nil {
			return allowed(err.Error())
		}
		if deleting {
			return allowed(fmt.Sprintf("the control plane %s %s is being deleted", cluster.Spec.ControlPlaneRef.Kind, cluster.Spec.ControlPlaneRef.Name))
		}
	} else {
		if why, ok := g.etcdadmMachineChecked(ctx, cluster, cpe, etcdCluster); !ok {
			return allowed(why)
		}
		hosts = []client.ListOption{client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name, backends.EtcdClusterLabel: etcdCluster}}
	}
	skip := m.Annotations[v1alpha1.SkipQuorumGuardAnnotation] == v1alpha1.AnnotationTrue

	turn, ok := g.takeTurn(ctx, client.ObjectKeyFromObject(cluster))
	if !ok {
		if skip {
			return allowedWithWarning(cpe, v1alpha1.EventQuorumGuardSkipped, skipped(m))
		}
		return outcome{cpe: cpe, resp: admission.Denied(fmt.Sprintf(
			"another deletion of a control-plane Machine of Cluster %s is being checked by the etcd quorum guard; try again", cluster.Name))}
	}
	defer g.endTurn(turn)
	return g.decideInTurn(ctx, cluster, cpe, m, skip, dryRun, hosts)
}

// pausedClusterDeletion lets a deletion of a paused Cluster's Machine through: while a Cluster is
// paused neither Cluster API nor etcd-adapter acts on its Machines, so nothing would remove the
// member anyway. clusterctl move pauses the Cluster before it deletes the source's objects, each
// with the delete-for-move annotation: the Machine moves, its etcd member stays. Any other
// deletion of a paused Cluster's Machine is a bypass of the guard, recorded as a Warning.
//
// Important! delete-for-move counts only on a paused Cluster: anyone may set it on a Machine, and
// on a running Cluster it would switch the guard off for that deletion.
func pausedClusterDeletion(m *clusterv1.Machine, cluster *clusterv1.Cluster) outcome {
	if _, move := m.Annotations[v1alpha1.DeleteForMoveAnnotation]; move {
		return allowed(fmt.Sprintf("annotation %s on a Machine of paused Cluster %s: clusterctl move deletes the Machine from the source management cluster, the etcd member stays",
			v1alpha1.DeleteForMoveAnnotation, cluster.Name))
	}
	return allowedWithWarning(nil, v1alpha1.EventDeletionAllowedClusterPaused, fmt.Sprintf(
		"Cluster %s is paused (spec.paused or annotation %s): the etcd quorum guard does not check the deletion of Machine %s, and its etcd member is not removed while the Cluster is paused",
		cluster.Name, clusterv1.PausedAnnotation, m.Name))
}

func skipped(m *clusterv1.Machine) string {
	return fmt.Sprintf("etcd quorum guard skipped for Machine %s by annotation %s=%s", m.Name, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue)
}

// decideInTurn decides while holding the Cluster's turn: it sees every deletion under way, the
// ones the apiserver shows and the ones any replica of the guard recorded as admitted that it
// does not show yet. An admission counts only once recorded: when another replica recorded one
// since the record was read, the decision is made again on the new record.
func (g *Guard) decideInTurn(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, m *clusterv1.Machine, skip, dryRun bool, hosts []client.ListOption) outcome {
	if skip {
		// Note: a skipped deletion is still recorded as admitted, so the deletions after it count
		// its member as going; it goes through unchecked even when the record cannot be written.
		out := allowedWithWarning(cpe, v1alpha1.EventQuorumGuardSkipped, skipped(m))
		if !dryRun {
			if err := g.recordSkipped(ctx, cluster, m, hosts); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Failed to record a deletion let through by skip-quorum-guard", "Machine", klog.KObj(m))
			}
		}
		return out
	}
	snap, observeErr := g.observe(ctx, cluster, cpe)
	for attempt := 1; ; attempt++ {
		rec, machines, out, ok := g.readState(ctx, cluster, cpe, hosts)
		if !ok {
			return out
		}
		now := time.Now()
		out = g.project(cluster, cpe, m, machines, rec.underWay(machines, m, now), snap, observeErr)
		if !out.resp.Allowed || dryRun {
			return out
		}
		err := g.writeRecord(ctx, cluster, rec, m, machines, now)
		switch {
		case err == nil:
			return out
		case !lostRace(err):
			return outcome{cpe: cpe, resp: admission.Errored(http.StatusInternalServerError, err)}
		case attempt == maxRecordAttempts:
			return outcome{cpe: cpe, resp: admission.Denied(fmt.Sprintf(
				"other deletions of control-plane Machines of Cluster %s kept being admitted by the etcd quorum guard while this one was checked; try again", cluster.Name))}
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

// recordSkipped writes m's deletion, let through unchecked, into the Cluster's admission record,
// re-reading it when another replica wrote it first.
func (g *Guard) recordSkipped(ctx context.Context, cluster *clusterv1.Cluster, m *clusterv1.Machine, hosts []client.ListOption) error {
	var err error
	for range maxRecordAttempts {
		rec, machines, _, ok := g.readState(ctx, cluster, nil, hosts)
		if !ok {
			return fmt.Errorf("failed to read the admission record of Cluster %s", cluster.Name)
		}
		if err = g.writeRecord(ctx, cluster, rec, m, machines, time.Now()); err == nil || !lostRace(err) {
			return err
		}
	}
	return err
}

// observe observes the Cluster's etcd, at most ObserveTimeout.
func (g *Guard) observe(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd) (*etcd.Snapshot, error) {
	timeout := g.ObserveTimeout
	if timeout <= 0 {
		timeout = DefaultObserveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	backend, err := g.Backends.For(ctx, cluster, cpe.Spec.Backend)
	if err != nil {
		return nil, err
	}
	return backend.Observe(ctx)
}

// project asks the quorum projection about the members of every Machine already being deleted,
// in the order they will be removed, and then the members of this one, on the observation snap
// (or, when etcd could not be observed, err).
func (g *Guard) project(cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, m *clusterv1.Machine, all []clusterv1.Machine, underWay []*clusterv1.Machine, snap *etcd.Snapshot, err error) outcome {
	along := alongWith(underWay)
	if err != nil {
		_, byAddress := m.Labels[backends.EtcdClusterLabel]
		if lastEtcdMachine(all, underWay, m, byAddress) {
			others := "control-plane Machine with a Node"
			if byAddress {
				others = "etcd Machine with an address"
			}
			return denied(cpe, v1alpha1.EventDeletionRefusedLastMember, lastMemberMessage(m, cluster, along,
				fmt.Sprintf("etcd could not be observed (%v), and every other %s is being deleted", err, others)))
		}
		return allowedWithWarning(cpe, v1alpha1.EventDeletionAllowedEtcdUnobserved,
			fmt.Sprintf("etcd of Cluster %s could not be observed (%v); deleting Machine %s%s may lose etcd quorum", cluster.Name, err, m.Name, along))
	}
	now := time.Now()
	going := make([]etcd.Machine, 0, len(underWay)+1)
	for _, u := range append(slices.Clip(underWay), m) {
		f := etcd.MachineFacts(u)
		f.MemberRemover = memberRemover(u, cpe)
		going = append(going, f)
	}
	facts := make([]etcd.Machine, 0, len(all))
	for i := range all {
		facts = append(facts, etcd.MachineFacts(&all[i]))
	}
	verdict := etcd.CanRemoveMachines(snap, now, going, facts)
	switch {
	case verdict.Allowed:
		return allowed(verdict.Message)
	case verdict.Reason == v1alpha1.MemberRemovalHealthUnknownReason:
		// Note: unknown is not lost, and the message says so; but the members are there and no
		// removal of theirs is known to be safe, so the deletion hook would hold the Machine
		// anyway. Refusing here tells the person now, and which members to look at.
		return denied(cpe, v1alpha1.EventDeletionRefusedHealthUnknown, fmt.Sprintf(
			"deleting Machine %s of Cluster %s cannot be shown to keep etcd quorum (%s)%s: %s; members not healthy: %s. Find out why their health is unknown (their Nodes, the K3s servers), or set annotation %s=%s on the Machine to delete it anyway",
			m.Name, cluster.Name, verdict.Reason, along, verdict.Message, unhealthyMembers(snap, now), v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue))
	case verdict.Reason == v1alpha1.MemberRemovalLastMemberReason:
		return denied(cpe, v1alpha1.EventDeletionRefusedLastMember, lastMemberMessage(m, cluster, along, verdict.Message))
	}
	fix := "Fix them first"
	if len(underWay) > 0 {
		fix = "Fix them first or wait for the deletions under way"
	}
	return denied(cpe, v1alpha1.EventDeletionRefused, fmt.Sprintf(
		"deleting Machine %s would lose etcd quorum of Cluster %s (%s)%s: %s; members not healthy: %s. %s, or set annotation %s=%s on the Machine to delete it anyway",
		m.Name, cluster.Name, verdict.Reason, along, verdict.Message, unhealthyMembers(snap, now), fix, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue))
}

func lastMemberMessage(m *clusterv1.Machine, cluster *clusterv1.Cluster, along, why string) string {
	return fmt.Sprintf("deleting Machine %s would remove the last etcd member of Cluster %s (%s)%s: %s. To delete the control plane, delete the Cluster; to delete this Machine anyway, set annotation %s=%s on it",
		m.Name, cluster.Name, v1alpha1.MemberRemovalLastMemberReason, along, why, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue)
}

// alongWith names the deletions under way for messages; empty when there are none.
func alongWith(underWay []*clusterv1.Machine) string {
	if len(underWay) == 0 {
		return ""
	}
	names := make([]string, 0, len(underWay))
	for _, u := range underWay {
		names = append(names, u.Name)
	}
	return fmt.Sprintf(" with the deletions of Machines %s already under way", strings.Join(names, ", "))
}

// lastEtcdMachine reports whether m is the only control-plane Machine with a Node that is not
// being deleted: when etcd cannot be observed, that is the Machine of the last member. A
// Machine without a Node hosts no member (Cluster API remediates a first control-plane Machine
// that failed to provision, and deleting it does not touch etcd).
//
// An etcdadm etcd Machine has no Node: one with an address (where the etcdadm controller starts
// its member, controllers/helpers.go getEtcdMachineAddress) counts as hosting one (byAddress).
func lastEtcdMachine(all []clusterv1.Machine, underWay []*clusterv1.Machine, m *clusterv1.Machine, byAddress bool) bool {
	hosts := func(o *clusterv1.Machine) bool {
		if byAddress {
			return len(o.Status.Addresses) > 0
		}
		return o.Status.NodeRef.Name != ""
	}
	if !hosts(m) {
		return false
	}
	for i := range all {
		o := &all[i]
		if o.Name == m.Name || !hosts(o) || !o.DeletionTimestamp.IsZero() ||
			slices.ContainsFunc(underWay, func(u *clusterv1.Machine) bool { return u.Name == o.Name }) {
			continue
		}
		return false
	}
	return true
}

// etcdadmMachineChecked reports whether the deletion of an etcd Machine of the EtcdadmCluster
// named etcdCluster is to be projected, and why not when it is not: only the etcd Machines of the
// EtcdadmCluster the Cluster owns host members of the Cluster's external etcd. While that
// EtcdadmCluster is being deleted, the etcdadm controller deletes every etcd Machine
// (controllers/controller.go reconcileDelete) and is let through, as a control plane being
// deleted is.
func (g *Guard) etcdadmMachineChecked(ctx context.Context, cluster *clusterv1.Cluster, cpe *v1alpha1.ControlPlaneEtcd, etcdCluster string) (string, bool) {
	if cpe.Spec.Backend != v1alpha1.BackendExternal {
		return fmt.Sprintf("an etcd Machine of EtcdadmCluster %s, and ControlPlaneEtcd %s has backend %s", etcdCluster, cpe.Name, cpe.Spec.Backend), false
	}
	ec, err := backends.FindEtcdadmCluster(ctx, g.Client, g.RESTMapper, cluster)
	switch {
	case err != nil:
		return err.Error(), false
	case ec == nil || ec.GetName() != etcdCluster:
		return fmt.Sprintf("an etcd Machine of EtcdadmCluster %s, which Cluster %s does not own", etcdCluster, cluster.Name), false
	case !ec.GetDeletionTimestamp().IsZero():
		return fmt.Sprintf("EtcdadmCluster %s is being deleted", etcdCluster), false
	}
	return "", true
}

// controlPlaneDeleting reports whether the Cluster's control-plane object (spec.controlPlaneRef)
// is being deleted; a kind that is not installed, or an object that is gone, is not.
func (g *Guard) controlPlaneDeleting(ctx context.Context, cluster *clusterv1.Cluster) (bool, error) {
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() || g.RESTMapper == nil {
		return false, nil
	}
	mapping, err := g.RESTMapper.RESTMapping(ref.GroupKind())
	if err != nil {
		return false, nil //nolint:nilerr // a control-plane kind that is not installed has no object to be deleting
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return false, nil
		}
		return false, fmt.Errorf("failed to get %s %s of Cluster %s: %w", ref.Kind, ref.Name, cluster.Name, err)
	}
	return !obj.DeletionTimestamp.IsZero(), nil
}

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

func unhealthyMembers(s *etcd.Snapshot, now time.Time) string {
	var out []string
	for _, mh := range etcd.AssessMembers(s, now) {
		if mh.Health != etcd.Healthy {
			out = append(out, fmt.Sprintf("%s (%s: %s)", mh.Member, mh.Health, mh.Message))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
