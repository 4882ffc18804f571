//! `toolgate-bench`: what the gateway costs, measured against the direct path.
//!
//! ```text
//! cargo run --release -p toolgate-bench -- all            # everything, one markdown report
//! cargo run --release -p toolgate-bench -- overhead       # call overhead only
//! cargo run --release -p toolgate-bench -- catalog        # imports, tools/list, sessions
//! cargo run --release -p toolgate-bench -- truncation     # token counting and truncation
//! cargo run --release -p toolgate-bench -- search         # search recall on real MCP servers
//! cargo run --release -p toolgate-bench -- recovery       # a stdio upstream back after kill -9
//! cargo run -p toolgate-bench -- all --smoke              # tiny sizes: proves it runs
//! cargo run --release -p toolgate-bench -- peers-install  # venvs for the peer rows
//! cargo run --release -p toolgate-bench -- overhead --only mcp,peers
//! ```
//!
//! The bench starts its own upstreams in a child process (an MCP server over streamable
//! HTTP, a 5,000-tool MCP server, a small HTTP API with its OpenAPI spec) and, through
//! the gateway, itself again as a stdio MCP server; it spawns the `toolgate` binary of
//! the same build profile with a generated config. See `bench/README.md` for what each
//! row means and the figures measured.
//!
//! Internal subcommands (the bench runs them as child processes): `upstreams`,
//! `stdio-server`, `import-one`.

mod catalog;
mod client;
mod load;
mod overhead;
mod peers;
mod proc;
mod recovery;
mod report;
mod search;
mod search_set;
mod tasks;
mod truncation;
mod upstreams;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What one run measures and how hard.
#[derive(Clone, Debug)]
pub struct Settings {
    pub smoke: bool,
    /// Rounds per path (direct and gateway alternate; medians are reported).
    pub rounds: usize,
    /// Unrecorded calls at the start of each round.
    pub warmup: Duration,
    /// The measured part of each round.
    pub measure: Duration,
    /// Calls per worker per round, at most (bounds every loop in count as well).
    pub max_calls: usize,
    pub concurrency: Vec<usize>,
    /// Tools of the large catalog (half of them allowed to the tenant).
    pub catalog_tools: usize,
    /// Idle sessions created for the memory measurement.
    pub sessions: usize,
    /// `tools/list` round trips timed.
    pub list_runs: usize,
    /// Size of the JSON result for the truncation rows.
    pub truncate_bytes: usize,
    /// `toolgate` binary (else found next to this one, built when missing).
    pub toolgate: Option<PathBuf>,
    /// Parts to run (overhead paths `mcp`, `rest`, `api-mcp`, `stdio`, `peers`; catalog parts
    /// `imports`, `list`, `sessions`); empty: all.
    pub only: Vec<String>,
}

impl Settings {
    /// Whether `part` is to run (`--only`).
    pub fn wants(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }

    fn full() -> Self {
        Self {
            smoke: false,
            rounds: 5,
            warmup: Duration::from_millis(300),
            measure: Duration::from_millis(1000),
            max_calls: 200_000,
            concurrency: vec![1, 16, 64],
            catalog_tools: 5_000,
            sessions: 10_000,
            list_runs: 30,
            truncate_bytes: 1024 * 1024,
            toolgate: None,
            only: Vec::new(),
        }
    }

    fn smoke() -> Self {
        Self {
            smoke: true,
            rounds: 1,
            warmup: Duration::ZERO,
            measure: Duration::from_secs(5),
            max_calls: 3,
            concurrency: vec![1, 16, 64],
            catalog_tools: 200,
            sessions: 50,
            list_runs: 3,
            truncate_bytes: 64 * 1024,
            toolgate: None,
            only: Vec::new(),
        }
    }
}

/// What `--only` may name besides the call paths ([`overhead::PATHS`]).
const PARTS: &[&str] = &[
    "imports",
    "list",
    "sessions",
    "truncation",
    "tasks",
    "search",
    "recovery",
];

