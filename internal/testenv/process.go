package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// process is a server a test runs in the background (the sharder,
// source-controller): its command, the directory of its files, its log
// (dir/log) among them, and its exit.
type process struct {
	cmd  *exec.Cmd
	done chan error
	dir  string
	// grace is how long Stop waits after an interrupt before it kills.
	grace time.Duration
}

// start runs cmd with its output in the process' log.
func (p *process) start(cmd *exec.Cmd) error {
	logFile, err := os.Create(filepath.Join(p.dir, "log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return err
	}
	p.cmd, p.done = cmd, make(chan error, 1)
	go func() { p.done <- cmd.Wait(); _ = logFile.Close() }()
	return nil
}

// exited says whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// Pid is the process ID while it runs, 0 after Stop.
func (p *process) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Log is what the process wrote so far.
func (p *process) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "log"))
	return string(b)
}

// Stop interrupts the process, kills it after its grace period, and
// removes its files.
func (p *process) Stop() error {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(p.grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.cmd = nil
	}
	return os.RemoveAll(p.dir)
}
