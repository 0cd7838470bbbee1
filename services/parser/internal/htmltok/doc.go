// Package htmltok is golang.org/x/net/html's tokenizer (v0.62.0), forked to
// read a body held wholly in memory without allocating: the extractor's
// one pass over a page (internal/extract/stream.go) spent most of its time
// and allocations in x/net/html's Tokenizer.
//
// What it saves, measured (BenchmarkTokenize, the websim article of 22 KiB,
// the development machine, 2026-11-27): 27-28 µs, 728 B and 7 allocations a
// page against x/net/html's 128-134 µs, 25.8 KB and 1 917 allocations.
// The extractor's whole streaming pass over that page takes 89 µs
// (BenchmarkExtractPaths/websim/stream), so upstream's tokenizer would
// more than double it: about 0.1 ms a page, a fifth to a third of the
// parser's CPU per request on the bench web. It earns its keep.
//
// For the methods it keeps (Next, Raw, Text, TagName, TagAttr, AllowCDATA,
// NextIsNotRawText, Err), a Tokenizer made by New(body) returns the same
// tokens as x/net/html's made by html.NewTokenizer(bytes.NewReader(body)):
// the same types (x/net/html's html.TokenType values), the same Raw, Text,
// TagName and TagAttr bytes (nil where x/net/html's are nil), the same
// raw text, RCDATA, script data, plaintext and CDATA handling, the same
// comment and doctype quirks, NUL and CR/CRLF handling, and the same
// ErrorToken and io.EOF at the end. FuzzTokenizerMatchesXNetHTML and
// TestTokenizerMatchesXNetHTML run both side by side to check it.
//
// The files come from x/net/html v0.62.0 (BSD licence, in LICENSE):
// token.go from token.go, escape.go from escape.go (unescape and what it
// needs, unchanged but for one if-else chain written as a switch) and entity.go from entity.go (unchanged). What was
// changed in token.go, and why the tokens stay the same:
//
//   - Input. New takes the whole body; there is no io.Reader, no buffer to
//     grow and compact, no SetMaxBuf (the extractor set no limit: the
//     fetcher caps bodies) and no Buffered. readByte, which upstream calls
//     for every byte and cannot be inlined, is an index into the body,
//     inlined, that sets io.EOF at its end. Over a bytes.Reader upstream
//     sees the same bytes and io.EOF as its only error, so the branches it
//     takes on other errors (in readDoctype and readCDATA) are gone.
//   - Hot loops. Text up to the next '<', raw text and script data up to
//     the next '<', bogus comments and doctypes up to the next '>' and
//     quoted attribute values up to the quote are found with
//     bytes.IndexByte; tag names, attribute names and unquoted values are
//     scanned by loops over the body. Each stops where upstream's byte by
//     byte loop stops, leaves the reader where it leaves it, and sets
//     io.EOF at the end as readByte does.
//   - Raw text elements. startTagIn returns the element name it matched
//     ("script", "title", …): upstream lower-cases the tag name into a new
//     string, equal to it (the match is ASCII case-insensitive, on names
//     of the same length).
//   - Duplicate attributes. Upstream keeps the first of attributes whose
//     lower-cased names are equal, copying every name into a new string
//     and a map. Names are compared in place instead (dupAttr); a tag with
//     more than 16 attributes uses a map, so that the test stays linear.
//   - Text, TagName and TagAttr. Upstream's TagName and TagAttr always copy
//     (bytes.ReplaceAll) and lower-case, convert newlines and unescape the
//     copies; its Text converts newlines and unescapes in its buffer, in
//     place. Here each returns the body's bytes when no step can change
//     them (no upper-case letter or NUL in a name; no NUL, CR or '&' in a
//     value; no CR, no NUL to replace and no '&' to unescape in a text),
//     and else applies upstream's functions (convertNewlines, unescape,
//     lower, and a NUL replacement equal to bytes.ReplaceAll's), in
//     upstream's order, to a copy in a buffer of the Tokenizer.
//
// Differences in the API, within what x/net/html documents: the slices that
// Raw, Text, TagName and TagAttr return are valid until the next call to
// Next (x/net/html's Text and Raw may change then too; its TagName and
// TagAttr return fresh copies, which stay valid), may be subslices of the
// body, and must not be modified (their capacity is their length, so that
// an append copies). The Tokenizer never writes to the body, which must not
// change while it is read, and Raw returns the raw bytes even after Text
// (x/net/html's may return the converted ones). The slices that TagAttr
// returns for one tag stay as they are while the tag's other attributes are
// read. There is no Token method, no fragment constructor and no escaping.
//
// Benchmarks (2 shared cores, AMD EPYC, go1.26.8; benchstat medians of 6
// runs, the machine noisy): reading internal/extract/testdata's
// websim_article.html (22 KiB) as the extractor does (BenchmarkTokenize:
// the text of text tokens, the name and every attribute of tags), and
// extracting it (BenchmarkExtractWebsim in internal/extract, before and
// after stream.go used this package):
//
//	                        x/net/html   htmltok
//	Tokenize                410 µs/op    78.5 µs/op   (-81%; 52.5 → 274 MiB/s)
//	                        25792 B/op   728 B/op
//	                        1917 allocs  7 allocs
//	ExtractWebsim           585 µs/op    328 µs/op    (-44%)
//	                        46.0 KiB/op  30.7 KiB/op
//	                        1449 allocs  454 allocs
package htmltok
