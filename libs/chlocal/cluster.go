package chlocal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ErrZooKeeperNotInstalled means no ZooKeeper was found for a cluster;
// the error text says what to install.
var ErrZooKeeperNotInstalled = errors.New("zookeeper not installed (apt-get install zookeeper; it needs a Java runtime, which apt pulls in)")

// ZooKeeperJar is where Debian's zookeeper package puts the server's jar
// (its manifest names the libraries it needs).
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// FindZooKeeper returns the java binary and the ZooKeeper jar, or
// ErrZooKeeperNotInstalled.
func FindZooKeeper() (java, jar string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", ErrZooKeeperNotInstalled
	}
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return "", "", ErrZooKeeperNotInstalled
	}
	return java, ZooKeeperJar, nil
}

// nodeConfig is what a server of a cluster adds to its configuration.
type nodeConfig struct {
	Name            string  // the cluster's name in remote_servers
	Shards          [][]int // native ports of each shard's replicas
	Shard, Replica  string  // this server's macros
	InterserverPort int
	ZooKeeperPort   int
}

// ClusterOptions shapes a local cluster; zero fields take defaults.
type ClusterOptions struct {
	Name     string // remote_servers name (default "trawl")
	Shards   int    // default 2
	Replicas int    // per shard (default 2)
	// StopTimeout of each server (default 10s).
	StopTimeout time.Duration
}

// Cluster is a local ClickHouse cluster: one ZooKeeper and Shards ×
// Replicas servers on loopback ports, each with its data under its own
// directory. Macros: shard "01", "02", …; replica "s1r1", "s1r2", … (unique
// in the cluster).
type Cluster struct {
	name  string
	zk    *ZooKeeper
	nodes [][]*Server // [shard][replica]
}

// StartCluster starts ZooKeeper and the servers under dir and waits until
// every server answers. A dir used before keeps its data.
func StartCluster(ctx context.Context, dir string, o ClusterOptions) (*Cluster, error) {
	if o.Name == "" {
		o.Name = "trawl"
	}
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Replicas <= 0 {
		o.Replicas = 2
	}
	if !userNameRE.MatchString(o.Name) {
		return nil, fmt.Errorf("start cluster: name %q is not an identifier", o.Name)
	}
	if _, err := FindBinary(); err != nil {
		return nil, err
	}
	n := o.Shards * o.Replicas
	ports, err := freePorts(ctx, 3*n)
	if err != nil {
		return nil, err
	}
	zk, err := StartZooKeeper(ctx, filepath.Join(dir, "zookeeper"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{name: o.Name, zk: zk}
	shards := make([][]int, o.Shards)
	for s := range shards {
		for r := range o.Replicas {
			shards[s] = append(shards[s], ports[3*(s*o.Replicas+r)])
		}
	}
	for s := range o.Shards {
		var row []*Server
		for r := range o.Replicas {
			i := 3 * (s*o.Replicas + r)
			node := &nodeConfig{Name: o.Name, Shards: shards, Shard: fmt.Sprintf("%02d", s+1),
				Replica: fmt.Sprintf("s%dr%d", s+1, r+1), InterserverPort: ports[i+2], ZooKeeperPort: zk.Port()}
			srv, err := StartWith(ctx, filepath.Join(dir, node.Replica), Options{
				TCPPort: ports[i], HTTPPort: ports[i+1], StopTimeout: o.StopTimeout, cluster: node})
			if err != nil {
				c.nodes = append(c.nodes, row)
				_ = c.Stop() // the start error is the one to report
				return nil, fmt.Errorf("start cluster node %s: %w", node.Replica, err)
			}
			row = append(row, srv)
		}
		c.nodes = append(c.nodes, row)
	}
	return c, nil
}

// Name returns the cluster's name (for chstore.Config.Cluster).
func (c *Cluster) Name() string { return c.name }

// Node returns the server of shard s, replica r (both from 0).
func (c *Cluster) Node(s, r int) *Server { return c.nodes[s][r] }

// Addrs returns the native addresses of every server, shard by shard.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, row := range c.nodes {
		for _, srv := range row {
			out = append(out, srv.Addr())
		}
	}
	return out
}

