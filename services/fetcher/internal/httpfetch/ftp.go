package httpfetch

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/jlaffaye/ftp"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// fetchFTP fetches an ftp:// URL: a file is retrieved (status 200, body
// capped like HTTP); a directory (a path ending in "/", or one RETR refuses)
// is listed and turned into an HTML page of absolute links, so the parser
// follows it like any page. A missing file or directory is status 404.
// Every connection (control and data) goes through the checked dialer and
// carries the fetch deadline.
func (f *Fetcher) fetchFTP(ctx context.Context, u *url.URL, r Request, resp *Response) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.FetchTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "21")
	}
	dial := func(network, address string) (net.Conn, error) {
		c, err := f.dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		_ = c.SetDeadline(deadline)
		return c, nil
	}
	c, err := ftp.Dial(addr, ftp.DialWithContext(ctx), ftp.DialWithDialFunc(dial), ftp.DialWithTimeout(f.opts.ConnectTimeout),
		ftp.DialWithDisabledMLSD(true))
	resp.TTFB = time.Since(resp.Start)
	if err != nil {
		resp.Err = fmt.Errorf("dial ftp: %w", err)
		return
	}
	defer func() { _ = c.Quit() }()
	user, pass := "anonymous", "anonymous@"
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	if err := c.Login(user, pass); err != nil {
		resp.Err = fmt.Errorf("login ftp: %w", err)
		return
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	limit := f.opts.MaxBodyBytes
	if r.MaxBodyBytes > 0 {
		limit = r.MaxBodyBytes
	} else if r.keptType("", p) != "" {
		limit = max(limit, f.opts.MaxDocumentBytes) // a document the crawl reads
	}
	if !strings.HasSuffix(p, "/") {
		rr, err := c.Retr(p)
		if err == nil {
			body, rerr := io.ReadAll(io.LimitReader(rr, limit+1))
			_ = rr.Close()
			if rerr != nil {
				resp.Err = fmt.Errorf("read ftp file: %w", rerr)
				return
			}
			resp.Status = http.StatusOK
			f.ftpBody(resp, r, body, limit, p)
			if r.Capture {
				resp.Exchange = &Exchange{FTP: true, BodyRead: true, Body: body[:min(int64(len(body)), limit)]}
			}
			return
		}
		if !isFTPUnavailable(err) {
			resp.Err = fmt.Errorf("retr ftp: %w", err)
			return
		}
		// perhaps a directory: list it
	}
	entries, err := c.List(p)
	if err != nil {
		if isFTPUnavailable(err) {
			resp.Status = http.StatusNotFound
			return
		}
		resp.Err = fmt.Errorf("list ftp: %w", err)
		return
	}
	resp.Status = http.StatusOK
	resp.ContentType = "text/html"
	resp.Charset = "utf-8"
	resp.Body = ftpListing(u, entries)
	resp.BodyBytes = int64(len(resp.Body))
	if r.Capture {
		resp.Exchange = &Exchange{FTP: true, BodyRead: true, Body: resp.Body}
	}
}

// ftpBody fills resp with a retrieved file, typed by its extension or by
// sniffing, converted to UTF-8 when it is text.
func (f *Fetcher) ftpBody(resp *Response, r Request, body []byte, limit int64, filePath string) {
	if int64(len(body)) > limit {
		body = body[:limit]
		resp.Truncated = true
		resp.Kind = failure.BodyTooLarge
		resp.Err = fmt.Errorf("read ftp file: over %d bytes: %w", limit, failure.ErrBodyTooLarge)
	}
	resp.BodyBytes = int64(len(body))
	ct := mime.TypeByExtension(path.Ext(filePath))
	if ct == "" {
		ct = http.DetectContentType(body)
	}
	mt, _, _ := mime.ParseMediaType(ct)
	resp.ContentType = mt
	if kept := r.keptType(mt, filePath); kept != "" {
		resp.ContentType = kept
		resp.Body = body
		return
	}
	if r.Raw {
		resp.Body = body
		return
	}
	if !IsText(mt) || len(body) == 0 {
		return
	}
	resp.Body, resp.Charset = ToUTF8(body, ct, mt)
}

// ftpListing renders a directory listing as HTML with absolute links.
func ftpListing(dir *url.URL, entries []*ftp.Entry) []byte {
	base := *dir
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	base.RawPath = ""
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>Index of %s</title></head><body><ul>\n", html.EscapeString(base.Path))
	for _, e := range entries {
		if e.Name == "." || e.Name == ".." || e.Name == "" {
			continue
		}
		name := e.Name
		if e.Type == ftp.EntryTypeFolder {
			name += "/"
		}
		link := base.ResolveReference(&url.URL{Path: name})
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(link.String()), html.EscapeString(name))
	}
	b.WriteString("</ul></body></html>\n")
	return []byte(b.String())
}

func isFTPUnavailable(err error) bool {
	var te *textproto.Error
	return errors.As(err, &te) && te.Code == ftp.StatusFileUnavailable
}
