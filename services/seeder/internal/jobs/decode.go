package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode reads one crawl request (the JSON body of POST /v1/crawls) from r,
// strictly: an unknown field or a value of the wrong JSON type is a
// FieldErrors naming the field, like every validation problem; anything
// else that is not exactly one JSON object (syntax, trailing data, a read
// error of r) is an error starting "malformed JSON: " that wraps the
// cause. Decode does not validate the values: Build does.
func Decode(r io.Reader) (Request, error) {
	var req Request
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return req, nil
	case errors.As(err, &typeErr):
		return Request{}, FieldErrors{{Field: typeErr.Field, Message: fmt.Sprintf("want %v, got JSON %s", typeErr.Type, typeErr.Value)}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for it.
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Request{}, FieldErrors{{Field: field, Message: "unknown field"}}
	default:
		return Request{}, fmt.Errorf("malformed JSON: %w", err)
	}
}
