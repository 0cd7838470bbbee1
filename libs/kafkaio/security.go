package kafkaio

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/trawl-crawler/trawl/libs/tlsfiles"
)

// SASL mechanisms accepted by Config.SASL.Mechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLMechanisms are the accepted values of SASL.Mechanism ("" is none).
var SASLMechanisms = []string{SASLPlain, SASLScramSHA256, SASLScramSHA512}

// SASL is how the client authenticates to the brokers. The password is
// only ever read from a file (a mounted secret), never from a flag value,
// so that it appears on no command line, in no process listing and in no
// configuration dump.
type SASL struct {
	Mechanism    string // flag kafka-sasl-mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 ("" none)
	Username     string // flag kafka-sasl-username
	PasswordFile string // flag kafka-sasl-password-file: file holding the password
}

// RegisterFlags binds the fields to the kafka-sasl-… flags.
func (s *SASL) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Mechanism, "kafka-sasl-mechanism", "", "SASL mechanism to authenticate to the Kafka brokers: "+strings.Join(SASLMechanisms, ", ")+" (empty: none; use with -kafka-tls, or the password crosses the network in the clear with PLAIN)")
	fs.StringVar(&s.Username, "kafka-sasl-username", "", "SASL user name")
	fs.StringVar(&s.PasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (a mounted secret; a trailing line break is ignored)")
}

// validate checks the combination; the password file is read by mechanism.
func (s SASL) validate() error {
	if s.Mechanism == "" {
		if s.Username != "" || s.PasswordFile != "" {
			return errors.New("kafka-sasl-username, kafka-sasl-password-file: given without -kafka-sasl-mechanism")
		}
		return nil
	}
	var errs []error
	if !slices.Contains(SASLMechanisms, s.Mechanism) {
		errs = append(errs, fmt.Errorf("kafka-sasl-mechanism: %q not one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", ")))
	}
	if s.Username == "" {
		errs = append(errs, fmt.Errorf("kafka-sasl-username: required with -kafka-sasl-mechanism %s", s.Mechanism))
	}
	if s.PasswordFile == "" {
		errs = append(errs, fmt.Errorf("kafka-sasl-password-file: required with -kafka-sasl-mechanism %s", s.Mechanism))
	}
	return errors.Join(errs...)
}

// mechanism reads the password file and returns the kafka-go mechanism,
// nil when SASL is off.
func (s SASL) mechanism() (sasl.Mechanism, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if s.Mechanism == "" {
		return nil, nil
	}
	password, err := tlsfiles.ReadSecret("kafka-sasl-password-file", s.PasswordFile)
	if err != nil {
		return nil, err
	}
	switch s.Mechanism {
	case SASLPlain:
		return plain.Mechanism{Username: s.Username, Password: password}, nil
	case SASLScramSHA256:
		m, err := scram.Mechanism(scram.SHA256, s.Username, password)
		if err != nil {
			return nil, fmt.Errorf("kafka-sasl: %w", err)
		}
		return m, nil
	default:
		m, err := scram.Mechanism(scram.SHA512, s.Username, password)
		if err != nil {
			return nil, fmt.Errorf("kafka-sasl: %w", err)
		}
		return m, nil
	}
}

// RegisterSecurityFlags binds c.TLS and c.SASL to the kafka-tls… and
// kafka-sasl-… flags (RegisterFlags includes them; a launcher that
// passes them on to services registers them alone).
func (c *Config) RegisterSecurityFlags(fs *flag.FlagSet) {
	c.TLS.RegisterFlags(fs, "kafka", "Kafka brokers")
	c.SASL.RegisterFlags(fs)
}

// security is the TLS configuration and SASL mechanism every connection
// of a client uses; both nil for a plain-text, unauthenticated cluster.
type security struct {
	tls   *tls.Config
	sasl  sasl.Mechanism // a trackedMechanism when not nil
	auth  *authTracker   // the SASL sessions of sasl, nil without SASL
	conns *connTracker   // the client's connections
}

// loadSecurity reads the certificate, key and password files. Each client
// (admin client, writer, group, reader) loads them when it is built, so
// that renewed certificates and rotated passwords are picked up by the
// next process or client without a restart of the others.
func (c Config) loadSecurity() (security, error) {
	t, terr := c.TLS.Load("kafka")
	m, serr := c.SASL.mechanism()
	if err := errors.Join(terr, serr); err != nil {
		return security{}, err
	}
	sec := security{tls: t, conns: &connTracker{}}
	if m != nil {
		sec.auth = &authTracker{}
		sec.sasl = trackedMechanism{Mechanism: m, auth: sec.auth}
	}
	return sec, nil
}

// connTracker counts a client's TCP connections and notes whether any of
// them ever received a byte. A TLS listener reached in plain text (a
// missing -kafka-tls) closes every connection without a word, which
// kafka-go reports as an unexpected EOF like any dropped connection; a
// client whose every one of several connections was closed so is
// misconfigured, not unlucky.
type connTracker struct {
	dials    atomic.Int64
	answered atomic.Bool
}

// silentDials is how many connections closed without an answer (and no
// answer ever) make a client misconfigured rather than unlucky.
const silentDials = 3

// silent reports whether the brokers closed silentDials connections and
// never answered one.
func (t *connTracker) silent() bool {
	return t != nil && t.dials.Load() >= silentDials && !t.answered.Load()
}

// dialer returns a dial function with kafka-go's defaults (timeout, dual
// stack) whose connections report to t.
func (t *connTracker) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, DualStack: true} //nolint:staticcheck // DualStack: kafka-go's default, kept
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t.dials.Add(1)
		return &trackedConn{Conn: c, t: t}, nil
	}
}