const USAGE: &str =
    "usage: toolgate-bench <all|overhead|catalog|truncation|tasks|search|recovery> [--smoke] [--toolgate PATH]
         [--rounds N] [--seconds S] [--warmup S] [--concurrency 1,16,64]
         [--list-runs N] [--sessions N]
         [--only mcp,mcp-sessionless,rest,api-mcp,stdio,peers,imports,list,sessions,truncation,
                 tasks,search,recovery]
       toolgate-bench peers-install [contextforge] [litellm]
                                                   (venvs for the peer rows, pinned)
       toolgate-bench upstreams [--tools N]        (internal: the bench's upstreams)
       toolgate-bench proxy --target URL           (internal: the bare forwarding proxy)
       toolgate-bench stdio-server                 (internal: an MCP server on stdin/stdout)
       toolgate-bench import-one SPEC [--runs N]   (internal: one OpenAPI import, timed)
       toolgate-bench cluster-spec FILE            (writes the generated cluster API spec)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first().map(String::as_str) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let rest = &args[1..];
    let result = match command {
        "upstreams" => upstreams::main(rest),
        "proxy" => upstreams::proxy_main(rest),
        "stdio-server" => upstreams::stdio_server(),
        "import-one" => catalog::import_one(rest),
        "cluster-spec" => catalog::write_cluster_spec(rest),
        "peers-install" => peers::install(rest),
        "all" | "overhead" | "catalog" | "truncation" | "tasks" | "search" | "recovery" => {
            match parse_settings(rest) {
                Ok(settings) => run(command, settings),
                Err(message) => {
                    eprintln!("toolgate-bench: {message}\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("toolgate-bench: unknown command '{other}'\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn parse_settings(args: &[String]) -> Result<Settings, String> {
    let smoke = args.iter().any(|a| a == "--smoke");
    let mut settings = if smoke {
        Settings::smoke()
    } else {
        Settings::full()
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--smoke" => {}
            "--rounds" => {
                settings.rounds = value("--rounds")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=50).contains(n))
                    .ok_or("--rounds: 1 to 50")?;
            }
            "--seconds" => {
                let s: f64 = value("--seconds")?
                    .parse()
                    .ok()
                    .filter(|s| (0.05..=60.0).contains(s))
                    .ok_or("--seconds: 0.05 to 60")?;
                settings.measure = Duration::from_secs_f64(s);
            }
            "--toolgate" => settings.toolgate = Some(PathBuf::from(value("--toolgate")?)),
            "--concurrency" => {
                settings.concurrency = value("--concurrency")?
                    .split(',')
                    .map(|c| c.trim().parse().ok().filter(|c| (1..=512).contains(c)))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or("--concurrency: a comma-separated list of 1 to 512")?;
            }
            "--only" => {
                settings.only = value("--only")?.split(',').map(str::to_owned).collect();
                for part in &settings.only {
                    if !PARTS.contains(&part.as_str()) && !overhead::PATHS.contains(&part.as_str())
                    {
                        return Err(format!("--only: unknown part '{part}'"));
                    }
                }
            }
            "--warmup" => {
                let s: f64 = value("--warmup")?
                    .parse()
                    .ok()
                    .filter(|s| (0.0..=60.0).contains(s))
                    .ok_or("--warmup: 0 to 60")?;
                settings.warmup = Duration::from_secs_f64(s);
            }
            "--list-runs" => {
                settings.list_runs = value("--list-runs")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("--list-runs: 1 to 1000")?;
            }
            "--sessions" => {
                settings.sessions = value("--sessions")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=100_000).contains(n))
                    .ok_or("--sessions: 1 to 100000")?;
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(settings)
}

fn run(command: &str, settings: Settings) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut report = report::Report::new(&settings);
        if matches!(command, "all" | "overhead") {
            overhead::run(&settings, &mut report).await?;
        }
        if matches!(command, "all" | "catalog") {
            catalog::run(&settings, &mut report).await?;
        }
        if matches!(command, "all" | "truncation") && settings.wants("truncation") {
            truncation::run(&settings, &mut report)?;
        }
        if matches!(command, "all" | "tasks") {
            tasks::run(&settings, &mut report).await?;
        }
        if matches!(command, "all" | "search") && settings.wants("search") {
            search::run(&settings, &mut report)?;
        }
        if matches!(command, "all" | "recovery") {
            recovery::run(&settings, &mut report).await?;
        }
        print!("{}", report.render());
        Ok(())
    })
}
