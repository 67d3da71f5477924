package etcdcluster

import (
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// shutdownNoise are the errors etcd logs from its listeners on every Close; they say nothing
// in a test.
var shutdownNoise = []string{"use of closed network connection", "http: Server closed", "mux: server closed"}

// newLogger returns the logger of every member: errors only, JSON on stderr, without
// shutdownNoise. One shared logger keeps etcd from building a logger per member.
func newLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.ErrorLevel)
	return zap.New(&quietCore{Core: core})
}

var logger = newLogger()

// quietCore drops entries that carry shutdownNoise.
type quietCore struct{ zapcore.Core }

// With keeps the filter on derived loggers.
func (c *quietCore) With(fields []zapcore.Field) zapcore.Core {
	return &quietCore{Core: c.Core.With(fields)}
}

// Check adds the core only for entries its level enables; Write decides on the fields.
func (c *quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write drops shutdown noise and writes everything else.
func (c *quietCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if f.Type == zapcore.ErrorType && isShutdownNoise(f.Interface.(error)) {
			return nil
		}
	}
	return c.Core.Write(e, fields)
}

// isShutdownNoise reports whether err is one of the shutdownNoise errors.
func isShutdownNoise(err error) bool {
	if err == nil {
		return false
	}
	for _, s := range shutdownNoise {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}
