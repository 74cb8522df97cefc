package testenv

import (
	"context"
	"errors"
	"os"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// SetLogger keeps test logs quiet unless TRELLIS_TEST_LOG=debug.
func SetLogger() {
	level := zapcore.ErrorLevel
	if os.Getenv("TRELLIS_TEST_LOG") == "debug" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(level)))
}

// RunManager starts mgr in the background and waits for its caches. The
// returned stop cancels it and reports how it ended.
func RunManager(mgr ctrl.Manager) (stop func() error, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(errors.New("manager caches did not sync"), <-done)
	}
	return func() error { cancel(); return <-done }, nil
}
