//! The `Bearer` challenge of a `WWW-Authenticate` header (RFC 6750 §3, RFC 9110 §11.6.1,
//! RFC 9728 §5.1): where the resource's metadata is, which scope it wants, and why it
//! refused.

use serde::{Deserialize, Serialize};

/// What a protected resource said when it refused a request (401 or 403).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// RFC 9728 §5.1: the URL of the resource's protected-resource metadata.
    pub resource_metadata: Option<String>,
    /// RFC 6750 §3: the scope the request needs (space-separated).
    pub scope: Option<String>,
    /// RFC 6750 §3.1: `invalid_token`, `insufficient_scope`, `invalid_request`...
    pub error: Option<String>,
}

impl Challenge {
    /// The first `Bearer` challenge of a `WWW-Authenticate` value, which may hold several
    /// challenges (`Basic realm="x", Bearer scope="a b"`); the scheme and parameter
    /// names are case-insensitive, values are tokens or quoted strings (with `\`
    /// escapes). `None` when the value has no `Bearer` challenge.
    pub fn parse(www_authenticate: &str) -> Option<Challenge> {
        challenges(www_authenticate)
            .into_iter()
            .find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, params)| {
                let get = |name: &str| {
                    params
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.clone())
                };
                Challenge {
                    resource_metadata: get("resource_metadata"),
                    scope: get("scope").filter(|s| !s.trim().is_empty()),
                    error: get("error"),
                }
            })
    }

    /// The first `Bearer` challenge among every `WWW-Authenticate` header of a response.
    pub fn from_headers(headers: &http::HeaderMap) -> Option<Challenge> {
        headers
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(Challenge::parse)
    }

    /// Whether the resource asks for more scope (RFC 6750 `insufficient_scope`, the
    /// 403 of step-up authorization).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// A challenge: its scheme and its parameters (a token68 is kept under the empty name).
type Parsed = (String, Vec<(String, String)>);

/// Every challenge of a header value, in order; what cannot be read ends the list.
fn challenges(value: &str) -> Vec<Parsed> {
    let mut p = Cursor {
        s: value.as_bytes(),
        i: 0,
    };
    let mut out: Vec<Parsed> = Vec::new();
    loop {
        p.skip_separators();
        if p.done() {
            return out;
        }
        let Some(scheme) = p.token() else {
            return out;
        };
        let mut params = Vec::new();
        p.skip_ws();
        // A token68 (`Basic dXNlcjpw`) or the first parameter (`Bearer realm="x"`).
        if !p.done() && p.peek() != Some(b',') {
            let save = p.i;
            match p.param() {
                Some(param) => params.push(param),
                None => {
                    p.i = save;
                    match p.token68() {
                        Some(t) => params.push((String::new(), t)),
                        None => return push(out, scheme, params),
                    }
                }
            }
        }
        // More parameters of this challenge, until a comma is followed by a new scheme.
        loop {
            p.skip_ws();
            if p.done() {
                return push(out, scheme, params);
            }
            if p.peek() != Some(b',') {
                return push(out, scheme, params);
            }
            p.skip_separators();
            if p.done() {
                return push(out, scheme, params);
            }
            let at = p.i;
            match p.param() {
                Some(param) => params.push(param),
                None => {
                    // Not `name=value`: the next challenge starts here.
                    p.i = at;
                    break;
                }
            }
        }
        out.push((scheme, params));
    }
}

fn push(mut out: Vec<Parsed>, scheme: String, params: Vec<(String, String)>) -> Vec<Parsed> {
    out.push((scheme, params));
    out
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl Cursor<'_> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.i += 1;
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.i;
        while self.peek().is_some_and(is_tchar) {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// `name BWS = BWS (token / quoted-string)`; the cursor is left where it was read to.
    fn param(&mut self) -> Option<(String, String)> {
        let name = self.token()?;
        self.skip_ws();
        if self.peek() != Some(b'=') {
            return None;
        }
        self.i += 1;
        self.skip_ws();
        let value = if self.peek() == Some(b'"') {
            self.quoted()?
        } else {
            self.token()?
        };
        Some((name, value))
    }

    /// A quoted string with `\` escapes; unterminated ones are refused.
    fn quoted(&mut self) -> Option<String> {
        self.i += 1;
        let mut out = Vec::new();
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => return Some(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    let escaped = self.peek()?;
                    self.i += 1;
                    out.push(escaped);
                }
                _ => out.push(b),
            }
        }
        None
    }

    /// RFC 9110 `token68`.
    fn token68(&mut self) -> Option<String> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
        {
            self.i += 1;
        }
        if self.i == start {
            return None;
        }
        while self.peek() == Some(b'=') {
            self.i += 1;
        }
        Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_bearer_challenge() {
        let c = Challenge::parse(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(c.error, None);
        assert!(!c.is_insufficient_scope());
    }

    #[test]
    fn scheme_and_names_are_case_insensitive_and_values_may_be_tokens() {
        let c = Challenge::parse("bEaReR ERROR=insufficient_scope,Scope=admin").unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("admin"));
        assert!(c.is_insufficient_scope());
    }

    #[test]
    fn quoted_strings_keep_commas_and_unescape() {
        let c = Challenge::parse(
            r#"Bearer error="invalid_token", error_description="bad, \"very\" bad", scope="a\\b c""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scope.as_deref(), Some(r"a\b c"));
    }

    #[test]
    fn the_bearer_challenge_among_several() {
        let header = r#"Basic realm="old, api", Newauth realm="apps", type=1, title="Login to \"apps\"", Bearer scope="mcp:basic", resource_metadata="https://x.example/prm""#;
        let c = Challenge::parse(header).unwrap();
        assert_eq!(c.scope.as_deref(), Some("mcp:basic"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x.example/prm")
        );

        // A token68 challenge before it, and another one after it.
        let c =
            Challenge::parse("Basic dXNlcjpwYXNz==, Bearer error=invalid_token, Foo bar").unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scope, None);

        // The first Bearer challenge wins.
        let c = Challenge::parse(r#"Bearer scope="one", Bearer scope="two""#).unwrap();
        assert_eq!(c.scope.as_deref(), Some("one"));
    }

    #[test]
    fn a_bare_bearer_and_no_bearer_at_all() {
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
        assert_eq!(
            Challenge::parse("Bearer realm=\"example\""),
            Some(Challenge::default())
        );
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse(""), None);
        assert_eq!(Challenge::parse("Bearery scope=x"), None);
        // An empty scope is no scope.
        assert_eq!(Challenge::parse(r#"Bearer scope="""#).unwrap().scope, None);
    }

    #[test]
    fn broken_values_stop_the_reading_without_panicking() {
        assert_eq!(
            Challenge::parse(r#"Bearer scope="unterminated"#),
            Some(Challenge::default())
        );
        let c = Challenge::parse(r#"Bearer error="x", scope"#).unwrap();
        assert_eq!(c.error.as_deref(), Some("x"));
        assert_eq!(Challenge::parse("=,=,\"\\"), None);
    }

    #[test]
    fn from_every_header_of_a_response() {
        let mut headers = http::HeaderMap::new();
        headers.append(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static(r#"Basic realm="x""#),
        );
        headers.append(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static(r#"Bearer scope="s""#),
        );
        assert_eq!(
            Challenge::from_headers(&headers).unwrap().scope.as_deref(),
            Some("s")
        );
    }
}
