package main

// OAuth access tokens, checked by token introspection (RFC 7662): the
// server asks the authorization server's introspection endpoint about
// each token, which works with any authorization server that has one
// (Keycloak, Ory Hydra, Authentik, Okta, ...) and needs no key handling
// here. mcpadapter takes any auth.TokenVerifier: a server that checks JWTs
// against the issuer's keys passes its own.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// introspector verifies access tokens at an introspection endpoint.
type introspector struct {
	endpoint     string
	clientID     string
	clientSecret string
	resource     string // the audience a token must have
	client       *http.Client
}

// introspector returns the verifier of the -oauth-* flags, checked.
func (a *accessFlags) introspector() (*introspector, error) {
	for _, f := range []struct{ name, value string }{{"-oauth-introspect", a.introspect}, {"-oauth-issuer", a.issuer}, {"-oauth-resource", a.resource}} {
		if f.value == "" {
			return nil, fmt.Errorf("-oauth-introspect needs %s: give the authorization server's issuer URL (-oauth-issuer) and this server's URL as clients reach it (-oauth-resource)", f.name)
		}
		u, err := url.Parse(f.value)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("%s %q: want an absolute http or https URL", f.name, f.value)
		}
	}
	v := &introspector{endpoint: a.introspect, clientID: a.clientID, resource: a.resource,
		client: &http.Client{Timeout: 10 * time.Second}}
	if a.clientSecret != "" {
		if a.clientID == "" {
			return nil, errors.New("-oauth-client-secret-env needs -oauth-client-id")
		}
		v.clientSecret = os.Getenv(a.clientSecret)
		if v.clientSecret == "" {
			return nil, fmt.Errorf("-oauth-client-secret-env %s: the variable is not set", a.clientSecret)
		}
	}
	return v, nil
}

// introspection is the part of an introspection response (RFC 7662 §2.2)
// that the server reads.
type introspection struct {
	Active   bool     `json:"active"`
	Subject  string   `json:"sub"`
	Username string   `json:"username"`
	ClientID string   `json:"client_id"`
	Scope    string   `json:"scope"`
	Exp      int64    `json:"exp"`
	Audience audience `json:"aud"`
}

// audience is the aud member: one string or an array of them.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("aud: want a string or an array of strings: %w", err)
	}
	*a = many
	return nil
}

// verify is the auth.TokenVerifier: the token is good when the endpoint
// says it is active, issued for this server (its audience holds
// -oauth-resource, as the MCP authorization specification requires: a
// token issued for another service is refused), and not expired. Its
// identity is the token's subject (sub), else its username, else the
// client it was issued to. A failure to ask the endpoint is a server
// error (500): the server fails closed.
func (v *introspector) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if v.clientID != "" {
		req.SetBasicAuth(url.QueryEscape(v.clientID), url.QueryEscape(v.clientSecret)) // RFC 6749 §2.3.1
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token introspection: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("token introspection: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("token introspection: %s from %s", resp.Status, v.endpoint)
	}
	var in introspection
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("token introspection: %w", err)
	}
	switch {
	case !in.Active:
		return nil, fmt.Errorf("%w: not active", auth.ErrInvalidToken)
	case !slices.Contains(in.Audience, v.resource):
		return nil, fmt.Errorf("%w: not issued for this server (audience %q, want %q)", auth.ErrInvalidToken, []string(in.Audience), v.resource)
	}
	info := &auth.TokenInfo{
		UserID: in.Subject,
		Scopes: strings.Fields(in.Scope),
		Extra:  map[string]any{"client_id": in.ClientID},
	}
	if info.UserID == "" {
		info.UserID = in.Username
	}
	if info.UserID == "" && in.ClientID != "" {
		info.UserID = "client:" + in.ClientID
	}
	if info.UserID == "" {
		return nil, fmt.Errorf("%w: the token names no subject, user or client", auth.ErrInvalidToken)
	}
	if in.Exp > 0 {
		info.Expiration = time.Unix(in.Exp, 0)
	}
	return info, nil
}
