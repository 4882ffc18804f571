//! Import timing and peak heap of real specs: `cargo run --release -p toolgate-adapters
//! --example import_bench [spec files...]`. Without arguments it measures Stripe, GitHub
//! and Twilio from `$TOOLGATE_SHARED/specs` (default `../shared` next to the workspace):
//! the median of 5 imports each, and the peak heap of one import.

// Counting the heap needs a global allocator, which is `unsafe` to implement.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use toolgate_adapters::Upstream;
use toolgate_adapters::openapi::{OpenApiConfig, OpenApiUpstream};

/// Counts live heap bytes and remembers the peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size > layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn shared_dir() -> PathBuf {
    match std::env::var("TOOLGATE_SHARED") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut files: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        let specs = shared_dir().join("specs");
        files = [
            "stripe-spec3.yaml",
            "github-api.github.com.json",
            "twilio_api_v2010.json",
        ]
        .iter()
        .map(|f| specs.join(f))
        .collect();
    }
    println!(
        "{:<32} {:>6} {:>8} {:>10} {:>10} {:>12}",
        "spec", "tools", "skipped", "median ms", "peak MB", "~tokens"
    );
    for file in files {
        let label = file.file_name().unwrap().to_string_lossy().into_owned();
        let mut times = Vec::new();
        let mut peak = 0;
        let mut summary = (0, 0, 0);
        for _ in 0..5 {
            let base = LIVE.load(Ordering::Relaxed);
            PEAK.store(base, Ordering::Relaxed);
            let start = Instant::now();
            let result =
                OpenApiUpstream::load("bench", OpenApiConfig::from_path(file.to_string_lossy()))
                    .await;
            let took = start.elapsed();
            match result {
                Ok((up, report)) => {
                    if let Ok(dir) = std::env::var("IMPORT_BENCH_DUMP") {
                        let tools: Vec<_> = up.tools().iter().map(|t| t.raw.clone()).collect();
                        let out = serde_json::json!({"report": report, "tools": tools});
                        let path = PathBuf::from(dir).join(format!("{label}.tools.json"));
                        std::fs::write(path, serde_json::to_vec_pretty(&out).unwrap()).unwrap();
                    }
                    summary = (up.tools().len(), report.skipped.len(), report.approx_tokens);
                }
                Err(e) => {
                    println!("{label}: load failed: {e}");
                    break;
                }
            }
            peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
            times.push(took);
        }
        if times.is_empty() {
            continue;
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "{:<32} {:>6} {:>8} {:>10.1} {:>10.1} {:>12}",
            label,
            summary.0,
            summary.1,
            median.as_secs_f64() * 1000.0,
            peak as f64 / 1_048_576.0,
            summary.2
        );
    }
}
