package fork

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/forkline/forkline/eventlog"
)

// ToolArg is one argument [EditToolArgs] sets in a tool call: Key to
// Value, a JSON value.
type ToolArg struct {
	Key   string
	Value json.RawMessage
}

// ParseToolArg parses an argument edit as the command line gives it:
// "key=value" sets key to the string value, "key:=json" to the JSON value
// (as httpie writes them). An empty key, a missing "=", or ":=" with a
// value that is not JSON is an error wrapping [eventlog.ErrInvalid].
func ParseToolArg(s string) (ToolArg, error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return ToolArg{}, fmt.Errorf("%w: fork: tool argument %q: want key=value or key:=json", eventlog.ErrInvalid, s)
	}
	raw := strings.HasSuffix(key, ":")
	key = strings.TrimSuffix(key, ":")
	if key == "" {
		return ToolArg{}, fmt.Errorf("%w: fork: tool argument %q: empty key", eventlog.ErrInvalid, s)
	}
	if !raw {
		b, _ := json.Marshal(value) // a string always encodes
		return ToolArg{Key: key, Value: b}, nil
	}
	if !json.Valid([]byte(value)) {
		return ToolArg{}, fmt.Errorf("%w: fork: tool argument %s: %q is not JSON", eventlog.ErrInvalid, key, value)
	}
	return ToolArg{Key: key, Value: json.RawMessage(value)}, nil
}

// EditToolArgs returns body — the response body of a model call that asks
// for tools — with the arguments of one tool call changed: each of args
// sets its key to its value. It reads these formats:
//
//   - an OpenAI chat completion: choices[].message.tool_calls[], whose
//     function.arguments is a JSON object encoded as a string (it stays
//     one);
//   - an Anthropic message (type "message"): content[] blocks of type
//     tool_use, whose input is the object;
//   - either one streamed (server-sent events, DESIGN §16): OpenAI's
//     chat.completion.chunk deltas, whose tool_calls[].function.arguments
//     arrive in fragments, and Anthropic's content_block_start of a
//     tool_use block with its input_json_delta fragments. The stream is
//     re-chunked for the edited call only: its whole edited arguments go
//     in the event that carried its first fragment and its later fragments
//     become empty; every other event keeps its bytes.
//
// tool names the call by its tool's name, or by the call's ID (OpenAI's
// "call_…", Anthropic's "toolu_…") when the reply calls that tool more
// than once. Only keys the call already has are set, so that a misspelt key
// is refused rather than added. Objects along the way keep their keys'
// order and every untouched value keeps its bytes.
//
// A body of none of these formats, a tool the reply does not call, an
// ambiguous name, an unknown key, or no args is an error wrapping
// [eventlog.ErrInvalid] that names what was wrong.
func EditToolArgs(body []byte, tool string, args ...ToolArg) ([]byte, error) {
	if tool == "" {
		return nil, fmt.Errorf("%w: fork: edit tool args: empty tool name", eventlog.ErrInvalid)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: fork: edit tool args of %s: no key=value given", eventlog.ErrInvalid, tool)
	}
	calls, encode, err := replyCalls(body)
	if err != nil {
		return nil, fmt.Errorf("%w: fork: edit tool args of %s: %v", eventlog.ErrInvalid, tool, err)
	}
	call, err := pickCall(calls, tool)
	if err != nil {
		return nil, fmt.Errorf("%w: fork: edit tool args: %v", eventlog.ErrInvalid, err)
	}
	for _, a := range args {
		if a.Key == "" {
			return nil, fmt.Errorf("%w: fork: edit tool args of %s: empty key", eventlog.ErrInvalid, tool)
		}
		if !json.Valid(a.Value) {
			return nil, fmt.Errorf("%w: fork: edit tool args of %s: value of %s is not JSON", eventlog.ErrInvalid, tool, a.Key)
		}
		if !call.args.has(a.Key) {
			return nil, fmt.Errorf("%w: fork: edit tool args of %s: the call has no argument %q (it has %s)",
				eventlog.ErrInvalid, tool, a.Key, strings.Join(call.args.keys, ", "))
		}
		call.args.set(a.Key, a.Value)
	}
	call.commit()
	return encode(), nil
}

// ToolCall is one tool call a model reply asks for, as [ToolCalls] finds
// it: the call's ID, its tool's name, and its arguments (a JSON object).
type ToolCall struct {
	ID   string
	Name string
	Args json.RawMessage
}

// ToolCalls lists the tool calls a model reply's body asks for, in order,
// in the formats [EditToolArgs] reads (whole or streamed); a reply that
// calls no tool has none. A body of none of those formats, or a call whose
// arguments are not a JSON object, is an error wrapping
// [eventlog.ErrInvalid].
func ToolCalls(body []byte) ([]ToolCall, error) {
	calls, _, err := replyCalls(body)
	if err != nil {
		return nil, fmt.Errorf("%w: fork: tool calls: %v", eventlog.ErrInvalid, err)
	}
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		out[i] = ToolCall{ID: c.id, Name: c.name, Args: c.args.encode()}
	}
	return out, nil
}

// replyCalls finds the tool calls of a reply body, and encode, which
// writes the body back with what the calls' commits changed.
func replyCalls(body []byte) ([]*toolCall, func() []byte, error) {
	top, err := parseObject(body)
	if err != nil {
		calls, encode, found, err := streamCalls(body)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			return nil, nil, errors.New("the reply is neither a JSON object nor a stream of JSON server-sent events")
		}
		return calls, encode, nil
	}
	var calls []*toolCall
	switch {
	case top.has("choices"):
		calls, err = openAICalls(top)
	case top.has("content") && bytes.Equal(bytes.TrimSpace(top.get("type")), []byte(`"message"`)):
		calls, err = anthropicCalls(top)
	default:
		err = errors.New("the reply is neither an OpenAI chat completion (choices) nor an Anthropic message (type message, content)")
	}
	if err != nil {
		return nil, nil, err
	}
	return calls, func() []byte { return top.encode() }, nil
}

