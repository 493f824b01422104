package eventlog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// JSONValue turns a recorded value (input, output, args, result: the SDK
// stores JSON) into JSON for people: itself, compacted, if it is JSON; a
// string if it is other text; {"base64": …} otherwise; null when empty.
func JSONValue(b []byte) json.RawMessage {
	switch {
	case len(b) == 0:
		return json.RawMessage("null")
	case json.Valid(b):
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return buf.Bytes()
		}
	case utf8.Valid(b):
		out, _ := json.Marshal(string(b))
		return out
	}
	out, _ := json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
	return out
}

// MarshalJSON writes the event as {"seq", "time", "kind", "data"}, data
// being the payload's [PayloadFields] as an object.
func (e Event) MarshalJSON() ([]byte, error) {
	var t string
	if !e.Time.IsZero() {
		t = e.Time.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(struct {
		Seq  uint64  `json:"seq"`
		Time string  `json:"time,omitempty"`
		Kind string  `json:"kind"`
		Data Payload `json:"data"`
	}{e.Seq, t, e.Kind().String(), e.Data})
}

// Field is one field of a payload for people, named by its json tag (the
// same name as its msgpack tag).
type Field struct {
	Name string
	// Value is a string (also for times and IDs, "" when zero), bool,
	// int64, uint64, []string, json.RawMessage (a recorded value, see
	// [JSONValue]), or []Fields (a list of nested structs).
	Value any
}

// Fields is a payload or a nested struct as an ordered list of fields.
type Fields []Field

// MarshalJSON writes the fields as an object, in their order.
func (o Fields) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		buf.Write(k)
		buf.WriteByte(':')
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

var (
	bytesType = reflect.TypeFor[[]byte]()
	rawType   = reflect.TypeFor[json.RawMessage]()
	idType    = reflect.TypeFor[ID]()
	timeType  = reflect.TypeFor[time.Time]()
)

// PayloadFields lists a payload's fields for people: every field under its
// json tag, in declaration order; recorded values as JSON ([JSONValue])
// rather than bytes; IDs and times as text ("" when zero). A field that
// format version 2 or 3 added to an older kind ([V2Fields], [V3Fields]) is left out
// while it is zero, so events that do not use it read as before. A nil
// payload has no fields.
func PayloadFields(p Payload) Fields {
	if p == nil {
		return nil
	}
	return objectOf(reflect.ValueOf(p), laterFields[p.Kind()])
}

// laterFields lists, per kind, the fields that format versions 2 and 3
// added to it ([V2Fields], [V3Fields]).
var laterFields = func() map[Kind][]string {
	m := map[Kind][]string{}
	for _, f := range []map[Kind][]string{V2Fields, V3Fields} {
		for k, tags := range f {
			m[k] = append(m[k], tags...)
		}
	}
	return m
}()

// payloadJSON is the JSON of a payload: its [PayloadFields] as an object.
func payloadJSON(p Payload) ([]byte, error) { return PayloadFields(p).MarshalJSON() }

func objectOf(rv reflect.Value, later []string) Fields {
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	rt := rv.Type()
	out := Fields{}
	for i := range rt.NumField() {
		sf := rt.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = sf.Name
		}
		if slices.Contains(later, name) && rv.Field(i).IsZero() {
			continue
		}
		out = append(out, Field{Name: name, Value: valueOf(rv.Field(i))})
	}
	return out
}

func valueOf(v reflect.Value) any {
	switch v.Type() {
	case bytesType, rawType:
		return JSONValue(v.Bytes())
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	case idType:
		id := v.Interface().(ID)
		if id.IsZero() {
			return ""
		}
		return id.String()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			out := make([]string, v.Len())
			for i := range out {
				out[i] = v.Index(i).String()
			}
			return out
		}
		out := make([]Fields, v.Len())
		for i := range out {
			out[i] = objectOf(v.Index(i), nil)
		}
		return out
	case reflect.Struct:
		return objectOf(v, nil)
	}
	return fmt.Sprint(v.Interface())
}

// MarshalJSON methods: every payload marshals through payloadJSON, so that
// recorded values print as JSON and times and IDs as text.

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ExecutionCreated) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *DispatchStarted) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *StepStarted) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *StepSucceeded) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *StepFailed) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *StepCancelled) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *StepDenied) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ResourceBound) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ResourceCaptured) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ResourceCaptureFailed) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ExecutionCompleted) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ExecutionFailed) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ForkCreated) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *CancelRequested) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ExecutionCancelled) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *DispatchParked) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *TimerStarted) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *TimerFired) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ApprovalRequested) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ApprovalGranted) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ApprovalRejected) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *MarkerRecorded) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *StepAbandoned) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ForkDiverged) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *MessageReceived) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *EventSet) MarshalJSON() ([]byte, error) { return payloadJSON(p) }

// MarshalJSON implements json.Marshaler (see [JSONValue]).
func (p *ChildEnded) MarshalJSON() ([]byte, error) { return payloadJSON(p) }
