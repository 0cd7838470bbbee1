// Package ftptest is a small real FTP server for tests: it listens on a
// loopback address, accepts anonymous logins (or one user and password),
// and serves an in-memory tree of files over passive-mode data connections
// (EPSV and PASV) with LIST, NLST, RETR, SIZE, CWD and PWD.
package ftptest

import (
	"bufio"
	"fmt"
	"net"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Options configures a Server.
type Options struct {
	// Files maps absolute paths ("/pub/a.txt") to contents; directories
	// are implied by the paths.
	Files map[string]string
	// Username and Password, when set, are the only accepted login;
	// otherwise any login (anonymous) is accepted.
	Username string
	Password string
}

// Server is a running FTP server.
type Server struct {
	opts     Options
	ln       net.Listener
	ip       string
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	commands atomic.Int64
}

// Start starts a server on ip (e.g. "127.0.0.40") at a free port; it is
// closed at test cleanup.
func Start(t testing.TB, ip string, o Options) *Server {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("ftptest: listen on %s: %v", ip, err)
	}
	s := &Server{opts: o, ln: ln, ip: ip, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// URL returns ftp://host:port.
func (s *Server) URL() string { return "ftp://" + s.ln.Addr().String() }

// Commands returns the number of commands received.
func (s *Server) Commands() int { return int(s.commands.Load()) }

// Close stops the server and waits for its goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	_ = s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if !s.track(c) {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.serve(c)
		}()
	}
}

// session is the state of one control connection.
type session struct {
	s      *Server
	c      net.Conn
	w      *bufio.Writer
	user   string
	authed bool
	cwd    string
	pasv   net.Listener
}

func (ss *session) reply(code int, msg string) {
	fmt.Fprintf(ss.w, "%d %s\r\n", code, msg)
	_ = ss.w.Flush()
}

func (s *Server) serve(c net.Conn) {
	ss := &session{s: s, c: c, w: bufio.NewWriter(c), cwd: "/"}
	defer func() {
		if ss.pasv != nil {
			_ = ss.pasv.Close()
		}
	}()
	ss.reply(220, "ftptest ready")
	r := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		s.commands.Add(1)
		line = strings.TrimRight(line, "\r\n")
		cmd, arg, _ := strings.Cut(line, " ")
		if !ss.handle(strings.ToUpper(cmd), arg) {
			return
		}
	}
}

// handle runs one command; false ends the session.
func (ss *session) handle(cmd, arg string) bool {
	switch cmd {
	case "USER":
		ss.user = arg
		ss.reply(331, "password please")
		return true
	case "PASS":
		o := ss.s.opts
		if o.Username != "" && (ss.user != o.Username || arg != o.Password) {
			ss.reply(530, "login incorrect")
			return true
		}
		ss.authed = true
		ss.reply(230, "logged in")
		return true
	case "QUIT":
		ss.reply(221, "bye")
		return false
	case "FEAT":
		fmt.Fprint(ss.w, "211-Features:\r\n EPSV\r\n PASV\r\n SIZE\r\n211 End\r\n")
		_ = ss.w.Flush()
		return true
	case "SYST":
		ss.reply(215, "UNIX Type: L8")
		return true
	case "NOOP", "OPTS", "MODE", "STRU":
		ss.reply(200, "ok")
		return true
	}
	if !ss.authed {
		ss.reply(530, "not logged in")
		return true
	}
	switch cmd {
	case "TYPE":
		ss.reply(200, "type set")
	case "PWD":
		ss.reply(257, fmt.Sprintf("%q is the current directory", ss.cwd))
	case "CWD":
		p := ss.abs(arg)
		if !ss.s.isDir(p) {
			ss.reply(550, "no such directory")
			return true
		}
		ss.cwd = p
		ss.reply(250, "directory changed")
	case "EPSV", "PASV":
		if ss.pasv != nil {
			_ = ss.pasv.Close()
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ss.s.ip, "0")) //nolint:noctx // no context reaches a session's goroutine: Close ends it
		if err != nil {
			ss.reply(425, "cannot open data connection")
			return true
		}
		ss.pasv = ln
		port := ln.Addr().(*net.TCPAddr).Port
		if cmd == "EPSV" {
			ss.reply(229, fmt.Sprintf("Entering Extended Passive Mode (|||%d|)", port))
		} else {
			ip := strings.ReplaceAll(ss.s.ip, ".", ",")
			ss.reply(227, fmt.Sprintf("Entering Passive Mode (%s,%d,%d)", ip, port/256, port%256))
		}
	case "SIZE":
		b, ok := ss.s.opts.Files[ss.abs(arg)]
		if !ok {
			ss.reply(550, "no such file")
			return true
		}
		ss.reply(213, fmt.Sprint(len(b)))
	case "RETR":
		b, ok := ss.s.opts.Files[ss.abs(arg)]
		if !ok {
			ss.reply(550, "no such file")
			return true
		}
		ss.transfer([]byte(b))
	case "LIST", "NLST", "MLSD":
		if cmd == "MLSD" {
			ss.reply(500, "not supported")
			return true
		}
		// options ("-a", "-la") come first; the rest, spaces included, is the path
		for strings.HasPrefix(arg, "-") {
			_, arg, _ = strings.Cut(arg, " ")
		}
		dir := ss.abs(arg)
		if !ss.s.isDir(dir) {
			ss.reply(550, "no such directory")
			return true
		}
		var b strings.Builder
		for _, e := range ss.s.list(dir) {
			if cmd == "NLST" {
				fmt.Fprintf(&b, "%s\r\n", e.name)
				continue
			}
			mode := "-rw-r--r--"
			if e.dir {
				mode = "drwxr-xr-x"
			}
			fmt.Fprintf(&b, "%s 1 ftp ftp %d Jan 02 15:04 %s\r\n", mode, e.size, e.name)
		}
		ss.transfer([]byte(b.String()))
	default:
		ss.reply(502, "command not implemented")
	}
	return true
}

// transfer sends b over the passive data connection.
func (ss *session) transfer(b []byte) {
	if ss.pasv == nil {
		ss.reply(425, "use PASV or EPSV first")
		return
	}
	ln := ss.pasv
	ss.pasv = nil
	defer ln.Close()
	ss.reply(150, "opening data connection")
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	dc, err := ln.Accept()
	if err != nil {
		ss.reply(425, "no data connection")
		return
	}
	_, err = dc.Write(b)
	_ = dc.Close()
	if err != nil {
		ss.reply(426, "transfer aborted")
		return
	}
	ss.reply(226, "transfer complete")
}

func (ss *session) abs(p string) string {
	if p == "" {
		return ss.cwd
	}
	if !strings.HasPrefix(p, "/") {
		p = path.Join(ss.cwd, p)
	}
	return path.Clean(p)
}

type entry struct {
	name string
	dir  bool
	size int
}

func (s *Server) isDir(dir string) bool {
	if dir == "/" {
		return true
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for p := range s.opts.Files {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// list returns the entries directly under dir, sorted by name.
func (s *Server) list(dir string) []entry {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	seen := map[string]entry{}
	for p, b := range s.opts.Files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" {
			continue
		}
		name, _, isDir := strings.Cut(rest, "/")
		if isDir {
			seen[name] = entry{name: name, dir: true}
		} else {
			seen[name] = entry{name: name, size: len(b)}
		}
	}
	out := make([]entry, 0, len(seen))
	for _, e := range seen {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
