package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
)

func TestIsCredentialKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"token", true},
		{"githubToken", true},
		{"GITHUB_TOKEN", true},
		{"githubtoken", true},
		{"API-Key", true},
		{"apiKey", true},
		{"APIKey", true},
		{"api_key", true},
		{"apikey", true},
		{"x-api-key", true},
		{"aws_secret_access_key", true},
		{"secretAccessKey", true},
		{"access_key", true},
		{"privateKey", true},
		{"private_key", true},
		{"password", true},
		{"dbPassword", true},
		{"passwd", true},
		{"passphrase", true},
		{"credentials", true},
		{"Credential", true},
		{"auth", true},
		{"basicAuth", true},
		{"oauth", true},
		{"Authorization", true},
		{"clientSecret", true},
		{"secrets", true},
		{"sessionKey", true},
		{"author", false},
		{"authMode", false},
		{"tokenizer", false},
		{"secretName", false},
		{"passwordFile", false},
		{"key", false},
		{"keyPrefix", false},
		{"store", false},
		{"timeoutMs", false},
		{"", false},
		{"---", false},
	}
	for _, tt := range tests {
		if got := driver.IsCredentialKey(tt.key); got != tt.want {
			t.Errorf("IsCredentialKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

func TestEncodeConfiguration(t *testing.T) {
	type settings struct {
		Store     string `json:"store"`
		TimeoutMs int    `json:"timeoutMs"`
	}
	type leaky struct {
		Upstreams []map[string]any `json:"upstreams"`
	}
	var nilPtr *settings
	tests := []struct {
		name     string
		cfg      any
		want     string
		wantPath string // non-empty: ErrCredentials naming this path
		wantErr  bool
	}{
		{name: "nil", cfg: nil, want: ""},
		{name: "nil pointer", cfg: nilPtr, want: ""},
		{name: "struct", cfg: settings{Store: "/s", TimeoutMs: 5}, want: `{"store":"/s","timeoutMs":5}`},
		{name: "map sorted", cfg: map[string]int{"b": 1, "a": 2}, want: `{"a":2,"b":1}`},
		{name: "scalar", cfg: 42, want: `42`},
		{name: "max tokens is a number", cfg: map[string]any{"maxTokens": 4096}, want: `{"maxTokens":4096}`},
		{name: "empty secret", cfg: map[string]any{"secret": ""}, want: `{"secret":""}`},
		{name: "top-level token", cfg: map[string]any{"githubToken": "ghp_x"}, wantPath: "githubToken"},
		{name: "nested", cfg: map[string]any{"a": map[string]any{"b": map[string]any{"API-Key": "k"}}}, wantPath: "a.b.API-Key"},
		{name: "in array", cfg: leaky{Upstreams: []map[string]any{{"url": "u"}, {"password": "p"}}}, wantPath: "upstreams[1].password"},
		{name: "credential object", cfg: map[string]any{"credentials": map[string]any{"user": "u"}}, wantPath: "credentials"},
		{name: "not encodable", cfg: map[string]any{"f": func() {}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := driver.EncodeConfiguration(tt.cfg)
			switch {
			case tt.wantPath != "":
				if !errors.Is(err, driver.ErrCredentials) {
					t.Fatalf("err = %v, want ErrCredentials", err)
				}
				if !strings.Contains(err.Error(), `"`+tt.wantPath+`"`) {
					t.Fatalf("err = %q, want it to name %q", err, tt.wantPath)
				}
				if !strings.HasPrefix(err.Error(), "driver: ") {
					t.Fatalf("err = %q lacks the package prefix", err)
				}
			case tt.wantErr:
				if err == nil || errors.Is(err, driver.ErrCredentials) {
					t.Fatalf("err = %v, want an encoding error", err)
				}
			default:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if string(got) != tt.want {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

type reuser bool

func (r reuser) CoverageReuse() bool { return bool(r) }

type ptrReuser struct{ on bool }

func (r *ptrReuser) CoverageReuse() bool { return r.on }

func TestCoverageReuse(t *testing.T) {
	var nilReuser *ptrReuser
	tests := []struct {
		name string
		d    any
		want bool
	}{
		{"nil", nil, false},
		{"not a reuser", 3, false},
		{"false", reuser(false), false},
		{"true", reuser(true), true},
		{"pointer true", &ptrReuser{on: true}, true},
		{"nil pointer", nilReuser, false},
	}
	for _, tt := range tests {
		if got := driver.CoverageReuse(tt.d); got != tt.want {
			t.Errorf("%s: CoverageReuse = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestErrCheckpointUnavailableMessage(t *testing.T) {
	if got, want := driver.ErrCheckpointUnavailable.Error(), "driver: checkpoint unavailable"; got != want {
		t.Fatalf("message = %q, want %q", got, want)
	}
}

// DESIGN §11: DropKeys reads an older recorded form without its path keys.
func TestDropKeys(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, ``},
		{`null`, ``},
		{`{"store":"/a"}`, ``},
		{`{"store":"/a","template":"/t"}`, ``},
		{`{"store":"/a","schema":"s"}`, `{"schema":"s"}`},
		{`{"schema":"s"}`, `{"schema":"s"}`},
	} {
		got, err := driver.DropKeys([]byte(c.in), "store", "template")
		if err != nil || string(got) != c.want {
			t.Errorf("DropKeys(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{`[1]`, `"x"`, `{`} {
		if _, err := driver.DropKeys([]byte(in), "store"); err == nil {
			t.Errorf("DropKeys(%s) succeeded", in)
		}
	}
}
