package mcpadapter

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MinTokenLength is the shortest bearer token that [ParseTokens] and
// [LoadTokens] accept: 32 characters, such as 16 random bytes in hex.
// `openssl rand -hex 32` makes a good one.
const MinTokenLength = 32

// Tokens is a set of named bearer tokens: what HTTPAccess.Tokens checks the
// Authorization header of every HTTP request against. A token's name is
// the identity of the calls made with it, written in the transcript, the
// logs and the call's span, and the key of Options.MaxConcurrentPerIdentity.
//
// The set is read from text of one token a line, NAME:TOKEN, where NAME
// has 1 to 64 letters, digits and '.', '_', '-', '@', and TOKEN at least
// MinTokenLength characters of RFC 6750's token syntax (letters, digits and
// "-._~+/", then '=' padding). Blank lines and lines starting with '#' are
// skipped. A token must be unique; a name may have several tokens, each on
// a line of its own:
//
//	# name:token
//	alice:2c6e0b6f0d1f4e0c9a8b7d6e5f4a3b2c1d0e9f8a7b6c5d4e
//	ci:9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddccbbaa9988
//
// Several tokens for one name is how a token is rotated without a gap: add
// a line with the new token under the same name, move the clients to it,
// remove the old line. A call is bound to the token that authorized it,
// not only to its name: removing a token stops the calls made with it
// (see HTTPAccess.Tokens), and those made with the name's other tokens go
// on.
//
// A set loaded from a file ([LoadTokens]) follows the file: each check
// looks at the file's modification time, size and inode, and reads it
// again when one changed. A file that no longer parses, or is gone, leaves
// the set as it was: Logger gets an error record saying why, and
// [Tokens.Err] returns the error until a file is taken. Replace the file
// whole (write a new file and rename it over the old one) rather than edit
// it in place.
//
// Only a SHA-256 digest of each token is kept. A token is checked against
// every digest of the set, in time that does not depend on which one
// matches or how much of one does.
//
// A Tokens is safe for concurrent use.
type Tokens struct {
	// Logger, if not nil, receives a record each time the file is read
	// again: the names added and removed, or why the new file was not
	// taken. Set it before the Tokens is used.
	Logger *slog.Logger

	path string // "" for a set that does not follow a file

	cur atomic.Pointer[tokenTable]

	mu      sync.Mutex // guards stamp and readErr, and serialises the reads of the file
	stamp   fileStamp  // of the file as last read
	readErr error      // why the file as it is now was not taken; nil once one is
}

// A tokenTable is one version of a Tokens set: the name of each token, and
// its digest, at the same index. A name may appear more than once.
type tokenTable struct {
	names   []string
	digests [][sha256.Size]byte
}

// tokenExtra is the key of TokenInfo.Extra under which Tokens.Verify puts
// the *tokenRef of the token it matched: what binds a call to the token
// that authorized it.
const tokenExtra = "clinvoke_token"

// A tokenRef stands for one token of a set, by its digest. It prints as
// its name only, so that a TokenInfo that ends up in a log shows no
// digest.
type tokenRef struct {
	name   string
	digest [sha256.Size]byte
}

func (r *tokenRef) String() string { return "a token of " + r.name }

// callKey is the key of callSet under which the calls authorized by the
// token are found.
func (r *tokenRef) callKey() string { return tokenCallKey(r.digest) }

func tokenCallKey(d [sha256.Size]byte) string { return "token " + string(d[:]) }

// tokenOf returns the token that authorized req, or nil when it was not
// one of a Tokens set.
func tokenOf(req *mcp.CallToolRequest) *tokenRef {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil
	}
	r, _ := req.Extra.TokenInfo.Extra[tokenExtra].(*tokenRef)
	return r
}

// fileStamp is what tells that a token file changed.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// ParseTokens returns the set of the tokens in text, in the format
// described at [Tokens]. The set is fixed: it follows no file.
func ParseTokens(text string) (*Tokens, error) {
	tab, err := parseTokens(text, "")
	if err != nil {
		return nil, err
	}
	t := &Tokens{}
	t.cur.Store(tab)
	return t, nil
}

// LoadTokens reads the set of tokens in the file at path, in the format
// described at [Tokens]. The set follows the file: a change to it is
// taken at the next check, or at [Tokens.Reload].
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file of a set made by [LoadTokens] again, whether or
// not it changed. On error the set stays as it was. A set made by
// [ParseTokens] has no file: Reload does nothing.
func (t *Tokens) Reload() error {
	if t.path == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readLocked()
}

// Names returns the names of the tokens in the set, sorted, each once.
func (t *Tokens) Names() []string {
	t.refresh()
	return slices.Compact(slices.Sorted(slices.Values(t.cur.Load().names)))
}

// Err returns why the set's file, as it is now, was not taken (it does not
// parse, or it is gone), or nil when the set follows the file. While Err
// is not nil the set is the one of the last file taken. A set made by
// [ParseTokens] has no file: its Err is always nil.
func (t *Tokens) Err() error {
	t.refresh()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readErr
}

