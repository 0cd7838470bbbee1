package fieldrules

import (
	"strings"

	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// navigator walks a parsed page for antchfx/xpath. htmlquery has one, but
// that package also fetches URLs (net/http), which a pure package must not
// reach; this one also never panics on a node type it does not know.
type navigator struct {
	root, curr *html.Node
	attr       int // index in curr.Attr, -1 on the element itself
}

func newNavigator(doc *html.Node) *navigator { return &navigator{root: doc, curr: doc, attr: -1} }

func (n *navigator) NodeType() xpath.NodeType {
	switch n.curr.Type {
	case html.CommentNode:
		return xpath.CommentNode
	case html.TextNode:
		return xpath.TextNode
	case html.ElementNode:
		if n.attr != -1 {
			return xpath.AttributeNode
		}
		return xpath.ElementNode
	}
	return xpath.RootNode // the document, a doctype, and anything else
}

func (n *navigator) LocalName() string {
	if n.attr != -1 {
		return n.curr.Attr[n.attr].Key
	}
	return n.curr.Data
}

func (*navigator) Prefix() string { return "" }

func (n *navigator) Value() string {
	switch n.curr.Type {
	case html.CommentNode, html.TextNode:
		return n.curr.Data
	case html.ElementNode:
		if n.attr != -1 {
			return n.curr.Attr[n.attr].Val
		}
		return innerText(n.curr)
	}
	return ""
}

func (n *navigator) Copy() xpath.NodeNavigator { c := *n; return &c }

func (n *navigator) MoveToRoot() { n.curr, n.attr = n.root, -1 }

func (n *navigator) MoveToParent() bool {
	if n.attr != -1 {
		n.attr = -1
		return true
	}
	if p := n.curr.Parent; p != nil {
		n.curr = p
		return true
	}
	return false
}

func (n *navigator) MoveToNextAttribute() bool {
	if n.attr >= len(n.curr.Attr)-1 {
		return false
	}
	n.attr++
	return true
}

func (n *navigator) MoveToChild() bool {
	if n.attr != -1 || n.curr.FirstChild == nil {
		return false
	}
	n.curr = n.curr.FirstChild
	return true
}

func (n *navigator) MoveToFirst() bool {
	if n.attr != -1 || n.curr.PrevSibling == nil {
		return false
	}
	for n.curr.PrevSibling != nil {
		n.curr = n.curr.PrevSibling
	}
	return true
}

func (n *navigator) MoveToNext() bool {
	if n.attr != -1 || n.curr.NextSibling == nil {
		return false
	}
	n.curr = n.curr.NextSibling
	return true
}

func (n *navigator) MoveToPrevious() bool {
	if n.attr != -1 || n.curr.PrevSibling == nil {
		return false
	}
	n.curr = n.curr.PrevSibling
	return true
}

func (n *navigator) MoveTo(other xpath.NodeNavigator) bool {
	o, ok := other.(*navigator)
	if !ok || o.root != n.root {
		return false
	}
	n.curr, n.attr = o.curr, o.attr
	return true
}

// innerText is the text of a node and its descendants, as goquery's Text.
func innerText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
