package websim

import (
	"net/netip"
	"strings"
	"testing"
)

// TestValidatePrivate: Config.Private takes private IPv4 addresses (the
// multi-host harness's web host) and nothing else; without it only
// loopback ones.
func TestValidatePrivate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"private", Config{Private: true, Hosts: 200, FirstAddr: netip.MustParseAddr("10.78.0.1")}, ""},
		{"private 192.168", Config{Private: true, Hosts: 3, FirstAddr: netip.MustParseAddr("192.168.7.1")}, ""},
		{"private leaves the range", Config{Private: true, Hosts: 10, FirstAddr: netip.MustParseAddr("10.255.255.250")}, "private IPv4"},
		{"private but loopback", Config{Private: true, Hosts: 3, FirstAddr: netip.MustParseAddr("127.1.0.1")}, "private IPv4"},
		{"private but public", Config{Private: true, Hosts: 3, FirstAddr: netip.MustParseAddr("192.0.2.1")}, "private IPv4"},
		{"private address without Private", Config{Hosts: 3, FirstAddr: netip.MustParseAddr("10.78.0.1")}, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.setDefaults()
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