type trackedConn struct {
	net.Conn
	t *connTracker
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.t.answered.Load() {
		c.t.answered.Store(true)
	}
	return n, err
}

// authTracker counts the SASL sessions of one client that started and
// that completed. Kafka answers a failed authentication with an error
// (SASLAuthenticationFailed), but some brokers (kfake among them) just
// close the connection, which kafka-go reports as an unexpected EOF like
// any dropped connection: a client whose sessions started and none ever
// completed is one whose credentials were refused.
type authTracker struct {
	started, completed atomic.Int64
}

// trackedMechanism is a sasl.Mechanism that counts its sessions.
type trackedMechanism struct {
	sasl.Mechanism
	auth *authTracker
}

func (m trackedMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	sm, ir, err := m.Mechanism.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	m.auth.started.Add(1)
	return trackedSession{StateMachine: sm, auth: m.auth}, ir, nil
}

type trackedSession struct {
	sasl.StateMachine
	auth *authTracker
}

func (s trackedSession) Next(ctx context.Context, challenge []byte) (bool, []byte, error) {
	done, resp, err := s.StateMachine.Next(ctx, challenge)
	if done && err == nil {
		s.auth.completed.Add(1)
	}
	return done, resp, err
}

// classify wraps err with ErrAuth when it is an authentication failure:
// IsAuthError, or a connection the brokers closed while this client had
// never completed a SASL authentication (see authTracker). Other errors
// are returned as they are.
func (s security) classify(err error) error {
	switch {
	case err == nil || errors.Is(err, ErrAuth):
		return err
	case IsAuthError(err):
		return authError(err)
	case s.auth != nil && s.auth.started.Load() > 0 && s.auth.completed.Load() == 0 &&
		(errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return authError(fmt.Errorf("the brokers closed the connection during SASL authentication (wrong password, user or mechanism): %w", err))
	case s.conns.silent() && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return authError(fmt.Errorf("the brokers closed %d connections without answering (a TLS listener reached without -kafka-tls, or not a Kafka port): %w", s.conns.dials.Load(), err))
	default:
		return err
	}
}

// dialTimeout is kafka-go's default dialer timeout, kept for the dialers
// of readers and consumer groups built here.
const dialTimeout = 10 * time.Second

// dialer returns a dialer for readers and consumer groups: kafka-go's
// default one plus the security settings.
func (s security) dialer() *kafka.Dialer {
	return &kafka.Dialer{Timeout: dialTimeout, DualStack: true, TLS: s.tls, SASLMechanism: s.sasl, DialFunc: s.conns.dialer(0)}
}

// transportDialTimeout is kafka-go's default for transports.
const transportDialTimeout = 3 * time.Second

// transport returns a transport for admin clients and writers.
func (s security) transport() *kafka.Transport {
	return &kafka.Transport{TLS: s.tls, SASL: s.sasl, Dial: s.conns.dialer(transportDialTimeout)}
}

// ErrAuth marks a connection the brokers or the client refused for its
// credentials: a failed SASL authentication, a mechanism the brokers do
// not offer, a denied operation, a server certificate that does not
// verify, a client certificate the broker rejected. Retrying cannot cure
// it, so every retry loop of this package gives up at once: a wrong
// password fails a service at start with this error instead of retrying
// until an orchestrator kills it.
var ErrAuth = errors.New("kafka authentication failed")

// IsAuthError reports whether err is an authentication or authorization
// failure (see ErrAuth).
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrAuth) {
		return true
	}
	var (
		kerr    kafka.Error
		verr    *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		alert   tls.AlertError
		header  tls.RecordHeaderError
		op      *net.OpError
	)
	switch {
	case errors.As(err, &kerr):
		switch kerr {
		case kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState,
			kafka.TopicAuthorizationFailed, kafka.GroupAuthorizationFailed, kafka.ClusterAuthorizationFailed,
			kafka.TransactionalIDAuthorizationFailed, kafka.DelegationTokenAuthorizationFailed:
			return true
		}
		return false
	case errors.As(err, &verr), errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid):
		// The server's certificate does not verify against the CA.
		return true
	case errors.As(err, &alert), errors.As(err, &op) && op.Op == "remote error":
		// The server refused the handshake with a TLS alert (crypto/tls
		// reports one as a *net.OpError "remote error"): most often no
		// or an untrusted client certificate.
		return true
	case errors.As(err, &header):
		// The server does not speak TLS (-kafka-tls against a plain-text
		// listener).
		return true
	case strings.Contains(err.Error(), expectsTLS):
		// The other way round: plain text to a TLS listener, which
		// kafka-go recognises in the TLS alert it got back.
		return true
	default:
		return false
	}
}

// expectsTLS is how kafka-go says that a plain-text request got a TLS
// alert back (its only sign of it: the error is an io.ErrUnexpectedEOF).
const expectsTLS = "broker appears to be expecting TLS"

// authError wraps an authentication failure so that it says what to check.
func authError(err error) error {
	return fmt.Errorf("%w (check -kafka-tls…, -kafka-sasl-… and the brokers' listener): %w", ErrAuth, err)
}
