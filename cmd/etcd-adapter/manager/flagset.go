package manager

import (
	"flag"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
)

// DefaultLogLevel is the manager's -v, as Cluster API's managers run.
const DefaultLogLevel logsv1.VerbosityLevel = 2

// NewFlagSet returns the manager's whole command line: component-base's logging flags bound to
// logOptions (whose -v it sets to DefaultLogLevel), o's flags (AddFlags) and controller-runtime's
// --kubeconfig; the current values are the defaults shown. hack/release-manifests checks the
// docs' flag table and the components' clusterctl variables against it. Parse errors are
// returned (pflag.ContinueOnError), pflag.ErrHelp for -h.
func NewFlagSet(o *Options, logOptions *logsv1.LoggingConfiguration) *pflag.FlagSet {
	fs := pflag.NewFlagSet("etcd-adapter", pflag.ContinueOnError)
	logOptions.Verbosity = DefaultLogLevel
	logsv1.AddFlags(logOptions, fs)
	o.AddFlags(fs)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	// controller-runtime's --kubeconfig, read by ctrl.GetConfig. A flag set of its own, not
	// flag.CommandLine, so that nothing else registered there (go test's flags) leaks in.
	goFlags := flag.NewFlagSet("etcd-adapter", flag.ContinueOnError)
	ctrlconfig.RegisterFlags(goFlags)
	fs.AddGoFlagSet(goFlags)

	return fs
}
