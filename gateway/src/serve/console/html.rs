//! HTML building blocks: escaping (every text that reaches a page goes through
//! [`esc`]), the page shell with its navigation, and small widgets (state badges,
//! sparklines). No inline scripts or styles: the Content-Security-Policy forbids them.

use std::fmt::Write;

use super::auth::Viewer;

/// `text` escaped for HTML text and double-quoted attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one path segment or query value (percent-encoded, unreserved kept).
pub(super) fn url_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The pages in the navigation: (path, label, admin only).
const NAV: &[(&str, &str, bool)] = &[
    ("/console", "Upstreams", false),
    ("/console/catalog", "Catalog", false),
    ("/console/tenants", "Tenants", false),
    ("/console/connections", "Connections", false),
    ("/console/register", "Register an API", true),
    ("/console/health", "Reloads & health", true),
];

/// A whole page: `title`, the navigation with `current` marked, and `body`.
pub(super) fn page(viewer: &Viewer, csrf: &str, current: &str, title: &str, body: &str) -> String {
    let mut nav = String::new();
    for (path, label, admin_only) in NAV {
        if *admin_only && !viewer.is_admin() {
            continue;
        }
        let aria = if *path == current {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(nav, "<li><a href=\"{path}\"{aria}>{label}</a></li>");
    }
    let who = match viewer {
        Viewer::Admin => "admin".to_owned(),
        Viewer::Tenant(tenant, None) => format!("tenant {} (read-only)", esc(&tenant.name)),
        Viewer::Tenant(tenant, Some(subject)) => format!(
            "{} of tenant {} (read-only)",
            esc(subject),
            esc(&tenant.name)
        ),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"csrf-token\" content=\"{csrf}\">\
         <title>{title} · toolgate console</title>\
         <link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/console/assets/console.css\">\
         <script src=\"/console/assets/console.js\" defer></script></head>\
         <body><a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header><span class=\"brand\">toolgate</span>\
         <nav aria-label=\"Console\"><ul>{nav}</ul></nav>\
         <form method=\"post\" action=\"/console/logout\" class=\"who\">\
         <span>Signed in as {who}</span>\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\">Sign out</button></form></header>\
         <main id=\"main\"><h1>{title}</h1>{body}</main></body></html>",
        csrf = esc(csrf),
        title = esc(title),
    )
}

/// A page without a session (the login form, errors before login).
pub(super) fn bare_page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · toolgate console</title>\
         <link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/console/assets/console.css\"></head>\
         <body><main id=\"main\" class=\"narrow\"><h1>{title}</h1>{body}</main></body></html>",
        title = esc(title),
    )
}

/// A `<select>`'s `<option>`s, one per name, `selected` marked.
pub(super) fn options<'a>(
    out: &mut String,
    names: impl IntoIterator<Item = &'a str>,
    selected: &str,
) {
    for name in names {
        let mark = if name == selected { " selected" } else { "" };
        let _ = write!(
            out,
            "<option value=\"{n}\"{mark}>{n}</option>",
            n = esc(name)
        );
    }
}

/// A hidden CSRF field for a form.
pub(super) fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(csrf)
    )
}

/// An upstream's state as a badge: colour and the word (never colour alone).
pub(super) fn state_badge(state: &str) -> String {
    let class = match state {
        "healthy" => "ok",
        "degraded" => "warn",
        "down" => "bad",
        _ => "idle",
    };
    let symbol = match class {
        "ok" => "●",
        "warn" => "▲",
        "bad" => "✕",
        _ => "○",
    };
    format!(
        "<span class=\"badge {class}\" data-state=\"{state}\"><span aria-hidden=\"true\">{symbol}</span> {state}</span>",
        state = esc(state)
    )
}

/// Calls (line) and errors (bars) per bucket as an inline SVG, with a text equivalent.
pub(super) fn sparkline(calls: &[u32], errors: &[u32], bucket_seconds: u64) -> String {
    const W: usize = 144;
    const H: usize = 28;
    let n = calls.len().max(1);
    let max = calls.iter().copied().max().unwrap_or(0).max(1) as f64;
    let step = W as f64 / n as f64;
    let mut points = String::new();
    for (i, c) in calls.iter().enumerate() {
        let x = i as f64 * step + step / 2.0;
        let y = H as f64 - 2.0 - (*c as f64 / max) * (H as f64 - 4.0);
        let _ = write!(points, "{x:.1},{y:.1} ");
    }
    let mut bars = String::new();
    for (i, e) in errors.iter().enumerate().filter(|(_, e)| **e > 0) {
        let h = ((*e as f64 / max) * (H as f64 - 4.0)).max(2.0);
        let _ = write!(
            bars,
            "<rect class=\"err\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"/>",
            i as f64 * step,
            H as f64 - h,
            step.max(1.0)
        );
    }
    let total: u64 = calls.iter().map(|&c| u64::from(c)).sum();
    let failed: u64 = errors.iter().map(|&e| u64::from(e)).sum();
    let minutes = (n as u64 * bucket_seconds) / 60;
    let label = format!("{total} calls, {failed} errors in the last {minutes} minutes");
    format!(
        "<svg class=\"spark\" role=\"img\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\">\
         <title>{label}</title>{bars}<polyline points=\"{}\"/></svg>\
         <span class=\"spark-text\">{total} / {failed} err</span>",
        points.trim_end()
    )
}

/// A notice box (`kind`: `ok`, `bad`, `info`).
pub(super) fn notice(kind: &str, text: &str) -> String {
    let role = if kind == "bad" { "alert" } else { "status" };
    format!(
        "<p class=\"notice {kind}\" role=\"{role}\">{}</p>",
        esc(text)
    )
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub(super) fn utc(seconds: u64) -> String {
    let days = seconds / 86_400;
    let rem = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_dates() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(url_part("a b/c__d"), "a%20b%2Fc__d");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_795_000_000), "2026-11-18 11:06:40 UTC");
        let svg = sparkline(&[0, 1, 2], &[0, 0, 1], 10);
        assert!(svg.contains("3 calls, 1 errors"), "{svg}");
    }
}
