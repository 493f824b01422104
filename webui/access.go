package webui

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/forkline/forkline/internal/serveapi"
)

// MaxBody is the most a request's body may hold: a body that says it is
// longer is refused (413) before any of it is read, and one that turns
// out longer stops being read there (413 too).
const MaxBody = 1 << 20

// SessionCookie is the name of the cookie that /login sets.
const SessionCookie = "forkline_session"

// WithToken makes every route but /login demand token: a program presents
// it as "Authorization: Bearer TOKEN"; a browser signs in once through
// /login?token=TOKEN, which sets an HttpOnly, SameSite=Strict cookie (a
// value derived from the token, not the token) and redirects to the list.
// A request without it, or with a wrong one, is answered 401 and does
// nothing. An empty token is ignored: every request is served.
func WithToken(token string) Option {
	return func(s *server) { s.token = token }
}

// WithHosts makes the handler answer only requests whose Host header
// names localhost, a loopback address, or one of hosts (names or IP
// addresses, without a port; case does not matter): any other is answered
// 421 and does nothing. A page of a foreign site that a DNS rebinding
// points at this server names its own host, so it is refused.
func WithHosts(hosts ...string) Option {
	return func(s *server) {
		if s.hosts == nil {
			s.hosts = map[string]bool{}
		}
		for _, h := range hosts {
			s.hosts[normalHost(h)] = true
		}
	}
}

// normalHost is h without brackets or a final dot, in lower case.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// hostAllowed reports whether the Host header hostport names a host the
// handler answers for (see WithHosts).
func (s *server) hostAllowed(hostport string) bool {
	if s.hosts == nil {
		return true
	}
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport // no port
	}
	h = normalHost(h)
	if h == "" {
		return false
	}
	if h == "localhost" || s.hosts[h] {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// session is the value of SessionCookie for token.
func session(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("forkline session"))
	return hex.EncodeToString(m.Sum(nil))
}

// same reports whether a and b are equal, in time that does not depend on
// where they differ.
func same(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// credential says how r presents the token: by bearer header, by cookie,
// or not (how is ""); ok is false when what it presents is wrong.
func (s *server) credential(r *http.Request) (how string, ok bool) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, tok, _ := strings.Cut(auth, " ")
		return "bearer", strings.EqualFold(scheme, "Bearer") && same(strings.TrimSpace(tok), s.token)
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return "cookie", same(c.Value, session(s.token))
	}
	return "", false
}

// guard applies, in order, the body cap, the Host check (WithHosts), the
// token (WithToken) and, for writes signed in by the cookie, the demand
// that a browser name the page they come from, before h.
func (s *server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBody {
			tooLarge(w)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		}
		if !s.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("webui: this server does not answer for host %q (forkline serve --allow-host adds a name)",
				clipText(r.Host, 64)), http.StatusMisdirectedRequest)
			return
		}
		if s.token == "" {
			s.parseBody(h).ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/login" {
			s.login(w, r)
			return
		}
		how, ok := s.credential(r)
		if !ok {
			unauthorized(w, r, how)
			return
		}
		if how == "cookie" && !safeMethod(r.Method) && r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "" {
			// A browser names the page a write comes from; a program
			// presents the token itself.
			http.Error(w, "webui: a write signed in by the cookie must say which page it comes from (Origin): send the form from the page", http.StatusForbidden)
			return
		}
		w.Header().Set(serveapi.ProofHeader, serveapi.Proof(s.token))
		s.parseBody(h).ServeHTTP(w, r)
	})
}

// parseBody reads the form of a write before h, so that a body past
// MaxBody is 413 and a malformed one 400, rather than a form that only
// seems empty.
func (s *server) parseBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safeMethod(r.Method) {
			if err := r.ParseMultipartForm(MaxBody); err != nil && !errors.Is(err, http.ErrNotMultipart) {
				if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
					tooLarge(w)
					return
				}
				badRequest(w, "webui: read the form: %v", err)
				return
			}
			if r.MultipartForm != nil {
				defer func() { _ = r.MultipartForm.RemoveAll() }()
			}
		}
		h.ServeHTTP(w, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("webui: the request's body is larger than %d bytes", MaxBody), http.StatusRequestEntityTooLarge)
}

// unauthorized answers 401: JSON on the API, a line of text on the pages.
func unauthorized(w http.ResponseWriter, r *http.Request, how string) {
	msg := "webui: this server wants its token: sign in through the link forkline serve printed at start (/login?token=…), or present it as Authorization: Bearer"
	if how != "" {
		msg = "webui: wrong token (" + how + "): sign in again through the link forkline serve printed at start (/login?token=…)"
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="forkline"`)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		b, _ := json.Marshal(serveapi.Error{Error: msg, Code: serveapi.Code(serveapi.ErrUnauthorized)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(append(b, '\n'))
		return
	}
	http.Error(w, msg, http.StatusUnauthorized)
}

// login signs a browser in: with the right token= it sets the session
// cookie and redirects to the list, without the token in the address.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet {
		http.Error(w, "webui: /login is a GET of the link forkline serve printed", http.StatusMethodNotAllowed)
		return
	}
	if !same(r.URL.Query().Get("token"), s.token) {
		http.Error(w, "webui: wrong or missing token: use the link forkline serve printed at start (/login?token=…)", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: session(s.token),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	// Relative, so that the page works mounted under any prefix.
	w.Header().Set("Location", "./")
	w.WriteHeader(http.StatusSeeOther)
}
