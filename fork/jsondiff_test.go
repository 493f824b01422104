package fork

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJSONDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       []FieldChange
	}{
		{"equal", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, nil},
		{"scalar field", `{"env":"prod","n":1}`, `{"env":"staging","n":1}`,
			[]FieldChange{{Path: "/env", A: json.RawMessage(`"prod"`), B: json.RawMessage(`"staging"`)}}},
		{"added and removed", `{"a":1}`, `{"b":2}`,
			[]FieldChange{{Path: "/a", A: json.RawMessage(`1`)}, {Path: "/b", B: json.RawMessage(`2`)}}},
		{"nested array", `{"c":[{"x":1},{"x":2}]}`, `{"c":[{"x":1},{"x":3},4]}`,
			[]FieldChange{{Path: "/c/1/x", A: json.RawMessage(`2`), B: json.RawMessage(`3`)}, {Path: "/c/2", B: json.RawMessage(`4`)}}},
		{"kind changed", `{"a":{"b":1}}`, `{"a":[1]}`,
			[]FieldChange{{Path: "/a", A: json.RawMessage(`{"b":1}`), B: json.RawMessage(`[1]`)}}},
		{"escaped key", `{"a/b~":1}`, `{"a/b~":2}`,
			[]FieldChange{{Path: "/a~1b~0", A: json.RawMessage(`1`), B: json.RawMessage(`2`)}}},
		{"whole", `"x"`, `"y"`, []FieldChange{{Path: "", A: json.RawMessage(`"x"`), B: json.RawMessage(`"y"`)}}},
		{"not JSON", `x`, `y`, []FieldChange{{A: json.RawMessage(`x`), B: json.RawMessage(`y`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, JSONDiff(json.RawMessage(tc.a), json.RawMessage(tc.b))); d != "" {
				t.Errorf("JSONDiff(%s, %s) (-want +got):\n%s", tc.a, tc.b, d)
			}
		})
	}
}
