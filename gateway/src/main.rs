//! The `toolgate` command line. Everything it does lives in the library; this file only
//! parses arguments, sets up logging and picks the command.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;
use toolgate::app::{App, StartError};
use toolgate::config::Config;
use toolgate::credentials::Authenticator;
use toolgate::reload::Reloader;
use toolgate::serve;

/// mimalloc, not glibc's malloc: a call allocates and frees about 150 times, often on
/// another worker thread than the one that allocated (tokio moves tasks), and glibc's
/// arenas took an eighth of the gateway's CPU at c=16 with lock hand-offs besides;
/// mimalloc's thread-local free lists cut CPU per call by a fifth (bench/HISTORY.md,
/// "mimalloc", item 10). `no_thp` keeps transparent huge pages off: with them, serving a
/// large spec took ~30 MB more resident memory, and the bench's runs with and without
/// them were within each other's spread.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "One MCP endpoint over many tool upstreams"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the catalog over MCP (streamable HTTP at /mcp) plus the ops endpoints.
    /// The config file is reloaded when it changes and on SIGHUP. Without `--config`,
    /// the embedded defaults (`config/quickstart.yaml`: server-everything through npx).
    Serve {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides `listen` from the config (default 127.0.0.1:8080).
        #[arg(long)]
        listen: Option<String>,
        /// Do not watch the config file; reload only on SIGHUP.
        #[arg(long)]
        no_watch: bool,
    },
    /// Serve the same catalog over stdio, for desktop MCP clients.
    Stdio {
        #[arg(long)]
        config: PathBuf,
        /// The tenant this process serves (default: the anonymous tenant, or every
        /// tool when no tenants are configured).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Validate the config, connect to every upstream, print a summary per upstream;
    /// exits non-zero on any error.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
    /// Print the catalog; exits non-zero (naming it on stderr) when an upstream failed
    /// (an OpenAPI spec that does not import, a server that does not start).
    Tools {
        #[arg(long)]
        config: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Ask a running gateway whether it is ready (`GET /readyz`): exits 0 when it is,
    /// 1 with the reason on one line otherwise. The container image's health check.
    Healthcheck {
        /// The URL to ask (e.g. http://127.0.0.1:8080/readyz).
        #[arg(long, conflicts_with_all = ["listen", "config"])]
        url: Option<String>,
        /// The gateway's listen address (default 127.0.0.1:8080); an unspecified one
        /// (0.0.0.0, [::]) is asked on loopback.
        #[arg(long, conflicts_with = "config")]
        listen: Option<String>,
        /// Take the listen address from this config file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// How long to wait for the answer (connecting included).
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Print the JSON Schema of the config file.
    ConfigSchema,
    /// Print the hash of an API key, for `tenants.<name>.api_keys` in the config.
    HashKey {
        /// The key; read from standard input when omitted (keeps it out of shell
        /// history).
        key: Option<String>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// The config `serve` runs on without `--config`: the quick start's.
const EMBEDDED_DEFAULTS: &str = include_str!("../../config/quickstart.yaml");

fn embedded_defaults() -> Result<Config, ExitCode> {
    Config::parse(EMBEDDED_DEFAULTS, &|name| std::env::var(name).ok()).map_err(|error| {
        eprintln!("toolgate: embedded defaults: {error}");
        ExitCode::from(2)
    })
}

fn load(path: &std::path::Path) -> Result<Config, ExitCode> {
    Config::load(path).map_err(|error| {
        eprintln!("toolgate: {error}");
        ExitCode::from(2)
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::ConfigSchema => {
            println!("{:#}", Config::json_schema());
            ExitCode::SUCCESS
        }
        Command::Serve {
            config: path,
            listen,
            no_watch,
        } => {
            let config = match &path {
                Some(path) => load(path),
                None => embedded_defaults(),
            };
            match config {
                Ok(config) => {
                    let telemetry = config.telemetry.clone();
                    logged(&telemetry, async move {
                        if path.is_none() {
                            tracing::info!(
                                "no --config: running on the embedded defaults (config/quickstart.yaml)"
                            );
                        }
                        serve_http(config, path, listen, !no_watch).await
                    })
                    .await
                }
                Err(code) => code,
            }
        }
        Command::Stdio { config, tenant } => match load(&config) {
            Ok(config) => logged(&config.telemetry.clone(), serve_stdio(config, tenant)).await,
            Err(code) => code,
        },
        Command::Healthcheck {
            url,
            listen,
            config,
            timeout,
        } => healthcheck(url, listen, config, timeout).await,
        Command::HashKey { key } => logged(&Default::default(), async { hash_key(key) }).await,
        Command::Check { config } => match load(&config) {
            Ok(config) => logged(&config.telemetry.clone(), check(config)).await,
            Err(code) => code,
        },
        Command::Tools { config, format } => match load(&config) {
            Ok(config) => logged(&config.telemetry.clone(), tools(config, format)).await,
            Err(code) => code,
        },
    }
}

/// Sets up logging and the trace export the config asks for (once its file is read),
/// runs `command`, then sends the spans still waiting.
async fn logged(
    telemetry: &toolgate::telemetry::TelemetryConfig,
    command: impl std::future::Future<Output = ExitCode>,
) -> ExitCode {
    let logging = match toolgate::logging::init(telemetry) {
        Ok(logging) => logging,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return ExitCode::from(2);
        }
    };
    let code = command.await;
    logging.finish().await;
    code
}

/// Starts toolgate and waits for the upstreams' first lists.
async fn start(config: Config) -> Result<Arc<App>, ExitCode> {
    let app = App::start(config).await.map_err(exit)?;
    app.finish_startup().await.map_err(exit)?;
    Ok(app)
}

/// Prints why toolgate could not start; exit code 2 (a config problem).
fn exit(error: StartError) -> ExitCode {
    eprintln!("toolgate: {error}");
    ExitCode::from(2)
}

async fn serve_http(
    config: Config,
    path: Option<PathBuf>,
    listen: Option<String>,
    watch: bool,
) -> ExitCode {
    let address = listen.unwrap_or_else(|| config.listen.clone());
    if let Some(warning) = config.open_mode_warning(&address) {
        tracing::warn!(%address, "{warning}");
    }
    let listener = match tokio::net::TcpListener::bind(&address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("toolgate: cannot listen on {address}: {error}");
            return ExitCode::from(2);
        }
    };
    let app = match App::start(config).await {
        Ok(app) => app,
        Err(error) => return exit(error),
    };
    let gateway = app.gateway.clone();
    let authenticator = match authenticator(&gateway.config()).await {
        Ok(authenticator) => authenticator,
        Err(code) => {
            app.shutdown().await;
            return code;
        }
    };
    // Reloads swap config, policy, upstreams and credentials in place: the router,
    // the sessions and the connections stay.
    // The embedded defaults have no file to reload.
    if let Some(path) = path {
        let reloader = Arc::new(Reloader::new(
            app.registry.clone(),
            app.reloads.clone(),
            path,
            authenticator.clone(),
        ));
        #[cfg(unix)]
        if let Err(error) = reloader.reload_on_sighup(app.stop.child_token()) {
            tracing::warn!(%error, "SIGHUP will not reload the config");
        }
        if watch {
            reloader.watch(app.stop.child_token());
        }
    }
    let router = serve::Front::new(app.clone(), authenticator, app.stop.child_token());
    tracing::info!(%address, "listening (MCP at /mcp)");
    let metrics_listener = match &gateway.config().metrics.listen {
        None => None,
        Some(address) => match tokio::net::TcpListener::bind(address).await {
            Ok(listener) => Some(listener),
            Err(error) => {
                eprintln!("toolgate: cannot listen on {address} (metrics.listen): {error}");
                app.shutdown().await;
                return ExitCode::from(2);
            }
        },
    };
    let limits = gateway.config().server.clone();
    if let Some(listener) = metrics_listener {
        tracing::info!(address = ?listener.local_addr().ok(), "metrics listening (/metrics)");
        let metrics = serve::ops::metrics_router(gateway.clone());
        tokio::spawn(serve::listener::serve(
            listener,
            metrics,
            limits.clone(),
            app.stop.clone(),
        ));
    }
    let server = tokio::spawn(serve::listener::serve(
        listener,
        router,
        limits,
        app.stop.clone(),
    ));
    // Serve /healthz at once; /readyz turns ready after the first lists.
    if let Err(error) = app.finish_startup().await {
        return exit(error);
    }
    shutdown_signal().await;
    tracing::info!("shutting down");
    app.stop.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), server).await;
    app.shutdown().await;
    ExitCode::SUCCESS
}

async fn serve_stdio(config: Config, tenant: Option<String>) -> ExitCode {
    // The client is answered from its first message, as over HTTP: upstreams that are
    // not up yet join the catalog when they answer (with `list_changed`), instead of
    // holding a desktop client's `initialize` for up to `startup_timeout`.
    let app = match App::start(config).await {
        Ok(app) => app,
        Err(error) => return exit(error),
    };
    let mut startup = tokio::spawn({
        let app = app.clone();
        async move { app.finish_startup().await }
    });
    let gateway = &app.gateway;
    let tenant = match tenant {
        Some(name) => gateway.policy().tenant(&name),
        None => gateway.policy().resolve(None).ok(),
    };
    let Some(tenant) = tenant else {
        eprintln!(
            "toolgate: no tenant for this stdio process: pass --tenant NAME (one of the \
             configured tenants) or configure `anonymous_tenant`"
        );
        app.shutdown().await;
        return ExitCode::from(2);
    };
    let outcome = tokio::select! {
        outcome = serve::stdio::run(app.clone(), tenant) => outcome,
        // A passthrough name collision, found once the first lists are in, stops the
        // gateway as it does before serving over HTTP.
        Ok(Err(error)) = &mut startup => return exit(error),
    };
    app.shutdown().await;
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate: stdio session ended with an error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn check(config: Config) -> ExitCode {
    let app = match start(config).await {
        Ok(app) => app,
        Err(code) => return code,
    };
    let gateway = &app.gateway;
    // Connected is not the whole story (a skills path may be unreadable, a server may
    // not answer ping): check every connected upstream once, now, as the health loop
    // would at its next tick.
    let upstreams = gateway.upstreams();
    let probes = upstreams.values().map(|mounted| async move {
        if mounted.upstream.connection() == toolgate_adapters::Connection::Connected {
            let timeout = mounted.health.config().timeout;
            toolgate::health::probe(&mounted.upstream, &mounted.health, timeout).await;
        }
    });
    futures::future::join_all(probes).await;
    let mut failed = false;
    for status in gateway.statuses() {
        let line = format!(
            "{:<24} {:<16} {:<9} {:>4} tools{}",
            status.name,
            status.kind,
            format!("{:?}", status.health.state).to_lowercase(),
            status.tools,
            status
                .health
                .last_error
                .as_deref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
        println!("{line}");
        if status.health.state != toolgate::health::State::Healthy {
            failed = true;
            eprintln!(
                "toolgate: upstream '{}' is {}: {}",
                status.name,
                format!("{:?}", status.health.state).to_lowercase(),
                status
                    .health
                    .last_error
                    .as_deref()
                    .unwrap_or("no error reported")
            );
        }
    }
    println!("catalog: {} tools", gateway.catalog().len());
    for missing in toolgate::preflight::missing_state(gateway).await {
        failed = true;
        println!("{:<24} unavailable", missing.what);
        eprintln!("toolgate: {}: {}", missing.what, missing.message);
    }
    if let Some(warning) = gateway.config().open_mode_warning(&gateway.config().listen) {
        println!("warning: {warning}");
    }
    // Catalog drift is a warning, not a failure: an upstream may add the tools later.
    for (tenant, pattern) in gateway.policy().unmatched_patterns(&gateway.catalog()) {
        println!("warning: tenant '{tenant}': pattern '{pattern}' matches no tool");
    }
    app.shutdown().await;
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn tools(config: Config, format: Format) -> ExitCode {
    let app = match start(config).await {
        Ok(app) => app,
        Err(code) => return code,
    };
    let gateway = &app.gateway;
    let catalog = gateway.catalog();
    match format {
        Format::Json => {
            let all: Vec<Value> = catalog
                .entries()
                .iter()
                .map(|e| Value::Object(e.definition()))
                .collect();
            println!("{:#}", Value::Array(all));
        }
        Format::Text => {
            for entry in catalog.entries() {
                let description = entry
                    .get("description")
                    .and_then(Value::as_str)
                    .and_then(|d| d.lines().next())
                    .unwrap_or("");
                println!("{:<64} {description}", entry.name);
            }
        }
    }
    // A catalog missing an upstream's tools is not the catalog asked for: a script
    // must be able to tell (an OpenAPI spec that does not import, a server that does
    // not start).
    let mut failed = false;
    for status in gateway.statuses() {
        if status.health.state == toolgate::health::State::Down {
            failed = true;
            eprintln!(
                "toolgate: upstream '{}' failed, its tools are missing: {}",
                status.name,
                status
                    .health
                    .last_error
                    .as_deref()
                    .unwrap_or("no error reported")
            );
        }
    }
    app.shutdown().await;
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Builds the authenticator from the tenants' API keys and the JWT settings.
async fn authenticator(config: &Config) -> Result<Authenticator, ExitCode> {
    Authenticator::for_config(config).await.map_err(|error| {
        eprintln!("toolgate: {error}");
        ExitCode::from(2)
    })
}

/// Exit 0 when the gateway answers `/readyz` with 200; 1 with one line on stderr
/// otherwise; 2 when the config named cannot be read.
async fn healthcheck(
    url: Option<String>,
    listen: Option<String>,
    config: Option<PathBuf>,
    timeout: std::time::Duration,
) -> ExitCode {
    let url = match (url, listen, config) {
        (Some(url), _, _) => url,
        (None, Some(listen), _) => toolgate::healthcheck::readyz_url(&listen),
        (None, None, Some(path)) => match load(&path) {
            Ok(config) => toolgate::healthcheck::readyz_url(&config.listen),
            Err(code) => return code,
        },
        (None, None, None) => toolgate::healthcheck::readyz_url("127.0.0.1:8080"),
    };
    match toolgate::healthcheck::check(&url, timeout).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            eprintln!("toolgate healthcheck: {reason}");
            ExitCode::FAILURE
        }
    }
}

fn hash_key(key: Option<String>) -> ExitCode {
    let key = match key {
        Some(key) => key,
        None => {
            let mut line = String::new();
            if std::io::stdin().read_line(&mut line).is_err() {
                eprintln!("toolgate: could not read the key from standard input");
                return ExitCode::from(2);
            }
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    if key.is_empty() {
        eprintln!("toolgate: the key is empty");
        return ExitCode::from(2);
    }
    println!("{}", toolgate::credentials::hash_key(&key));
    ExitCode::SUCCESS
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
