package chexport

import (
	"reflect"
	"testing"
)

// TestEachField: the members of a JSON object, whatever its spacing, its
// escapes and the brackets and quotes inside its values; nothing of what
// is not a valid JSON object.
func TestEachField(t *testing.T) {
	tests := []struct {
		obj  string
		want []string // name, raw value, …
	}{
		{`{"a":"x","b":1.5e3,"c":[1,{"d":"]}"}],"e":{"f":"{"},"g":-2,"h":true,"i":null}`,
			[]string{"a", `"x"`, "b", "1.5e3", "c", `[1,{"d":"]}"}]`, "e", `{"f":"{"}`, "g", "-2", "h", "true", "i", "null"}},
		{" { \"k\\\"q\" : \"v\\\\\" ,\n\t\"n\":0 } ", []string{`k"q`, `"v\\"`, "n", "0"}},
		{`{"\u00e9t\u00e9":"\"x\""}`, []string{"été", `"\"x\""`}},
		{`{}`, nil},
		{``, nil},
		{`[{"a":1}]`, nil},
		{`{"a":1`, nil},
		{`"{\"a\":1}"`, nil},
	}
	for _, tt := range tests {
		var got []string
		eachField(tt.obj, func(name, raw string) { got = append(got, name, raw) })
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("eachField(%q) = %q, want %q", tt.obj, got, tt.want)
		}
	}
	for raw, want := range map[string]string{`"a \"b\", c"`: `a "b", c`, `"plain"`: "plain", "12.5": "12.5", `["x","y"]`: `["x","y"]`, "": ""} {
		if got := fieldText(raw); got != want {
			t.Errorf("fieldText(%q) = %q, want %q", raw, got, want)
		}
	}
}
