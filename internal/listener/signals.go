package listener

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalExitCode is the exit code of a process that stops at once on
// signal s: 128 plus its number (130 for SIGINT, 143 for SIGTERM), as a
// shell reports a process the signal killed.
func SignalExitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// ShutdownOnSignals returns a context cancelled by the first SIGTERM or
// SIGINT: the listener then drains its partitions, commits and returns.
// A second one, while that takes its time, calls exit with
// SignalExitCode at once, as operators expect of a second Ctrl-C: the
// records still in flight are not marked, so Kafka redelivers them to the
// members that take the partitions. stop ends the watch; a signal after it
// has the default effect.
func ShutdownOnSignals(logger *slog.Logger, exit func(code int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	stopped := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			logger.Info("signal received: draining in-flight records, then exiting; a second signal exits at once", "signal", s.String())
			cancel()
		case <-stopped:
			return
		}
		select {
		case s := <-sigs:
			code := SignalExitCode(s)
			logger.Error("second signal: exiting without finishing the drain; unfinished records will be redelivered",
				"signal", s.String(), "exit_code", code)
			exit(code)
		case <-stopped:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(stopped)
			cancel()
		})
	}
}
