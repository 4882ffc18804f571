//! Path keys that carry more than a path. OpenAPI allows one operation per method and
//! path, so specs give a path several operations by decorating its key: a fragment
//! (`/oauth2/token#refresh`) that only tells the operations apart, or a constant query
//! (`/responses/{id}?beta=true`, S3's `/{Bucket}?uploads`) the API expects on the
//! wire. Neither belongs in the URL path: the fragment is dropped, the query constants
//! are sent as query parameters.

/// A path key split into what is sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct PathKey {
    /// The URL path template (`{name}` variables still in it).
    pub path: String,
    /// Constant query parameters, decoded, in the key's order; `None` for a bare key
    /// (`?uploads`), which is sent without `=`.
    pub query: Vec<(String, Option<String>)>,
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// Splits a spec's path key: `/a/{id}?x=1&y#frag` -> path `/a/{id}`, query
/// `[("x", Some("1")), ("y", None)]`.
pub(super) fn split(key: &str) -> PathKey {
    let no_fragment = key.split_once('#').map_or(key, |(p, _)| p);
    let (path, query) = no_fragment
        .split_once('?')
        .map_or((no_fragment, ""), |(p, q)| (p, q));
    let query = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), Some(decode(v))),
            None => (decode(pair), None),
        })
        .collect();
    PathKey {
        path: path.to_owned(),
        query,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_and_constant_queries_leave_the_path() {
        assert_eq!(split("/pets/{id}").path, "/pets/{id}");
        assert_eq!(split("/oauth2/token#refresh"), split("/oauth2/token"));
        let k = split("/responses/{id}?beta=true&mode=a%20b&uploads#v2");
        assert_eq!(k.path, "/responses/{id}");
        assert_eq!(
            k.query,
            [
                ("beta".to_owned(), Some("true".to_owned())),
                ("mode".to_owned(), Some("a b".to_owned())),
                ("uploads".to_owned(), None),
            ]
        );
    }
}
