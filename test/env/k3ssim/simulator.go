package k3ssim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults are K3s's own intervals (k3s pkg/etcd/etcd.go); tests set short ones through Options.
const (
	// DefaultTick is how often the leader's K3s writes EtcdIsVoter and promotes learners.
	DefaultTick = 15 * time.Second
	// DefaultHeartbeatInterval is how often an unchanged EtcdIsVoter is re-written.
	DefaultHeartbeatInterval = 5 * time.Minute
	// DefaultCallTimeout bounds every etcd and apiserver call of the simulator.
	DefaultCallTimeout = 5 * time.Second
	// DefaultLearnerStallTimeout is how long a learner's applied index may stand still
	// before the leader's K3s removes it.
	DefaultLearnerStallTimeout = 5 * time.Minute
	// DefaultRequeueBaseDelay is the first backoff of the member controller, whose
	// exponential backoff is that of client-go's default controller rate limiter (wrangler).
	DefaultRequeueBaseDelay = 5 * time.Millisecond
	// DefaultRequeueMaxDelay is the longest backoff between two failed syncs of one Node.
	DefaultRequeueMaxDelay = 1000 * time.Second
)

// Options configure a Simulator.
type Options struct {
	// Version is the simulated K3s/RKE2 version, e.g. "v1.33.4+k3s1"; it selects the Profile.
	Version string
	// RESTConfig reaches the workload cluster's kube-apiserver.
	RESTConfig *rest.Config
	// Etcd is the etcd cluster the simulated servers run.
	Etcd EtcdCluster
	// Kubelet keeps Nodes Ready; when nil, the simulator writes the Ready condition itself.
	Kubelet Kubelet
	// Tick is the leader's EtcdIsVoter/promotion period and the metadata/tombstone period.
	Tick time.Duration
	// HeartbeatInterval is how often an unchanged EtcdIsVoter condition is re-written.
	HeartbeatInterval time.Duration
	// CallTimeout bounds each etcd call, including the Status health check.
	CallTimeout time.Duration
	// LearnerStallTimeout is how long a learner may make no progress before it is removed.
	LearnerStallTimeout time.Duration
	// RequeueBaseDelay and RequeueMaxDelay bound the member controller's backoff.
	RequeueBaseDelay, RequeueMaxDelay time.Duration
	// ClusterLabels, when set, go on every Node the simulator registers, and the simulator
	// only looks at Nodes that carry them. They let several simulated clusters share one
	// kube-apiserver in tests; K3s itself looks at every Node, which is what nil means.
	ClusterLabels map[string]string
	// Logger receives the simulator's log, which is where K3s reports rejections.
	Logger logr.Logger
	// Versions sets the version of individual servers, by Node name (a rolling upgrade);
	// the others run Version. The etcd leader's version decides how EtcdIsVoter is written.
	Versions map[string]string
	// LeaseHolder is the Node whose K3s holds the member controller's Lease (kube-system
	// k3s-etcd / rke2-etcd), so whose version's member controller runs; empty means one on
	// Version.
	LeaseHolder string
	// TombstoneBlocksRestart makes RestartServer refuse a server whose member was removed
	// (ErrTombstone), as newer K3s refuses to start after a removal until its data is cleared.
	// Which release changed this is not pinned down, so it is a switch, not a version rule.
	TombstoneBlocksRestart bool
}

