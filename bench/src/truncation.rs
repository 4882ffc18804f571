//! Token budgets: how fast the gateway's tokenizer counts, and how long fitting a large
//! JSON result into the default budget (12,000 tokens, o200k_base) takes. Measured on
//! the gateway's own `truncate` module, in process (the same code every call runs).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};
use toolgate::truncate::{Budget, Encoding, count, truncate_result};

use crate::Settings;
use crate::load::median_duration;
use crate::report::Report;

/// A JSON array of list-API records (ids, numbers, labels, prose), about `bytes` long:
/// the shared generator with a fixed seed, so every run sees the same payload.
pub(crate) fn json_records(bytes: usize) -> String {
    use toolgate_test_support::text;
    text::json_records(bytes, text::WORDS, 17)
}

fn timed<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let out = std::hint::black_box(f());
        times.push(start.elapsed());
        last = Some(out);
    }
    let out = last.expect("at least one run");
    (median_duration(&mut times), out)
}

pub(crate) fn run(settings: &Settings, report: &mut Report) -> Result<()> {
    let runs = if settings.smoke { 2 } else { 9 };
    let text = json_records(settings.truncate_bytes);
    let size = if settings.truncate_bytes >= 1024 * 1024 {
        format!(
            "{:.0} MB",
            settings.truncate_bytes as f64 / (1024.0 * 1024.0)
        )
    } else {
        format!("{} KB", settings.truncate_bytes / 1024)
    };
    // The vocabulary loads on first use: not part of any row.
    let _ = count("warm up", Encoding::O200kBase);

    let (took, tokens) = timed(runs, || count(&text, Encoding::O200kBase));
    report.row(
        format!("count tokens, {size} JSON (o200k_base)"),
        format!(
            "{:.1} M tokens/s ({tokens} tokens in {:.1} ms, median of {runs})",
            tokens as f64 / took.as_secs_f64() / 1e6,
            took.as_secs_f64() * 1000.0
        ),
    );

    let budget = Budget::default();
    let raw = json!({"content": [{"type": "text", "text": text}]});
    let Value::Object(raw) = raw else {
        bail!("a JSON object literal is an object");
    };
    // The input is cloned outside the timed part: truncation takes the result by value.
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let input = raw.clone();
        let start = Instant::now();
        let out = std::hint::black_box(truncate_result(input, &budget));
        times.push(start.elapsed());
        last = Some(out);
    }
    let took = median_duration(&mut times);
    let Some(out) = last else {
        bail!("no truncation run");
    };
    if out.result_tokens > budget.max_tokens {
        bail!(
            "truncation left {} tokens over a budget of {}",
            out.result_tokens,
            budget.max_tokens
        );
    }
    let ms = took.as_secs_f64() * 1000.0;
    report.row(
        format!("truncate {size} JSON to {} tokens", budget.max_tokens),
        format!(
            "{ms:.1} ms median of {runs} ({} → {} tokens)",
            out.original_tokens, out.result_tokens
        ),
    );
    if !settings.smoke {
        report.target(
            "truncate 1 MB JSON",
            "≤ 30 ms",
            format!("{ms:.1} ms"),
            ms <= 30.0,
        );
    }
    Ok(())
}
