package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Sessions are stateless: the cookie holds its issue time and a random
// nonce, signed with a key derived from the API token, so that a
// restarted server keeps its operators logged in and a changed token logs
// everyone out. The CSRF token of a session is a second MAC of the same
// payload: a form posted from another session, or forged without the
// cookie's secret, fails.
const (
	cookieName = "trawl_console"
	// SessionTTL is how long a login lasts.
	SessionTTL = 12 * time.Hour
	payloadLen = 8 + 16 // issued-at (unix seconds), nonce
)

// keys holds the session and CSRF MAC keys.
type keys struct {
	token      []byte
	sessionKey []byte
	csrf       []byte
}

func newKeys(token string) keys {
	derive := func(purpose string) []byte {
		m := hmac.New(sha256.New, []byte(token))
		m.Write([]byte("trawl console " + purpose))
		return m.Sum(nil)
	}
	return keys{token: []byte(token), sessionKey: derive("session"), csrf: derive("csrf")}
}

// tokenOK compares a submitted token with the API token in constant time
// (hashed first, so that the length does not leak either).
func (k keys) tokenOK(got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(k.token)
	return len(k.token) > 0 && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func mac(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// newSession returns a fresh cookie value.
func (k keys) newSession(now time.Time) string {
	p := make([]byte, payloadLen)
	binary.BigEndian.PutUint64(p, uint64(now.Unix()))
	_, _ = rand.Read(p[8:]) // crypto/rand.Read never fails
	return b64.EncodeToString(p) + "." + b64.EncodeToString(mac(k.sessionKey, p))
}

// session verifies a cookie value and returns its payload, or nil.
func (k keys) session(v string, now time.Time) []byte {
	enc, sig, ok := strings.Cut(v, ".")
	if !ok {
		return nil
	}
	p, err := b64.DecodeString(enc)
	if err != nil || len(p) != payloadLen {
		return nil
	}
	s, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(s, mac(k.sessionKey, p)) {
		return nil
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(p)), 0)
	if now.Before(issued.Add(-time.Minute)) || now.After(issued.Add(SessionTTL)) {
		return nil
	}
	return p
}

// csrfToken is the CSRF token of a session payload.
func (k keys) csrfToken(payload []byte) string {
	return b64.EncodeToString(mac(k.csrf, payload))
}

func (k keys) csrfOK(payload []byte, got string) bool {
	g, err := b64.DecodeString(got)
	return err == nil && hmac.Equal(g, mac(k.csrf, payload))
}

// sameOrigin rejects a cross-site request: a Sec-Fetch-Site header other
// than same-origin, or an Origin header naming another origin. A client
// that sends neither (curl, old browsers) still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https")
}

// safeNext returns next when it is a console path, else the console's root.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return Prefix
}
