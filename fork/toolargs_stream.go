package fork

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// streamLine is one "data:" line of a server-sent event stream whose
// payload is a JSON object: what precedes and follows the payload, and the
// parsed payload, which the setters of the line's fragments change and
// encode writes back.
type streamLine struct {
	prefix, suffix []byte
	top            *object
}

// fragment is one piece of a streamed tool call's arguments: its text and
// set, which replaces it in its event.
type fragment struct {
	text string
	set  func(string)
}

// streamedCall is a tool call put together from a stream's events.
type streamedCall struct {
	id, name string
	frags    []fragment
	// whole is the input of an Anthropic tool_use block given in its
	// content_block_start (used when no fragment follows), and setWhole
	// replaces it.
	whole    json.RawMessage
	setWhole func(json.RawMessage)
}

// streamCalls finds the tool calls of a streamed reply (server-sent
// events of OpenAI's chat.completion.chunk or Anthropic's message stream),
// and encode, which writes the stream back with the committed calls'
// arguments in their first fragment. found is false for a body with no
// "data:" line holding a JSON object.
func streamCalls(body []byte) (calls []*toolCall, encode func() []byte, found bool, err error) {
	raw := bytes.SplitAfter(body, []byte("\n"))
	lines := make([]*streamLine, len(raw))
	var order []string
	byKey := map[string]*streamedCall{}
	call := func(key string) *streamedCall {
		c := byKey[key]
		if c == nil {
			c = &streamedCall{}
			byKey[key] = c
			order = append(order, key)
		}
		return c
	}
	for i, l := range raw {
		content := bytes.TrimRight(l, "\r\n")
		if !bytes.HasPrefix(content, []byte("data:")) {
			continue
		}
		payload := bytes.TrimPrefix(content[len("data:"):], []byte(" "))
		top, perr := parseObject(payload)
		if perr != nil {
			continue // [DONE], or a payload that is not an object
		}
		found = true
		sl := &streamLine{prefix: content[:len(content)-len(payload)], suffix: l[len(content):], top: top}
		lines[i] = sl
		if top.has("choices") {
			if err := openAIChunkCalls(sl, call); err != nil {
				return nil, nil, true, fmt.Errorf("streamed reply, event %d: %v", i+1, err)
			}
			continue
		}
		if err := anthropicEventCalls(sl, call); err != nil {
			return nil, nil, true, fmt.Errorf("streamed reply, event %d: %v", i+1, err)
		}
	}
	for _, key := range order {
		c := byKey[key]
		text := ""
		for _, f := range c.frags {
			text += f.text
		}
		argBytes := []byte(text)
		if text == "" && c.whole != nil {
			argBytes = c.whole
		}
		args, perr := parseObject(argBytes)
		if perr != nil {
			return nil, nil, true, fmt.Errorf("tool call %s: its streamed arguments are not a JSON object", c.name)
		}
		calls = append(calls, &toolCall{name: c.name, id: c.id, args: args, commit: func() {
			if len(c.frags) == 0 {
				if c.setWhole != nil {
					c.setWhole(args.encode())
				}
				return
			}
			c.frags[0].set(string(args.encode()))
			for _, f := range c.frags[1:] {
				f.set("")
			}
		}})
	}
	encode = func() []byte {
		var out bytes.Buffer
		for i, l := range raw {
			sl := lines[i]
			if sl == nil {
				out.Write(l)
				continue
			}
			out.Write(sl.prefix)
			out.Write(sl.top.encode())
			out.Write(sl.suffix)
		}
		return out.Bytes()
	}
	return calls, encode, found, nil
}

// openAIChunkCalls adds the tool-call fragments of one OpenAI
// chat.completion.chunk: choices[].delta.tool_calls[], keyed by the
// choice's and the call's index.
func openAIChunkCalls(sl *streamLine, call func(string) *streamedCall) error {
	top := sl.top
	choices, err := parseArray(top.get("choices"))
	if err != nil {
		return fmt.Errorf("choices: %v", err)
	}
	for i := range choices {
		choice, err := parseObject(choices[i])
		if err != nil {
			return fmt.Errorf("choices[%d]: %v", i, err)
		}
		if !choice.has("delta") {
			continue
		}
		delta, err := parseObject(choice.get("delta"))
		if err != nil {
			return fmt.Errorf("choices[%d].delta: %v", i, err)
		}
		if !delta.has("tool_calls") || isNull(delta.get("tool_calls")) {
			continue
		}
		tcs, err := parseArray(delta.get("tool_calls"))
		if err != nil {
			return fmt.Errorf("choices[%d].delta.tool_calls: %v", i, err)
		}
		choiceIndex := i
		_ = json.Unmarshal(choice.get("index"), &choiceIndex)
		for j := range tcs {
			tc, err := parseObject(tcs[j])
			if err != nil {
				return fmt.Errorf("choices[%d].delta.tool_calls[%d]: %v", i, j, err)
			}
			callIndex := j
			_ = json.Unmarshal(tc.get("index"), &callIndex)
			c := call(fmt.Sprintf("openai/%d/%d", choiceIndex, callIndex))
			var id string
			if json.Unmarshal(tc.get("id"), &id) == nil && id != "" {
				c.id = id
			}
			if !tc.has("function") {
				continue
			}
			fn, err := parseObject(tc.get("function"))
			if err != nil {
				return fmt.Errorf("choices[%d].delta.tool_calls[%d].function: %v", i, j, err)
			}
			var name string
			if json.Unmarshal(fn.get("name"), &name) == nil && name != "" {
				c.name = name
			}
			if !fn.has("arguments") {
				continue
			}
			var frag string
			if err := json.Unmarshal(fn.get("arguments"), &frag); err != nil {
				return fmt.Errorf("tool call %s: function.arguments is not a string", c.name)
			}
			c.frags = append(c.frags, fragment{text: frag, set: func(s string) {
				b, _ := json.Marshal(s)
				fn.set("arguments", b)
				tc.set("function", fn.encode())
				tcs[j] = tc.encode()
				delta.set("tool_calls", encodeArray(tcs))
				choice.set("delta", delta.encode())
				choices[i] = choice.encode()
				top.set("choices", encodeArray(choices))
			}})
		}
	}
	return nil
}

// anthropicEventCalls adds what one event of Anthropic's message stream
// says of a tool_use block: its content_block_start (ID, name, input) or
// an input_json_delta fragment of its input, keyed by the block's index.
func anthropicEventCalls(sl *streamLine, call func(string) *streamedCall) error {
	top := sl.top
	var typ string
	_ = json.Unmarshal(top.get("type"), &typ)
	var index int
	switch typ {
	case "content_block_start":
		if err := json.Unmarshal(top.get("index"), &index); err != nil {
			return errors.New("content_block_start without an index")
		}
		block, err := parseObject(top.get("content_block"))
		if err != nil {
			return fmt.Errorf("content_block: %v", err)
		}
		var btype string
		_ = json.Unmarshal(block.get("type"), &btype)
		if btype != "tool_use" {
			return nil
		}
		c := call(fmt.Sprintf("anthropic/%d", index))
		_ = json.Unmarshal(block.get("id"), &c.id)
		_ = json.Unmarshal(block.get("name"), &c.name)
		if block.has("input") {
			c.whole = block.get("input")
			c.setWhole = func(v json.RawMessage) {
				block.set("input", v)
				top.set("content_block", block.encode())
			}
		}
	case "content_block_delta":
		if err := json.Unmarshal(top.get("index"), &index); err != nil {
			return errors.New("content_block_delta without an index")
		}
		delta, err := parseObject(top.get("delta"))
		if err != nil {
			return fmt.Errorf("delta: %v", err)
		}
		var dtype string
		_ = json.Unmarshal(delta.get("type"), &dtype)
		if dtype != "input_json_delta" {
			return nil
		}
		c := call(fmt.Sprintf("anthropic/%d", index))
		var frag string
		if err := json.Unmarshal(delta.get("partial_json"), &frag); err != nil {
			return fmt.Errorf("tool call %s: delta.partial_json is not a string", c.name)
		}
		c.frags = append(c.frags, fragment{text: frag, set: func(s string) {
			b, _ := json.Marshal(s)
			delta.set("partial_json", b)
			top.set("delta", delta.encode())
		}})
	}
	return nil
}
