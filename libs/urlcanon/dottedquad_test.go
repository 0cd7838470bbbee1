package urlcanon

import "testing"

func TestDottedQuad(t *testing.T) {
	for host, want := range map[string]bool{
		"1.2.3.4": true, "0.0.0.0": true, "255.255.255.255": true, "127.0.0.1": true,
		"256.1.1.1": false, "1.2.3": false, "1.2.3.4.5": false, "1.2.3.": false, ".1.2.3": false,
		"01.2.3.4": false, "1..3.4": false, "1.2.3.4a": false, "1.2.3.1000": false, "": false, "a.b.c.d": false,
	} {
		if got := dottedQuad(host); got != want {
			t.Errorf("dottedQuad(%q) = %v, want %v", host, got, want)
		}
	}
}