// Stop stops every server, then ZooKeeper.
func (c *Cluster) Stop() error {
	var wg sync.WaitGroup
	errs := make([]error, 0, 8)
	var mu sync.Mutex
	for _, row := range c.nodes {
		for _, srv := range row {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := srv.Stop(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	errs = append(errs, c.zk.Stop())
	return errors.Join(errs...)
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it
// to exit. Restart brings it back.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// ZooKeeper is a standalone ZooKeeper server (Debian's zookeeper package)
// on a loopback port, for a local ClickHouse cluster.
type ZooKeeper struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// StartZooKeeper starts a standalone ZooKeeper with its data under dir
// and waits until it opens a session (see serving).
func StartZooKeeper(ctx context.Context, dir string) (*ZooKeeper, error) {
	java, jar, err := FindZooKeeper()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("resolve zookeeper dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("create zookeeper dir: %w", err)
	}
	ports, err := freePorts(ctx, 1)
	if err != nil {
		return nil, err
	}
	z := &ZooKeeper{dir: dir, port: ports[0]}
	// A short tick: sessions of the ClickHouse servers expire within
	// seconds of a kill. No admin server (it would take port 8080). No
	// fsync of the transaction log (forceSync=no): the data is thrown away
	// with the cluster, and a migration's ON CLUSTER statements, each a
	// few dozen ZooKeeper writes, ran 38 s with it and 31 s without.
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s/data\nclientPortAddress=127.0.0.1\nclientPort=%d\n"+
		"admin.enableServer=false\nmaxClientCnxns=0\nmaxSessionTimeout=60000\nforceSync=no\n", dir, z.port)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write zookeeper config: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open zookeeper log: %w", err)
	}
	cmd := exec.Command(java, "-Xmx256m", "-cp", jar, "org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath) //nolint:noctx // ctx bounds the start-up wait, not the server's life
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close() // the start error is the one to report
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	z.cmd, z.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait() // Stop reports nothing of how it ended
		_ = out.Close()
		close(z.done)
	}()
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if serving(wctx, z.Addr()) {
			return z, nil
		}
		select {
		case <-z.done:
			b, _ := os.ReadFile(filepath.Join(dir, "zookeeper.log"))
			return nil, fmt.Errorf("start zookeeper: exited: %s", tail(b, 2048))
		case <-wctx.Done():
			_ = z.Stop()
			return nil, fmt.Errorf("start zookeeper: not answering on %s: %w", z.Addr(), wctx.Err())
		case <-tick.C:
		}
	}
}

// serving reports whether the ZooKeeper at addr opens a session: it
// sends a ConnectRequest, reads the ConnectResponse and closes the session
// again. "ruok" is not enough: ZooKeeper answers "imok" as soon as its
// port listens, about 200 ms before it serves sessions, and a ClickHouse
// 18.16 server whose DDL worker connects in that window fails its
// handshakes ("Cannot read all data ... while receiving handshake") and
// then crashes on the first ON CLUSTER query.
func serving(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := new(net.Dialer).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut (ms),
	// sessionId, passwd (length-prefixed), each big-endian after the
	// frame's length.
	req := binary.BigEndian.AppendUint32(nil, 0) // frame length, set below
	req = binary.BigEndian.AppendUint32(req, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 2000)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 16)
	req = append(req, make([]byte, 16)...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := conn.Write(req); err != nil {
		return false
	}
	// ConnectResponse: protocolVersion, timeOut, sessionId, passwd. A
	// server not yet serving closes the connection instead.
	var resp [4 + 4 + 4 + 8]byte
	if _, err := io.ReadFull(conn, resp[:]); err != nil {
		return false
	}
	if binary.BigEndian.Uint64(resp[12:]) == 0 {
		return false // no session
	}
	// closeSession (xid 1, type -11), so that the session does not wait
	// out its timeout; its answer is not needed.
	closeReq := binary.BigEndian.AppendUint32(nil, 8)
	closeReq = binary.BigEndian.AppendUint32(closeReq, 1)
	closeReq = binary.BigEndian.AppendUint32(closeReq, uint32(0xfffffff5)) // int32(-11)
	_, _ = conn.Write(closeReq)
	return true
}

// Port returns the client port.
func (z *ZooKeeper) Port() int { return z.port }

// Addr returns the client address (host:port).
func (z *ZooKeeper) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(z.port)) }

// Stop stops ZooKeeper (SIGTERM to its process group, SIGKILL after 10 s)
// and waits for it to exit.
func (z *ZooKeeper) Stop() error {
	if z == nil || z.cmd == nil {
		return nil
	}
	pgid := z.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(defaultStopTimeout)
	defer t.Stop()
	select {
	case <-z.done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-z.done
	}
	z.cmd = nil
	return nil
}

// ForceRestoreData makes the next start of the server restore its
// replicated tables whatever their parts: ClickHouse's recovery for a
// replica whose parts on disk and in ZooKeeper disagree too much (after a
// crash, 18.16 may refuse to attach a small table whose newest parts it
// wrote but did not register). It writes the flag file
// <data>/flags/force_restore_data, which the server deletes once read;
// unexpected parts are set aside in detached/ and fetched again from the
// other replicas.
func (s *Server) ForceRestoreData() error {
	dir := filepath.Join(s.dir, "data", "flags")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("force restore data: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "force_restore_data"), nil, 0o644); err != nil {
		return fmt.Errorf("force restore data: %w", err)
	}
	return nil
}