// toolCall is one tool call found in a reply: its name, ID and arguments,
// and commit, which writes the edited arguments back into the reply's
// objects.
type toolCall struct {
	name, id string
	args     *object
	commit   func()
}

// pickCall returns the call tool names: the one call of that name, or the
// call of that ID.
func pickCall(calls []*toolCall, tool string) (*toolCall, error) {
	var byName []*toolCall
	var all []string
	for _, c := range calls {
		if c.id == tool {
			return c, nil
		}
		if c.name == tool {
			byName = append(byName, c)
		}
		all = append(all, fmt.Sprintf("%s (%s)", c.name, c.id))
	}
	switch len(byName) {
	case 1:
		return byName[0], nil
	case 0:
		if len(all) == 0 {
			return nil, fmt.Errorf("tool %q: the reply calls no tool", tool)
		}
		return nil, fmt.Errorf("tool %q: the reply calls none such; it calls %s", tool, strings.Join(all, ", "))
	}
	var ids []string
	for _, c := range byName {
		ids = append(ids, c.id)
	}
	return nil, fmt.Errorf("tool %q: the reply calls it %d times; name the call by its ID: %s", tool, len(byName), strings.Join(ids, ", "))
}

// openAICalls finds the tool calls of an OpenAI chat completion.
func openAICalls(top *object) ([]*toolCall, error) {
	choices, err := parseArray(top.get("choices"))
	if err != nil {
		return nil, fmt.Errorf("choices: %v", err)
	}
	var out []*toolCall
	for i := range choices {
		choice, err := parseObject(choices[i])
		if err != nil {
			return nil, fmt.Errorf("choices[%d]: %v", i, err)
		}
		if !choice.has("message") {
			continue
		}
		msg, err := parseObject(choice.get("message"))
		if err != nil {
			return nil, fmt.Errorf("choices[%d].message: %v", i, err)
		}
		if !msg.has("tool_calls") || isNull(msg.get("tool_calls")) {
			continue
		}
		tcs, err := parseArray(msg.get("tool_calls"))
		if err != nil {
			return nil, fmt.Errorf("choices[%d].message.tool_calls: %v", i, err)
		}
		for j := range tcs {
			tc, err := parseObject(tcs[j])
			if err != nil {
				return nil, fmt.Errorf("choices[%d].message.tool_calls[%d]: %v", i, j, err)
			}
			fn, err := parseObject(tc.get("function"))
			if err != nil {
				return nil, fmt.Errorf("choices[%d].message.tool_calls[%d].function: %v", i, j, err)
			}
			var name, id, argText string
			_ = json.Unmarshal(fn.get("name"), &name)
			_ = json.Unmarshal(tc.get("id"), &id)
			if err := json.Unmarshal(fn.get("arguments"), &argText); err != nil {
				return nil, fmt.Errorf("tool call %s: function.arguments is not a string", name)
			}
			args, err := parseObject([]byte(argText))
			if err != nil {
				return nil, fmt.Errorf("tool call %s: its arguments are not a JSON object", name)
			}
			out = append(out, &toolCall{name: name, id: id, args: args, commit: func() {
				s, _ := json.Marshal(string(args.encode()))
				fn.set("arguments", s)
				tc.set("function", fn.encode())
				tcs[j] = tc.encode()
				msg.set("tool_calls", encodeArray(tcs))
				choice.set("message", msg.encode())
				choices[i] = choice.encode()
				top.set("choices", encodeArray(choices))
			}})
		}
	}
	return out, nil
}

// anthropicCalls finds the tool_use blocks of an Anthropic message.
func anthropicCalls(top *object) ([]*toolCall, error) {
	blocks, err := parseArray(top.get("content"))
	if err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	var out []*toolCall
	for i := range blocks {
		block, err := parseObject(blocks[i])
		if err != nil {
			return nil, fmt.Errorf("content[%d]: %v", i, err)
		}
		var typ, name, id string
		_ = json.Unmarshal(block.get("type"), &typ)
		if typ != "tool_use" {
			continue
		}
		_ = json.Unmarshal(block.get("name"), &name)
		_ = json.Unmarshal(block.get("id"), &id)
		input, err := parseObject(block.get("input"))
		if err != nil {
			return nil, fmt.Errorf("tool_use %s: its input is not a JSON object", name)
		}
		out = append(out, &toolCall{name: name, id: id, args: input, commit: func() {
			block.set("input", input.encode())
			blocks[i] = block.encode()
			top.set("content", encodeArray(blocks))
		}})
	}
	return out, nil
}

// object is a JSON object that keeps its keys' order and its values'
// bytes.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject parses b as a JSON object.
func parseObject(b []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("data after the object")
	}
	return o, nil
}

func (o *object) has(key string) bool            { _, ok := o.vals[key]; return ok }
func (o *object) get(key string) json.RawMessage { return o.vals[key] }

// set sets key, keeping its place (a new key goes last).
func (o *object) set(key string, v json.RawMessage) {
	if !o.has(key) {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// encode writes o with its keys in order.
func (o *object) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// parseArray parses b as a JSON array of raw values.
func parseArray(b []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil || out == nil && !isNull(b) {
		return nil, errors.New("not a JSON array")
	}
	return out, nil
}

// encodeArray writes vs as a JSON array.
func encodeArray(vs []json.RawMessage) json.RawMessage {
	parts := make([][]byte, len(vs))
	for i, v := range vs {
		parts[i] = v
	}
	return json.RawMessage("[" + string(bytes.Join(parts, []byte(","))) + "]")
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }
