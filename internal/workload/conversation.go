package workload

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Conversation returns the requests of an agent's LLM calls over turns
// turns, as chat APIs take them: call i sends the system prompt and every
// message of turns 0..i-1 (an assistant reply of 300–700 bytes and a tool
// result of 800–2,400 bytes each), so the requests grow and each holds the
// one before it. seed picks the text; the same seed gives the same bytes.
// Unique is the length of the last request: the text the conversation
// holds once.
func Conversation(turns int, seed uint64) (requests [][]byte, unique int) {
	r := rand.New(rand.NewPCG(seed, 2))
	words := strings.Fields("the agent reads a file then writes a test and runs it; the tool answers with output lines, errors and a diff of main.go")
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	msgs := []msg{{"system", text(1500)}}
	for i := range turns {
		// Strings and a slice of structs of strings always encode.
		req, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		requests = append(requests, req)
		msgs = append(msgs, msg{"assistant", text(300 + r.IntN(400))}, msg{"tool", fmt.Sprintf("turn %d: %s", i, text(800+r.IntN(1600)))})
	}
	return requests, len(requests[len(requests)-1])
}