// withDefaults fills unset options.
func (o Options) withDefaults() Options {
	setDefault(&o.Tick, DefaultTick)
	setDefault(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	setDefault(&o.CallTimeout, DefaultCallTimeout)
	setDefault(&o.LearnerStallTimeout, DefaultLearnerStallTimeout)
	setDefault(&o.RequeueBaseDelay, DefaultRequeueBaseDelay)
	setDefault(&o.RequeueMaxDelay, DefaultRequeueMaxDelay)
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Simulator plays the K3s processes of every etcd server of one cluster, all on one version.
type Simulator struct {
	opts    Options
	profile Profile
	// profiles are the servers that run another version than profile (Options.Versions).
	profiles map[string]Profile
	client   client.Client
	scheme   *runtime.Scheme
	etcd     *etcdOps
	kubelet  Kubelet
	log      logr.Logger

	// opMu serializes membership changes (removal + tombstone, rejoin) with the tick, so a
	// removed server never re-annotates its Node after K3s cleared node-name, and no health
	// check reaches a member between its removal and its tombstone (see tick).
	opMu sync.Mutex
	// unanswered are the members whose MemberRemove failed but may have been applied, by name;
	// guarded by opMu.
	unanswered map[string]member
	// condMu is held by an EtcdIsVoter pass.
	condMu sync.Mutex

	mu              sync.Mutex
	servers         map[string]*server
	conditionWriter bool
	hiddenNodes     map[string]bool
	promotionHeld   bool
	requeues        map[string]int
	learners        map[uint64]learnerProgress
	leaderMoves     int
	removals        []string
	memberCtl       *memberController
	cancel          context.CancelFunc
	done            chan struct{}
}

// New returns a Simulator for opts; Start runs it.
func New(opts Options) (*Simulator, error) {
	opts = opts.withDefaults()
	profile, err := ParseProfile(opts.Version)
	if err != nil {
		return nil, err
	}
	profiles := map[string]Profile{}
	for node, v := range opts.Versions {
		p, err := ParseProfile(v)
		if err != nil {
			return nil, fmt.Errorf("failed to parse the version of server %s: %w", node, err)
		}
		if p.Program != profile.Program {
			return nil, fmt.Errorf("invalid argument: server %s runs %s, the others %s", node, p.Program, profile.Program)
		}
		profiles[node] = p
	}
	if opts.RESTConfig == nil || opts.Etcd == nil {
		return nil, errors.New("invalid argument: k3ssim.New needs Options.RESTConfig and Options.Etcd")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build scheme: %w", err)
	}
	c, err := client.New(opts.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create workload cluster client: %w", err)
	}
	s := &Simulator{
		opts: opts, profile: profile, profiles: profiles, client: c, scheme: scheme, log: opts.Logger,
		servers: map[string]*server{}, conditionWriter: true, hiddenNodes: map[string]bool{}, requeues: map[string]int{},
		learners: map[uint64]learnerProgress{}, unanswered: map[string]member{},
	}
	s.kubelet = opts.Kubelet
	if s.kubelet == nil {
		s.kubelet = &readyWriter{client: c}
	}
	return s, nil
}

// Profile returns the simulated version's profile.
func (s *Simulator) Profile() Profile { return s.profile }

// profileFor returns the profile of the server on node.
func (s *Simulator) profileFor(node string) Profile {
	if p, ok := s.profiles[node]; ok {
		return p
	}
	return s.profile
}

// memberControllerProfile is the profile of the K3s that holds the member controller's Lease.
func (s *Simulator) memberControllerProfile() Profile {
	if s.opts.LeaseHolder != "" {
		return s.profileFor(s.opts.LeaseHolder)
	}
	return s.profile
}

// Start discovers the servers from the etcd member list (member names `<node>-<8 hex>`),
// registers their Nodes (Ready, kubeletVersion), runs one metadata pass and starts the
// per-tick loop and the member controller. It returns once the Nodes carry their metadata.
func (s *Simulator) Start(ctx context.Context) error {
	// The client lives as long as the simulator, not as long as the caller's context.
	cli, err := s.opts.Etcd.NewClient(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("failed to create etcd client: %w", err)
	}
	s.etcd = &etcdOps{cluster: s.opts.Etcd, cli: cli, timeout: s.opts.CallTimeout}
	members, err := s.initialMembers(ctx)
	if err != nil {
		return err
	}
	if s.profile.HasSnapshotFiles {
		// K3s registers its CRDs when its server starts, before any snapshot exists.
		if err := s.ensureSnapshotFileCRD(ctx); err != nil {
			return err
		}
	}
	for _, m := range members {
		if m.Name == "" {
			// A learner that never started (e.g. a failed join) belongs to no server.
			continue
		}
		if err := s.addServer(ctx, m); err != nil {
			return err
		}
	}
	s.opMu.Lock()
	s.syncServersLocked(ctx)
	s.opMu.Unlock()
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.cancel, s.done = cancel, make(chan struct{})
	s.mu.Unlock()
	go s.run(runCtx)
	return s.StartMemberController(ctx)
}

// startTimeout bounds how long Start waits for etcd to answer, as a K3s server waits for its
// etcd before it starts its controllers.
const startTimeout = 30 * time.Second

// initialMembers lists the members, retrying while etcd does not answer yet.
func (s *Simulator) initialMembers(ctx context.Context) ([]member, error) {
	var members []member
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, s.opts.CallTimeout/10, startTimeout, true, func(ctx context.Context) (bool, error) {
		members, lastErr = s.etcd.members(ctx)
		return lastErr == nil, nil
	})
	if err != nil {
		return nil, errors.Join(err, lastErr)
	}
	return members, nil
}

// Stop stops every loop and closes the etcd client; the etcd cluster keeps running.
func (s *Simulator) Stop() {
	s.StopMemberController()
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if s.etcd != nil {
		_ = s.etcd.cli.Close()
	}
}

// memberNamePattern is K3s's member name `<node-name>-<8 hex chars>`.
var memberNamePattern = regexp.MustCompile(`^(.+)-[0-9a-f]{8}$`)

// addServer registers a running server for an existing member.
func (s *Simulator) addServer(ctx context.Context, m member) error {
	parts := memberNamePattern.FindStringSubmatch(m.Name)
	if parts == nil {
		return fmt.Errorf("etcd member %q is not named <node>-<8 hex> as K3s names members", m.Name)
	}
	ip, err := peerIP(m)
	if err != nil {
		return err
	}
	srv := &server{node: parts[1], ip: ip, member: m.Name, running: true, profile: s.profileFor(parts[1])}
	s.mu.Lock()
	s.servers[srv.node] = srv
	s.mu.Unlock()
	return s.registerNode(ctx, srv.node, ip)
}

// Servers returns the simulated servers' Node names, sorted.
func (s *Simulator) Servers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.servers))
	for n := range s.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MemberName returns the current etcd member name of a server and whether its K3s runs
// (false after its member was removed, until RestartServer).
func (s *Simulator) MemberName(node string) (name string, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.servers[node]
	if !ok {
		return "", false
	}
	return srv.member, srv.running
}

// run is the per-tick loop of all simulated K3s processes.
func (s *Simulator) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.tick(ctx)
		}
	}
}

// tick runs, in order: every running server's tombstone check and metadata controller, then
// the raft leader's duties (EtcdIsVoter, learner promotion).
//
// Important: the whole tick holds opMu, like a removal from MemberRemove to the tombstone.
// A removed member keeps serving for a moment after it applied its own removal, and etcd
// panics (killing the test binary) on a Status call in that window ("failed to find local ID
// in cluster members"); serializing keeps the health checks out of it.
func (s *Simulator) tick(ctx context.Context) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	members := s.syncServersLocked(ctx)
	if members == nil {
		return
	}
	s.leaderDuties(ctx, members)
}

// Quiesced runs fn while no simulated K3s process talks to etcd (no tick, removal or join is
// in flight), for faults that stop a member abruptly. Important: etcd v3.6 panics on a Status
// call that races a member's hard stop (its storage backend is already closed), and that
// panic ends the whole test binary.
func (s *Simulator) Quiesced(fn func() error) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	return fn()
}