// Verify checks token against the set. It is an auth.TokenVerifier, for
// auth.RequireBearerToken: it returns the TokenInfo of the token's name
// (UserID the name, Extra["token_name"] the name too, and under another
// key of Extra what binds the call to this very token), or an error that
// matches auth.ErrInvalidToken. A named token does not expire: it is good
// until it leaves the set. Its TokenInfo has an Expiration an hour after
// the check, for the middleware's expiry check, and no scopes (HTTPAccess
// gives it the scopes it requires: a named token grants every access).
func (t *Tokens) Verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	ref := t.match(token)
	if ref == nil {
		return nil, fmt.Errorf("%w: not one of this server's tokens", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{
		UserID:     ref.name,
		Expiration: time.Now().Add(time.Hour),
		Extra:      map[string]any{"token_name": ref.name, tokenExtra: ref},
	}, nil
}

// match returns the token of the set that token is, or nil if it is not
// in the set. It compares the token's digest with every digest of the
// set, without stopping at a match, and picks the matching name with
// constant-time selects: its time depends on the size of the set only.
func (t *Tokens) match(token string) *tokenRef {
	t.refresh()
	tab := t.cur.Load()
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range tab.digests {
		eq := subtle.ConstantTimeCompare(d[:], tab.digests[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &tokenRef{name: tab.names[found], digest: d}
}

// refresh reads the file again if it changed since it was last read.
func (t *Tokens) refresh() {
	if t.path == "" {
		return
	}
	st, err := statFile(t.path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil && st == t.stamp {
		return
	}
	if err := t.readLocked(); err != nil {
		t.logger().Error("the token file changed and was not taken; the tokens stay as they were until it is fixed", "path", t.path, "error", err)
		// Do not read a broken file again until it changes once more.
		if st, serr := statFile(t.path); serr == nil {
			t.stamp = st
		}
	}
}

// readLocked reads the file into the set. t.mu must be held.
func (t *Tokens) readLocked() error {
	tab, st, err := readTokens(t.path)
	t.readErr = err
	if err != nil {
		return err
	}
	old := t.cur.Swap(tab)
	t.stamp = st
	if old != nil {
		added, removed := diffNames(old.names, tab.names)
		t.logger().Info("token file read again", "path", t.path, "tokens", len(tab.names), "added", added, "removed", removed,
			"tokens_removed", len(removedTokens(old, tab)))
	}
	return nil
}

// readTokens reads and parses the file at path.
func readTokens(path string) (*tokenTable, fileStamp, error) {
	st, err := statFile(path)
	if err != nil {
		return nil, st, fmt.Errorf("tokens: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, st, fmt.Errorf("tokens: %w", err)
	}
	tab, err := parseTokens(string(data), path)
	return tab, st, err
}

func (t *Tokens) logger() *slog.Logger {
	if t.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Logger
}

// statFile returns the stamp of the file at path.
func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), ino: inode(fi)}, nil
}

// parseTokens parses text in the format of Tokens. src names the text in
// errors: a path, or "" for text given in code or the environment.
func parseTokens(text, src string) (*tokenTable, error) {
	where := func(line int) string {
		if src == "" {
			return fmt.Sprintf("tokens: line %d", line)
		}
		return fmt.Sprintf("tokens: %s:%d", src, line)
	}
	tab := &tokenTable{}
	digests := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, token, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%s: want NAME:TOKEN, such as alice:$(openssl rand -hex 32)", where(n))
		}
		name, token = strings.TrimSpace(name), strings.TrimSpace(token)
		if err := checkTokenName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", where(n), err)
		}
		if err := checkToken(token); err != nil {
			return nil, fmt.Errorf("%s: token %q: %w", where(n), name, err)
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := digests[d]; dup {
			return nil, fmt.Errorf("%s: token %q is the token of line %d: give each client its own token", where(n), name, prev)
		}
		digests[d] = n
		tab.names = append(tab.names, name)
		tab.digests = append(tab.digests, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", where(n+1), err)
	}
	if len(tab.names) == 0 {
		what := "the text"
		if src != "" {
			what = src
		}
		return nil, fmt.Errorf("tokens: %s has no token: write one NAME:TOKEN a line", what)
	}
	return tab, nil
}

// checkTokenName checks the name of a token.
func checkTokenName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("token name %q: give 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)) {
			return fmt.Errorf("token name %q: character %q is not allowed (letters, digits and . _ - @)", name, r)
		}
	}
	return nil
}

// checkToken checks a token against RFC 6750's b64token syntax and
// MinTokenLength.
func checkToken(token string) error {
	body := strings.TrimRight(token, "=")
	for _, r := range body {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~+/", r)) {
			return errors.New("a token may hold letters, digits and - . _ ~ + / (then = padding): make one with `openssl rand -hex 32`")
		}
	}
	if len(token) < MinTokenLength {
		return fmt.Errorf("%d characters is too short, give at least %d: make one with `openssl rand -hex 32`", len(token), MinTokenLength)
	}
	return nil
}

// removedTokens returns the tokens of before that now does not have.
func removedTokens(before, now *tokenTable) []*tokenRef {
	var out []*tokenRef
	for i, d := range before.digests {
		if !slices.Contains(now.digests, d) {
			out = append(out, &tokenRef{name: before.names[i], digest: d})
		}
	}
	return out
}

// diffNames returns the names of now not in before, and those of before
// not in now, each once.
func diffNames(before, now []string) (added, removed []string) {
	for _, n := range now {
		if !slices.Contains(before, n) && !slices.Contains(added, n) {
			added = append(added, n)
		}
	}
	for _, n := range before {
		if !slices.Contains(now, n) && !slices.Contains(removed, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}
