package urlcanon_test

import (
	"errors"
	"fmt"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

func ExampleCanonicalize() {
	u, err := urlcanon.Canonicalize("HTTP://Bücher.DE:80/a/./b/../%7euser?b=2&a=1#top")
	fmt.Println(u, err)
	_, err = urlcanon.Canonicalize("mailto:someone@example.com")
	fmt.Println(errors.Is(err, urlcanon.ErrScheme))
	// Output:
	// http://xn--bcher-kva.de/a/~user?b=2&a=1 <nil>
	// true
}

func ExampleResolve() {
	u, err := urlcanon.Resolve("https://example.com/docs/guide/", " ..\\api\tv2?q=1#frag ")
	fmt.Println(u, err)
	// Output: https://example.com/docs/apiv2?q=1 <nil>
}

func ExamplePolitenessKey() {
	for _, u := range []string{"https://WWW.Example.com:443/a", "http://example.com:8080/b"} {
		k, _ := urlcanon.PolitenessKey(u)
		fmt.Println(k)
	}
	// Output:
	// www.example.com
	// example.com:8080
}
