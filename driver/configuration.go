package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// ErrCredentials is wrapped by the error [EncodeConfiguration] returns when a
// configuration carries a key that looks like a credential. The error message
// names the offending key path.
var ErrCredentials = errors.New("driver: configuration carries credentials")

// EncodeConfiguration returns the JSON encoding of a driver's configuration,
// as the kernel records it in resource.bound. A nil configuration (or one that
// encodes to JSON null) yields nil bytes and no error.
//
// It refuses, with an error wrapping [ErrCredentials] and naming the key path
// (such as "upstreams[0].apiKey"), any object key at any depth that names a
// credential. A key names a credential when its last word — after splitting
// camelCase, digits, and separators such as '-', '_' and '.' — is one of
// token(s), secret(s), password(s), passwd, passphrase, credential(s), auth,
// or ends with one of them ("githubtoken", "oauth"), or when its last two
// words form api key, access key, private key, secret key, session key,
// signing key, encryption key, client key or master key. So "githubToken",
// "API-Key", "aws_secret_access_key" and "Authorization" are refused, while
// "author", "tokenizer", "secretName" (a name, not a secret) and "authMode"
// pass.
//
// A key whose value is a number, a boolean, null, an empty string or an empty
// object or array cannot hold a credential and is accepted, so that settings
// such as "maxTokens": 4096 are not refused.
func EncodeConfiguration(cfg any) ([]byte, error) {
	if isNil(cfg) {
		return nil, nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("driver: encode configuration: %w", err)
	}
	if string(b) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("driver: decode configuration: %w", err)
	}
	if path, ok := findCredential(v, ""); ok {
		return nil, fmt.Errorf("%w: key %s", ErrCredentials, strconv.Quote(path))
	}
	return b, nil
}

// findCredential walks a decoded JSON value and returns the path of the first
// key (in sorted order) that names a credential and holds a value that could
// be one.
func findCredential(v any, path string) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := joinKey(path, k)
			if IsCredentialKey(k) && mayHoldCredential(v[k]) {
				return p, true
			}
			if q, ok := findCredential(v[k], p); ok {
				return q, true
			}
		}
	case []any:
		for i, e := range v {
			if q, ok := findCredential(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return q, true
			}
		}
	}
	return "", false
}

// joinKey appends an object key to a key path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mayHoldCredential reports whether a decoded JSON value could carry a
// credential: a non-empty string, object or array.
func mayHoldCredential(v any) bool {
	switch v := v.(type) {
	case string:
		return v != ""
	case map[string]any:
		return len(v) > 0
	case []any:
		return len(v) > 0
	}
	return false
}

// credentialWords are the head words that name a credential; a last word that
// ends with one of them ("githubtoken") names one too.
var credentialWords = []string{
	"token", "tokens", "secret", "secrets", "password", "passwords", "passwd",
	"passphrase", "credential", "credentials", "auth", "authorization",
	"apikey", "accesskey", "privatekey", "secretkey",
}

// credentialKeyWords are the words that, followed by "key", name a credential.
var credentialKeyWords = []string{
	"api", "access", "private", "secret", "session", "signing", "encryption",
	"client", "master",
}

// IsCredentialKey reports whether an object key names a credential, by the
// rule documented on [EncodeConfiguration]. It looks at the key alone, not at
// its value.
func IsCredentialKey(key string) bool {
	words := splitWords(key)
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	for _, w := range credentialWords {
		if strings.HasSuffix(last, w) {
			return true
		}
	}
	if last == "key" && len(words) >= 2 && slices.Contains(credentialKeyWords, words[len(words)-2]) {
		return true
	}
	return false
}

// splitWords splits a key into lower-case words at separators, at lower-to-
// upper and letter-digit transitions, and at the end of an acronym
// ("APIKey" → api, key).
func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if len(cur) > 0 {
			prev := cur[len(cur)-1]
			switch {
			case unicode.IsDigit(r) != unicode.IsDigit(prev):
				flush()
			case unicode.IsUpper(r) && unicode.IsLower(prev):
				flush()
			case unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// DropKeys returns the recorded configuration cfg (a JSON object) without
// the given top-level keys: the shared half of a [ConfigurationReader] for
// a driver that stopped recording some keys (store paths, say). An object
// left empty becomes nil, the encoding of no configuration; nil or JSON
// null stays nil. A value that is not a JSON object is an error.
func DropKeys(cfg []byte, keys ...string) ([]byte, error) {
	if len(bytes.TrimSpace(cfg)) == 0 || string(bytes.TrimSpace(cfg)) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &obj); err != nil {
		return nil, fmt.Errorf("driver: recorded configuration is not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, nil
	}
	for _, k := range keys {
		delete(obj, k)
	}
	if len(obj) == 0 {
		return nil, nil
	}
	return json.Marshal(obj)
}
