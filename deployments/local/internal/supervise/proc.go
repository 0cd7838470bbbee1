package supervise

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTicks = 100

// ProcUsage reads the CPU time used so far, the page faults and the peak
// resident set size of a running process from /proc (Linux): for processes the launcher does
// not reap itself, such as the ClickHouse server, measured before they stop.
func ProcUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Usage{}, fmt.Errorf("read usage of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'; minflt and majflt are fields 10 and 12, utime and stime
	// 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("read usage of %d: malformed stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("read usage of %d: %d stat fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("read usage of %d: cpu times %q %q", pid, f[11], f[12])
	}
	minflt, err1 := strconv.ParseInt(f[7], 10, 64)
	majflt, err2 := strconv.ParseInt(f[9], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("read usage of %d: page faults %q %q", pid, f[7], f[9])
	}
	u := Usage{CPU: time.Duration(utime+stime) * time.Second / clockTicks, Faults: minflt + majflt, Starts: 1}
	hwm, err := PeakRSS(pid)
	if err != nil {
		return Usage{}, err
	}
	u.MaxRSS = hwm
	return u, nil
}

// PeakRSS reads the peak resident set size of a running process's own
// address space (VmHWM in /proc/<pid>/status, Linux), in bytes.
//
// It is the figure to report for a child of a Go program, not the maxrss
// of its rusage: os/exec starts a child with clone(CLONE_VM|CLONE_VFORK),
// and at execve the kernel folds the high-water mark of the address space
// the child leaves, its parent's, into the child's maxrss. A 15 MiB
// service started by a 27 MiB launcher reports a maxrss of 27 MiB.
func PeakRSS(pid int) (int64, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read peak rss of %d: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read peak rss of %d: VmHWM %q", pid, v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read peak rss of %d: no VmHWM (a zombie, or not Linux)", pid)
}
