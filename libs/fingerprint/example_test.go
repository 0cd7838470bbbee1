package fingerprint_test

import (
	"fmt"

	"github.com/trawl-crawler/trawl/libs/fingerprint"
)

func ExampleURL() {
	a := fingerprint.URL("crawl-1", "http://example.com/")
	b := fingerprint.URL("crawl-2", "http://example.com/")
	fmt.Println(a == fingerprint.String("crawl-1\x00http://example.com/"), a == b)
	// Output: true false
}

func ExampleRabin_Digest() {
	d := fingerprint.Default.Digest()
	_, _ = d.Write([]byte("<html>"))
	_, _ = d.WriteString("</html>")
	fmt.Println(d.Sum64() == fingerprint.String("<html></html>"))
	// Output: true
}
