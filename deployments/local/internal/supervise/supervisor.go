package supervise

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Policy is how a Supervisor restarts a process that exits without being
// asked to, the way a container orchestrator restarts a crashed container:
// after a back-off that starts at Backoff and doubles with every restart
// made within the last Window, up to MaxBackoff. An exit that would need
// more than MaxRestarts restarts within Window is a crash loop: the
// supervisor gives up. Zero fields take the defaults (DefaultPolicy).
type Policy struct {
	Backoff     time.Duration // delay before a restart with none in the window (default 500ms)
	MaxBackoff  time.Duration // longest delay (default 30s)
	MaxRestarts int           // restarts tolerated within Window (default 5)
	Window      time.Duration // how far back restarts count (default 2m)
}

// DefaultPolicy returns the default policy: a process that exits at once
// is restarted after 0.5, 1, 2, 4 and 8 s and given up on its sixth exit,
// about 16 s after the first; one that runs for minutes between crashes is
// restarted after 0.5 s every time.
func DefaultPolicy() Policy {
	return Policy{Backoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second, MaxRestarts: 5, Window: 2 * time.Minute}
}

// WithDefaults returns p with every zero field set to the default.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.Backoff == 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.MaxRestarts == 0 {
		p.MaxRestarts = d.MaxRestarts
	}
	if p.Window == 0 {
		p.Window = d.Window
	}
	return p
}

// Validate reports a policy that cannot work.
func (p Policy) Validate() error {
	switch {
	case p.Backoff < 0 || p.MaxBackoff < 0 || p.Window < 0 || p.MaxRestarts < 0:
		return errors.New("restart policy: negative back-off, window or restart count")
	case p.MaxBackoff != 0 && p.Backoff > p.MaxBackoff:
		return fmt.Errorf("restart policy: back-off %s above its maximum %s", p.Backoff, p.MaxBackoff)
	}
	return nil
}

// Next returns the delay before restarting a process that exited at now,
// given the times of the restarts made so far, or false for a crash loop:
// MaxRestarts restarts were already made within Window. p must have its
// defaults (WithDefaults).
func (p Policy) Next(now time.Time, restarts []time.Time) (time.Duration, bool) {
	n := 0
	for _, r := range restarts {
		if now.Sub(r) < p.Window {
			n++
		}
	}
	if n >= p.MaxRestarts {
		return 0, false
	}
	d := p.Backoff
	for i := 0; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff), true
}

// Event is what a Supervisor did about one exit of its process.
type Event struct {
	Name    string
	Err     error         // the exit status (nil: exit code 0), or why the restart could not start it
	Ran     time.Duration // how long the run lasted
	Restart int           // the number of the restart that follows (1 = the first); 0 when giving up
	Delay   time.Duration // the back-off before that restart
	// Weather, when not empty, is the outage of a dependency the exit
	// happened during (Supervisor.Excuse): it does not count toward the
	// crash loop.
	Weather string
}

func (e Event) String() string {
	status := "exit status 0"
	if e.Err != nil {
		status = e.Err.Error()
	}
	if e.Restart == 0 {
		return fmt.Sprintf("%s exited (%s) after %s: crash loop, giving up", e.Name, status, e.Ran.Round(time.Millisecond))
	}
	if e.Weather != "" {
		return fmt.Sprintf("%s exited (%s) after %s while %s (not counted as a crash); restart %d in %s",
			e.Name, status, e.Ran.Round(time.Millisecond), e.Weather, e.Restart, e.Delay)
	}
	return fmt.Sprintf("%s exited (%s) after %s; restart %d in %s", e.Name, status, e.Ran.Round(time.Millisecond), e.Restart, e.Delay)
}

// CrashLoopError is returned by Supervisor.Run when it gives up.
type CrashLoopError struct {
	Name     string
	Restarts int           // restarts made within Window
	Window   time.Duration // the policy's
	Err      error         // the last exit status
	LogTail  string        // the last lines of the process's log
}

func (e *CrashLoopError) Error() string {
	return fmt.Sprintf("%s is crash-looping: exited (%v) again after %d restarts within %s; log tail:\n%s",
		e.Name, e.Err, e.Restarts, e.Window, e.LogTail)
}

func (e *CrashLoopError) Unwrap() error { return e.Err }

// Supervisor restarts one process whenever it exits while Run runs. The
// process must have been started; stopping it on purpose needs Run
// stopped first (cancel its context), or the exit counts as a crash.
type Supervisor struct {
	proc   *Process
	policy Policy
	notify func(Event)
	now    func() time.Time
	// weather, when set, names a dependency's outage going on (Excuse).
	weather func() string
	// Run's goroutine only: the times of the restarts made within the
	// policy's window, and how many were made in all.
	restarts []time.Time
	total    int
}

// NewSupervisor returns a supervisor of proc with policy (zero fields
// default). notify, when not nil, is called from Run's goroutine with every
// exit handled, before the back-off.
func NewSupervisor(proc *Process, policy Policy, notify func(Event)) *Supervisor {
	if notify == nil {
		notify = func(Event) {}
	}
	return &Supervisor{proc: proc, policy: policy.WithDefaults(), notify: notify, now: time.Now}
}

// Excuse tells the supervisor how to know that a dependency of the
// process is down (weather returns why, "" when none is): an exit then is
// restarted with the policy's back-off but not counted toward the crash
// loop, and its Event says why. Call it before Run.
func (s *Supervisor) Excuse(weather func() string) { s.weather = weather }

// Run supervises until ctx is done (then nil) or the process crash-loops
// (then a *CrashLoopError, with the process left exited). A restart made
// by someone else during the back-off (Process.Restart) is left alone:
// Run goes on watching that run. Run blocks; the caller owns its goroutine.
func (s *Supervisor) Run(ctx context.Context) error {
	var startErr error // why the last restart failed to start the process
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.proc.Done():
		}
		if ctx.Err() != nil {
			return nil // stopped on purpose
		}
		now := s.now()
		ev := Event{Name: s.proc.Name(), Err: s.proc.Err(), Ran: now.Sub(s.proc.StartedAt())}
		if startErr != nil {
			ev.Err, ev.Ran = startErr, 0
		}
		s.restarts = slices.DeleteFunc(s.restarts, func(r time.Time) bool { return now.Sub(r) >= s.policy.Window })
		if s.weather != nil {
			ev.Weather = s.weather()
		}
		delay, ok := s.policy.Next(now, s.restarts)
		if ev.Weather != "" {
			// The back-off of the exits counted so far, never a crash
			// loop: the dependency's return is what the process waits for.
			delay, ok = s.policy.Next(now, s.restarts[:min(len(s.restarts), s.policy.MaxRestarts-1)])
		}
		if !ok {
			s.notify(ev)
			return &CrashLoopError{Name: ev.Name, Restarts: len(s.restarts), Window: s.policy.Window, Err: ev.Err, LogTail: s.proc.LogTail(30)}
		}
		s.total++
		ev.Restart, ev.Delay = s.total, delay
		s.notify(ev)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		startErr = s.proc.Restart()
		if errors.Is(startErr, ErrRunning) {
			startErr = nil
			s.total--
			continue // restarted by someone else: not ours to count
		}
		// A restart that could not start the process counts too: it is
		// handled as an exit right away, so a missing binary ends in a
		// crash loop instead of a spin. An exit excused by the weather
		// does not.
		if ev.Weather == "" || startErr != nil {
			s.restarts = append(s.restarts, s.now())
		}
	}
}
