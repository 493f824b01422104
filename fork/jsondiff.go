package fork

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// FieldChange is one changed field of a result (DESIGN §12 "Diff"): its
// path in JSON Pointer form (RFC 6901; "" for the whole value) and its
// value on each side, nil where that side does not hold it.
type FieldChange struct {
	Path string          `json:"path"`
	A    json.RawMessage `json:"a,omitempty"`
	B    json.RawMessage `json:"b,omitempty"`
}

// JSONDiff returns the fields in which JSON values a and b differ, in
// path order: objects are compared key by key and arrays index by index,
// down to the first values that differ in kind or are unequal scalars. A
// value that is not JSON is compared whole. Equal values give nil.
func JSONDiff(a, b json.RawMessage) []FieldChange {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		if bytes.Equal(a, b) {
			return nil
		}
		return []FieldChange{{A: a, B: b}}
	}
	var out []FieldChange
	jsonDiff("", va, vb, true, true, &out)
	return out
}

// jsonDiff appends the changes between a and b at path; hasA and hasB say
// whether each side holds the path.
func jsonDiff(path string, a, b any, hasA, hasB bool, out *[]FieldChange) {
	if hasA && hasB {
		switch ta := a.(type) {
		case map[string]any:
			if tb, ok := b.(map[string]any); ok {
				keys := make([]string, 0, len(ta)+len(tb))
				for k := range ta {
					keys = append(keys, k)
				}
				for k := range tb {
					if _, dup := ta[k]; !dup {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				for _, k := range keys {
					va, okA := ta[k]
					vb, okB := tb[k]
					jsonDiff(path+"/"+escapePointer(k), va, vb, okA, okB, out)
				}
				return
			}
		case []any:
			if tb, ok := b.([]any); ok {
				for i := range max(len(ta), len(tb)) {
					var va, vb any
					if i < len(ta) {
						va = ta[i]
					}
					if i < len(tb) {
						vb = tb[i]
					}
					jsonDiff(fmt.Sprintf("%s/%d", path, i), va, vb, i < len(ta), i < len(tb), out)
				}
				return
			}
		}
		if equalJSON(a, b) {
			return
		}
	}
	c := FieldChange{Path: path}
	if hasA {
		c.A = mustJSON(a)
	}
	if hasB {
		c.B = mustJSON(b)
	}
	*out = append(*out, c)
}

// equalJSON reports whether two decoded scalars (or mixed kinds) are equal.
func equalJSON(a, b any) bool {
	return bytes.Equal(mustJSON(a), mustJSON(b))
}

// mustJSON encodes a decoded JSON value, which always encodes.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// escapePointer escapes a key as a JSON Pointer reference token.
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
