//! The commands that talk to skuad's REST API: `status`, `stats`, `reload`, `zone ...`,
//! `record ...`, `audit tail`, `metrics`, `cache ...`, `upstreams` (see [`USAGE`]).
//!
//! Each prints a human-readable summary or table, or with `--json` the API's JSON as it
//! came, pretty-printed. The exit code tells a script what happened (see [`USAGE`]): the API
//! refused or failed (1), the command line is wrong (2), no API answered (3), the token was
//! not accepted (4).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::api::{self, ApiError, Client};

/// The API's address unless `--api` or `SKUA_API` says otherwise.
pub const DEFAULT_API: &str = "http://127.0.0.1:8053";

/// The host agent's status address unless `--agent` says otherwise.
pub const DEFAULT_AGENT: &str = "http://127.0.0.1:9853";

/// Usage of the API commands.
pub const USAGE: &str = "\
commands over skuad's REST API:
       skuactl status                 version, uptime, dataplane, configuration generation
       skuactl stats                  query counters (kernel sockets, AF_XDP queues)
       skuactl metrics                the counters in Prometheus text format, as served
       skuactl reload                 re-read the configuration (role operator)
       skuactl zone list
       skuactl zone add NAME TYPE     add a local zone, e.g. example.org. static (role dns)
       skuactl zone remove NAME       remove a zone added through the API, with its records
       skuactl record list [ZONE]     local-data records (under ZONE)
       skuactl record add RR          e.g. \"www.example.org. 300 IN A 198.18.0.1\" (role dns)
       skuactl record remove RR
       skuactl audit tail [-n N]      the last N entries of the audit log (role operator)
       skuactl cache lookup NAME      what the resolver's cache holds for NAME: answers and
                                      RRsets with the TTL they have left (role operator)
       skuactl cache flush NAME [--subtree] [--type T]
                                      forget NAME (and all below it, or one type)
       skuactl cache flush --negative every NXDOMAIN and NODATA answer (role operator)
       skuactl cache flush --all      everything
       skuactl cache dump > FILE      the cache as text (role operator)
       skuactl cache load FILE        read a dump back, e.g. after a restart (role admin;
                                      FILE - reads standard input)
       skuactl upstreams              the forwarder's upstreams: state, RTT, replies,
                                      timeouts, errors
       skuactl ha status [--agent URL] skuad's leases on its ha: addresses, and the host
                                      agent's VRRP instances and health checks (its
                                      /status, default http://127.0.0.1:9853)
       skuactl ha release             stop answering the ha: addresses now (role operator):
                                      the agent's next renewal fails, it leaves with
                                      priority 0 and the backup takes over (a manual
                                      failover); it rejoins as backup a second later
       skuactl tls status             the certificate in force (names, serial, validity,
                                      file), and with acme: the next renewal and why
                                      (renewal information window or two thirds of its
                                      lifetime), issued and failed orders, the last error
       skuactl tls renew              an ACME order now (role operator)
   where: skuad's local control socket when there is one (no token: skuad knows you by
       your user: root and skuad's user are admin, members of api: control-socket-group:
       get its role), else the HTTP API with a token
   options (anywhere on the line):
       --socket PATH     the control socket (default: $SKUA_SOCKET, else
                         /run/skua/control.sock for root, else
                         $XDG_RUNTIME_DIR/skua/control.sock, then the other one)
       --api URL         the HTTP API instead (default http://127.0.0.1:8053, or
                         $SKUA_API; used when no control socket is found)
       --token-file F    read the bearer token from F (else $SKUA_TOKEN; never an argument:
                         it would show in ps)
       --ca-file F       PEM certificates that sign the API's certificate (https://)
       --timeout SECS    give up on a request after SECS seconds (default 120)
       --json            print the API's JSON response, pretty (errors too, on stdout)
   exit codes: 0 done; 1 the API refused or failed the operation (its error code and
       message are printed); 2 usage error; 3 cannot reach the API (connection refused,
       timeout, not HTTP); 4 authentication or authorization failure (401, 403, 429)";

/// What went wrong, by exit code.
#[derive(Debug)]
enum Fail {
    /// Exit 2.
    Usage(String),
    /// Exit 1, 3 or 4 depending on the error.
    Api(ApiError),
}

impl From<ApiError> for Fail {
    fn from(e: ApiError) -> Self {
        Fail::Api(e)
    }
}

fn usage(why: impl Into<String>) -> Fail {
    Fail::Usage(why.into())
}

/// Options that take a value.
const VALUE_OPTIONS: [&str; 7] = [
    "--api",
    "--agent",
    "--socket",
    "--token-file",
    "--ca-file",
    "--timeout",
    "--type",
];

/// Options without a value.
const FLAG_OPTIONS: [&str; 4] = ["--json", "--subtree", "--negative", "--all"];

/// Whether `args` (the arguments after the program name) is one of the API commands, after
/// any global options. `audit verify` is not: it works on a file, without the API.
pub fn is_api_command(args: &[String]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if VALUE_OPTIONS.contains(&a) {
            i += 2;
        } else if FLAG_OPTIONS.contains(&a) || VALUE_OPTIONS.iter().any(|o| is_inline(a, o)) {
            i += 1;
        } else {
            return match a {
                "status" | "stats" | "reload" | "zone" | "record" | "metrics" | "cache"
                | "upstreams" | "ha" | "tls" => true,
                "audit" => args.get(i + 1).is_some_and(|s| s == "tail"),
                _ => false,
            };
        }
    }
    false
}

fn is_inline(arg: &str, option: &str) -> bool {
    arg.strip_prefix(option).is_some_and(|r| r.starts_with('='))
}

/// The command line, options taken out.
#[derive(Debug, Default, PartialEq)]
struct Line {
    api: Option<String>,
    /// `--agent URL` (ha status).
    agent: Option<String>,
    socket: Option<PathBuf>,
    token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    timeout: Option<String>,
    json: bool,
    help: bool,
    /// `-n N` (audit tail).
    n: Option<String>,
    /// `--subtree`, `--type T`, `--negative`, `--all` (cache flush).
    subtree: bool,
    rtype: Option<String>,
    negative: bool,
    all: bool,
    words: Vec<String>,
}

fn parse(args: &[String]) -> Result<Line, Fail> {
    let mut l = Line::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (a, None),
        };
        let value = |i: &mut usize| -> Result<String, Fail> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| usage(format!("{name} needs a value")))
        };
        match name {
            "--api" => l.api = Some(value(&mut i)?),
            "--agent" => l.agent = Some(value(&mut i)?),
            "--socket" => l.socket = Some(value(&mut i)?.into()),
            "--token-file" => l.token_file = Some(value(&mut i)?.into()),
            "--ca-file" => l.ca_file = Some(value(&mut i)?.into()),
            "--timeout" => l.timeout = Some(value(&mut i)?),
            "-n" => l.n = Some(value(&mut i)?),
            "--type" => l.rtype = Some(value(&mut i)?),
            "--json" if inline.is_none() => l.json = true,
            "--subtree" if inline.is_none() => l.subtree = true,
            "--negative" if inline.is_none() => l.negative = true,
            "--all" if inline.is_none() => l.all = true,
            "-h" | "--help" => l.help = true,
            "--token" => {
                return Err(usage(
                    "no --token: a token on the command line shows in ps; use --token-file F \
                     or the environment variable SKUA_TOKEN",
                ));
            }
            _ if a.starts_with('-') && a.len() > 1 => {
                return Err(usage(format!("unknown option {a}")));
            }
            _ => l.words.push(a.to_string()),
        }
        i += 1;
    }
    Ok(l)
}

/// Runs an API command; `args` are the arguments after the program name.
pub fn main(args: &[String]) -> ExitCode {
    let line = match parse(args) {
        Ok(l) => l,
        Err(f) => return report(f, false, false),
    };
    if line.help {
        out(&format!("{USAGE}\n"));
        return ExitCode::SUCCESS;
    }
    let mut has_token = false;
    let r = connect(&line).and_then(|c| {
        // On the control socket no token is used: no hint about one.
        has_token = c.has_token() || c.is_local();
        run(&c, &line)
    });
    match r {
        Ok(text) => {
            out(&text);
            ExitCode::SUCCESS
        }
        Err(f) => report(f, line.json, has_token),
    }
}

fn report(f: Fail, json: bool, has_token: bool) -> ExitCode {
    match f {
        Fail::Usage(why) => {
            eprintln!("skuactl: {why}\n(skuactl --help lists the commands)");
            ExitCode::from(2)
        }
        Fail::Api(e) => {
            if let ApiError::Refused { body, .. } = &e
                && json
                && let Ok(v) = serde_json::from_str::<Value>(body)
            {
                out(&pretty(&v));
            }
            let code = match &e {
                ApiError::Unreachable { .. } => 3,
                e if e.is_auth() => 4,
                _ => 1,
            };
            eprintln!("skuactl: {e}");
            if code == 4 && !has_token {
                eprintln!("skuactl: no token given: use --token-file F or SKUA_TOKEN");
            }
            ExitCode::from(code)
        }
    }
}

/// Writes to standard output; a closed pipe (`skuactl metrics | head`) is not an error.
fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|()| o.flush());
}

/// The control socket to use: `--socket`, else `$SKUA_SOCKET`, else (when neither `--api`
/// nor `$SKUA_API` asks for HTTP, and no token is given: a token is for the HTTP API) the
/// first default place that holds a socket of root's or this user's.
fn socket_path(line: &Line) -> Result<Option<PathBuf>, Fail> {
    let env = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
    if line.socket.is_some() && line.api.is_some() {
        return Err(usage("--socket and --api: one or the other"));
    }
    if let Some(p) = &line.socket {
        return Ok(Some(p.clone()));
    }
    if line.api.is_some() {
        return Ok(None);
    }
    if let Some(p) = env("SKUA_SOCKET") {
        return Ok(Some(p.into()));
    }
    if env("SKUA_API").is_some() || line.token_file.is_some() || env("SKUA_TOKEN").is_some() {
        return Ok(None);
    }
    let euid = std::fs::metadata("/proc/self")
        .map_or(u32::MAX, |m| std::os::unix::fs::MetadataExt::uid(&m));
    let xdg = env("XDG_RUNTIME_DIR");
    // Ours first (the place skuad uses when run by this user), then root's. Root never
    // looks in a user's runtime directory (kept by su or sudo -E): that socket is the
    // user's, and root would send its changes to whoever made it.
    let mine = skua_config::default_control_socket(euid, xdg.as_deref());
    let other = (euid != 0)
        .then(|| skua_config::default_control_socket(0, None))
        .flatten();
    // A place this user may not even look into counts as found: "permission denied" then
    // says why, where falling back to HTTP would only say "connection refused". A socket
    // that neither root nor this user owns is not skuad's to trust.
    Ok([mine, other]
        .into_iter()
        .flatten()
        .find(|p| match std::fs::symlink_metadata(p) {
            Ok(m) => {
                use std::os::unix::fs::MetadataExt;
                std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())
                    && (m.uid() == 0 || m.uid() == euid)
            }
            Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
        }))
}

fn connect(line: &Line) -> Result<Client, Fail> {
    let timeout = match &line.timeout {
        Some(t) => t
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86400.0)
            .map(std::time::Duration::from_secs_f64)
            .ok_or_else(|| usage(format!("--timeout {t}: not a number of seconds")))?,
        None => api::REQUEST_TIMEOUT,
    };
    if let Some(p) = socket_path(line)? {
        return Ok(Client::local(&p, timeout));
    }
    let base = line
        .api
        .clone()
        .or_else(|| std::env::var("SKUA_API").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| DEFAULT_API.to_string());
    let token = match &line.token_file {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| usage(format!("token file {}: {e}", f.display())))?;
            Some(
                check_token(&text)
                    .map_err(|e| usage(format!("token file {}: {e}", f.display())))?,
            )
        }
        None => match std::env::var("SKUA_TOKEN") {
            Ok(t) if !t.is_empty() => {
                Some(check_token(&t).map_err(|e| usage(format!("SKUA_TOKEN: {e}")))?)
            }
            _ => None,
        },
    };
    let ca = match &line.ca_file {
        Some(f) => {
            Some(std::fs::read(f).map_err(|e| usage(format!("CA file {}: {e}", f.display())))?)
        }
        None => None,
    };
    Client::new(&base, token, ca.as_deref(), timeout).map_err(usage)
}

/// The token as sent: surrounding white space (a file's final newline) removed; one word of
/// visible ASCII (what an HTTP header can carry).
fn check_token(text: &str) -> Result<String, &'static str> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty token");
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token must be one word of visible ASCII characters");
    }
    Ok(t.to_string())
}

fn run(c: &Client, l: &Line) -> Result<String, Fail> {
    let w: Vec<&str> = l.words.iter().map(String::as_str).collect();
    if l.n.is_some() && w.first() != Some(&"audit") {
        return Err(usage("-n is an option of audit tail"));
    }
    let flush_options = l.subtree || l.negative || l.all || l.rtype.is_some();
    if flush_options && w.get(..2) != Some(&["cache", "flush"][..]) {
        return Err(usage(
            "--subtree, --type, --negative and --all are options of cache flush",
        ));
    }
    match w.as_slice() {
        ["status"] => show(c, l, "/status", status_text),
        ["stats"] => show(c, l, "/stats", stats_text),
        ["metrics"] => {
            if l.json {
                return Err(usage(
                    "metrics is Prometheus text, not JSON; the same counters as JSON: \
                     skuactl stats --json",
                ));
            }
            Ok(c.get("/metrics")?.body)
        }
        ["reload"] => {
            let url = c.url("/reload");
            let v = c.post("/reload", None)?.json(&url)?;
            Ok(applied(l, &v, "reloaded"))
        }
        ["zone", "list"] => show(c, l, "/zones", zones_text),
        ["zone", "add", name, zone_type] => {
            let url = c.url("/zones");
            let body = json!({"name": name, "type": zone_type});
            let v = c.post("/zones", Some(&body))?.json(&url)?;
            Ok(applied(l, &v, &format!("added zone {name} ({zone_type})")))
        }
        ["zone", "remove", name] => {
            let path = format!("/zones/{}", api::encode(name));
            let v = c.delete(&path)?.json(&c.url(&path))?;
            Ok(applied(l, &v, &format!("removed zone {name}")))
        }
        ["zone", ..] => Err(usage(
            "usage: skuactl zone list | zone add NAME TYPE | zone remove NAME",
        )),
        ["record", "list"] => show(c, l, "/records", records_text),
        ["record", "list", zone] => show(
            c,
            l,
            &format!("/records?zone={}", api::encode(zone)),
            records_text,
        ),
        ["record", "add", rr @ ..] if !rr.is_empty() => {
            let rr = rr.join(" ");
            let url = c.url("/records");
            let v = c.post("/records", Some(&json!({ "rr": rr })))?.json(&url)?;
            Ok(applied(l, &v, &format!("added {rr}")))
        }
        ["record", "remove", rr @ ..] if !rr.is_empty() => {
            let rr = rr.join(" ");
            let path = format!("/records?rr={}", api::encode(&rr));
            let v = c.delete(&path)?.json(&c.url(&path))?;
            Ok(applied(l, &v, &format!("removed {rr}")))
        }
        ["record", ..] => Err(usage(
            "usage: skuactl record list [ZONE] | record add RR | record remove RR",
        )),
        ["audit", "tail"] => {
            let path = match &l.n {
                Some(n) => {
                    let n: u32 = n
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| usage(format!("-n {n}: not a positive number")))?;
                    format!("/audit?n={n}")
                }
                None => "/audit".into(),
            };
            show(c, l, &path, audit_text)
        }
        ["cache", "lookup", name] => show(
            c,
            l,
            &format!("/cache/lookup?name={}", api::encode(name)),
            lookup_text,
        ),
        ["cache", "flush", rest @ ..] => {
            let body = flush_body(l, rest)?;
            let url = c.url("/cache/flush");
            let v = c.post("/cache/flush", Some(&body))?.json(&url)?;
            Ok(if l.json {
                pretty(&v)
            } else {
                format!(
                    "flushed {}: {} answers, {} RRsets\n",
                    text(&v["flushed"]),
                    num(&v["messages"]),
                    num(&v["rrsets"])
                )
            })
        }
        ["cache", "dump"] => {
            if l.json {
                return Err(usage(
                    "cache dump is text (the format cache load reads), not JSON",
                ));
            }
            Ok(c.get_up_to("/cache/dump", api::MAX_DUMP)?.body)
        }
        ["cache", "load", file] => {
            let dump = if *file == "-" {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                    .map_err(|e| usage(format!("standard input: {e}")))?;
                s
            } else {
                std::fs::read_to_string(file).map_err(|e| usage(format!("{file}: {e}")))?
            };
            let url = c.url("/cache/load");
            let v = c.post_text("/cache/load", &dump)?.json(&url)?;
            Ok(if l.json {
                pretty(&v)
            } else {
                format!(
                    "loaded {file}: {} answers, {} RRsets ({} expired since the dump, {} outside every caching zone: skipped)\n",
                    num(&v["messages"]),
                    num(&v["rrsets"]),
                    num(&v["expired"]),
                    num(&v["outside"])
                )
            })
        }
        ["cache", ..] => Err(usage(
            "usage: skuactl cache lookup NAME | cache flush NAME [--subtree] [--type T] | \
             cache flush --negative | cache flush --all | cache dump | cache load FILE",
        )),
        ["upstreams"] => show(c, l, "/resolver/upstreams", upstreams_text),
        ["ha", "status"] => ha_status(c, l),
        ["ha", "release"] => {
            let url = c.url("/ha/release");
            let body = json!({"reason": "skuactl ha release"});
            let v = c.post("/ha/release", Some(&body))?.json(&url)?;
            Ok(if l.json {
                pretty(&v)
            } else {
                format!("released; {}", leases_text(&v))
            })
        }
        ["ha", ..] => Err(usage("ha status | ha release")),
        ["tls", "status"] => show(c, l, "/tls", tls_text),
        ["tls", "renew"] => {
            let url = c.url("/tls/renew");
            let v = c.post("/tls/renew", None)?.json(&url)?;
            Ok(if l.json {
                pretty(&v)
            } else {
                "renewal asked; see skuactl tls status\n".to_string()
            })
        }
        ["tls", ..] => Err(usage("tls status | tls renew")),
        _ => Err(usage(format!("unknown command '{}'", w.join(" ")))),
    }
}

/// The JSON of `cache flush` from its words and options.
fn flush_body(l: &Line, rest: &[&str]) -> Result<Value, Fail> {
    let wrong = || {
        usage(
            "usage: skuactl cache flush NAME [--subtree] [--type T] | cache flush --negative \
             | cache flush --all",
        )
    };
    match (rest, l.negative, l.all) {
        ([name], false, false) => {
            if l.subtree && l.rtype.is_some() {
                return Err(usage(
                    "--subtree or --type, not both (a subtree goes with every type)",
                ));
            }
            let mut b = json!({ "name": name });
            if l.subtree {
                b["subtree"] = json!(true);
            }
            if let Some(t) = &l.rtype {
                b["type"] = json!(t);
            }
            Ok(b)
        }
        ([], true, false) if !l.subtree && l.rtype.is_none() => Ok(json!({"negative": true})),
        ([], false, true) if !l.subtree && l.rtype.is_none() => Ok(json!({"all": true})),
        _ => Err(wrong()),
    }
}

/// GET `path`; the JSON pretty with `--json`, else `text` of it.
fn show(c: &Client, l: &Line, path: &str, text: fn(&Value) -> String) -> Result<String, Fail> {
    let v = c.get(path)?.json(&c.url(path))?;
    Ok(if l.json { pretty(&v) } else { text(&v) })
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    s.push('\n');
    s
}

/// A write's or reload's result (`Applied`); its warnings go to standard error.
fn applied(l: &Line, v: &Value, done: &str) -> String {
    if l.json {
        return pretty(v);
    }
    for w in v["warnings"].as_array().into_iter().flatten() {
        eprintln!("skuactl: warning: {}", w.as_str().unwrap_or_default());
    }
    format!(
        "{done}: generation {} serving {} records ({:.1} ms)\n",
        num(&v["generation"]),
        num(&v["records"]),
        v["elapsed_ms"].as_f64().unwrap_or(0.0)
    )
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// `3d 04h05m06s`, `5m06s`, `6s`.
fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m{s:02}s"),
        _ => format!("{d}d {h:02}h{m:02}m{s:02}s"),
    }
}

/// Seconds since the UNIX epoch as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian).
fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn dataplane(v: &Value) -> String {
    match v["reason"].as_str() {
        Some(r) => format!("{} ({r})", text(&v["state"])),
        None => text(&v["state"]).to_string(),
    }
}

/// `key value, key value` of an object of counters; `-` when empty.
fn counts(v: &Value) -> String {
    let items: Vec<String> = v
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, n)| format!("{k} {}", num(n)))
        .collect();
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

fn ok_failed(v: &Value) -> String {
    format!("{} ok, {} failed", num(&v["ok"]), num(&v["failed"]))
}

fn status_text(v: &Value) -> String {
    let rows = [
        ("version", format!("skuad {}", text(&v["version"]))),
        ("uptime", duration(num(&v["uptime_seconds"]))),
        ("dataplane", dataplane(&v["dataplane"])),
        ("config", text(&v["config"]).to_string()),
        (
            "generation",
            format!(
                "{} (loaded {}, compiled in {:.1} ms)",
                num(&v["generation"]),
                utc(num(&v["loaded_at"])),
                v["compile_ms"].as_f64().unwrap_or(0.0)
            ),
        ),
        (
            "data",
            format!(
                "{} records, {} names, {} zones",
                num(&v["records"]),
                num(&v["names"]),
                num(&v["zones"])
            ),
        ),
        ("warnings", num(&v["warnings"]).to_string()),
        ("reloads", ok_failed(&v["reloads"])),
        ("api writes", ok_failed(&v["writes"])),
    ];
    let mut out: String = rows.iter().map(|(k, v)| format!("{k:<12}{v}\n")).collect();
    if let Some(line) = sync_line(&v["sync"]) {
        out += &format!("{:<12}{line}\n", "sync");
    }
    out
}

/// The `sync` row of `skuactl status`: whom this node follows, the version it offers, the
/// counters and the last error (docs/ha.md, "Configuration and API data").
fn sync_line(s: &Value) -> Option<String> {
    let digest = s["digest"].as_str()?;
    let short = digest.get(..12).unwrap_or(digest);
    let mut line = match s["following"].as_str() {
        Some(f) => format!("following {f}, version {short}"),
        None => format!("version {short}"),
    };
    if let Some(a) = s["last_applied"].as_object() {
        line += &format!(
            ", last taken {} ago",
            duration(a.get("age_s").and_then(Value::as_u64).unwrap_or(0))
        );
    }
    line += &format!(
        "; {} taken, {} failed, {} sent",
        num(&s["applied"]),
        num(&s["failed"]),
        num(&s["served"])
    );
    if let Some(e) = s["last_error"].as_str() {
        line += &format!("; last error: {e}");
    }
    Some(line)
}

fn stats_text(v: &Value) -> String {
    let s = &v["socket"];
    let mut o = format!(
        "{:<12}{} (generation {})\n",
        "uptime",
        duration(num(&v["uptime_seconds"])),
        num(&v["generation"])
    );
    o += &format!(
        "{:<12}{} queries, {} replies, {} hot path, {} truncated\n",
        "sockets",
        num(&s["queries"]),
        num(&s["replies"]),
        num(&s["hot"]),
        num(&s["truncated"])
    );
    o += &format!("{:<12}{}\n", "  rcode", counts(&s["rcode"]));
    o += &format!("{:<12}{}\n", "  qtype", counts(&s["qtype"]));
    o += &format!("{:<12}{}\n", "  dropped", counts(&s["dropped"]));
    let queues = v["xdp"]["queues"].as_array().cloned().unwrap_or_default();
    if queues.is_empty() {
        o += &format!("{:<12}-\n", "xdp");
    } else {
        let mut rows = vec![
            [
                "INTERFACE",
                "QUEUE",
                "RX",
                "ANSWERED",
                "HOT",
                "SLOW",
                "NOT-DNS",
                "TX-FULL",
                "DROPPED",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for q in &queues {
            let dropped: u64 = q["dropped"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, n)| num(n))
                .sum();
            rows.push(vec![
                text(&q["interface"]).to_string(),
                num(&q["queue"]).to_string(),
                num(&q["rx"]).to_string(),
                num(&q["answered"]).to_string(),
                num(&q["hot"]).to_string(),
                num(&q["slow_path"]).to_string(),
                num(&q["not_dns"]).to_string(),
                num(&q["tx_ring_full"]).to_string(),
                dropped.to_string(),
            ]);
        }
        o += "xdp queues\n";
        o += &table(&rows);
        for p in v["xdp"]["programs"].as_array().into_iter().flatten() {
            o += &format!(
                "xdp program {}: {}\n",
                text(&p["interface"]),
                counts(&p["counters"])
            );
        }
    }
    let r = &v["resolver"];
    if r.is_object() {
        let (c, f) = (&r["cache"], &r["forwarder"]);
        o += &format!(
            "{:<12}{} hits, {} misses, {} stale, {} prefetches, {} evictions; {} answers ({} bytes), {} RRsets ({} bytes)\n",
            "cache",
            num(&c["hits"]),
            num(&c["misses"]),
            num(&c["stale"]),
            num(&c["prefetches"]),
            num(&c["evictions"]),
            num(&c["messages"]),
            num(&c["message_bytes"]),
            num(&c["rrsets"]),
            num(&c["rrset_bytes"])
        );
        o += &format!(
            "{:<12}{} queries sent, {} unwanted replies, {} SERVFAIL, {} in flight\n",
            "forwarder",
            num(&f["queries"]),
            num(&f["unwanted"]),
            num(&f["servfail"]),
            num(&f["in_flight"])
        );
    }
    o += &format!("{:<12}{}\n", "reloads", ok_failed(&v["reloads"]));
    o += &format!("{:<12}{}\n", "api writes", ok_failed(&v["api_writes"]));
    o
}

fn zones_text(v: &Value) -> String {
    let zones = v["zones"].as_array().cloned().unwrap_or_default();
    if zones.is_empty() {
        return "no local zones\n".into();
    }
    let mut rows = vec![
        ["NAME", "TYPE", "SOURCE", "DEFINED AT"]
            .map(String::from)
            .to_vec(),
    ];
    for z in &zones {
        rows.push(
            ["name", "type", "source", "at"]
                .map(|k| text(&z[k]).to_string())
                .to_vec(),
        );
    }
    table(&rows)
}

fn records_text(v: &Value) -> String {
    let recs = v["records"].as_array().cloned().unwrap_or_default();
    if recs.is_empty() {
        return "no records\n".into();
    }
    let mut rows = vec![
        ["SOURCE", "DEFINED AT", "RECORD"]
            .map(String::from)
            .to_vec(),
    ];
    for r in &recs {
        rows.push(
            ["source", "at", "rr"]
                .map(|k| text(&r[k]).to_string())
                .to_vec(),
        );
    }
    table(&rows)
}

/// `cache lookup`: the answers, then the RRsets, each with its records.
fn lookup_text(v: &Value) -> String {
    let name = text(&v["name"]);
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    let sets = v["rrsets"].as_array().cloned().unwrap_or_default();
    if msgs.is_empty() && sets.is_empty() {
        return format!("{name}: not in the cache\n");
    }
    let mut o = String::new();
    for m in &msgs {
        let left = if m["stale"].as_bool() == Some(true) {
            "stale".to_string()
        } else {
            format!("{} s left", num(&m["ttl"]))
        };
        let ede = m["ede"]
            .as_u64()
            .map_or(String::new(), |e| format!(", EDE {e}"));
        o += &format!(
            "answer {name} {} {}: {} {}, {left}{ede}\n",
            text(&m["class"]),
            text(&m["type"]),
            text(&m["rcode"]),
            text(&m["kind"])
        );
        for sec in ["answer", "authority", "additional"] {
            for r in m[sec].as_array().into_iter().flatten() {
                o += &format!("  {sec:<11}{}\n", text(r));
            }
        }
    }
    for s in &sets {
        o += &format!(
            "rrset {name} {} {}: {}, {} s left\n",
            text(&s["class"]),
            text(&s["type"]),
            text(&s["rank"]),
            num(&s["ttl"])
        );
        for r in s["records"].as_array().into_iter().flatten() {
            o += &format!("  {}\n", text(r));
        }
    }
    o
}

/// `ha status`: skuad's leases, then the host agent's instances and checks (its `/status`
/// at `--agent URL`, default http://127.0.0.1:9853; an agent that does not answer is
/// reported, not an error: skuad may run without one).
fn ha_status(c: &Client, l: &Line) -> Result<String, Fail> {
    let leases = c.get("/ha")?.json(&c.url("/ha"))?;
    let base = l.agent.clone().unwrap_or_else(|| DEFAULT_AGENT.to_string());
    let agent = Client::new(&base, None, None, std::time::Duration::from_secs(3))
        .map_err(|e| usage(format!("--agent: {e}")))?;
    let st = agent
        .get("/status")
        .and_then(|r| r.json(&agent.url("/status")));
    if l.json {
        let a = st.as_ref().map_or(Value::Null, Clone::clone);
        return Ok(pretty(&json!({"skuad": leases, "agent": a})));
    }
    let mut o = leases_text(&leases);
    match st {
        Ok(v) => o += &agent_text(&v),
        Err(e) => o += &format!("agent at {base}: {e}\n"),
    }
    Ok(o)
}

fn leases_text(v: &Value) -> String {
    let list = v["addresses"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return "skuad: no ha: address (no address is served under a lease)\n".into();
    }
    let mut rows = vec![
        ["ADDRESS", "SERVING", "LEFT", "UNLEASED QUERIES"]
            .map(String::from)
            .to_vec(),
    ];
    for a in &list {
        rows.push(vec![
            text(&a["address"]).to_string(),
            if a["serving"] == true { "yes" } else { "no" }.to_string(),
            format!("{} ms", num(&a["remaining_ms"])),
            num(&a["unleased_queries"]).to_string(),
        ]);
    }
    format!(
        "skuad leases (max {} ms): taken {}, renewed {}, released {}, expired {}\n{}",
        num(&v["lease_max_ms"]),
        num(&v["taken"]),
        num(&v["renewed"]),
        num(&v["released"]),
        num(&v["expired"]),
        table(&rows)
    )
}

fn agent_text(v: &Value) -> String {
    let mut rows = vec![
        [
            "INSTANCE",
            "IF",
            "VRID",
            "STATE",
            "PRIO",
            "LEASE",
            "PEER",
            "ADVERTS S/R/D",
            "TRANSITIONS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for i in v["instances"].as_array().into_iter().flatten() {
        let peer = match i["peer"].as_array() {
            Some(p) if p.len() == 2 => format!("{} ({})", text(&p[0]), num(&p[1])),
            _ => "-".into(),
        };
        let lease = match i["lease_age_ms"].as_u64() {
            Some(ms) => format!("{} ({ms} ms ago)", text(&i["lease"])),
            None => text(&i["lease"]).to_string(),
        };
        rows.push(vec![
            text(&i["name"]).to_string(),
            text(&i["interface"]).to_string(),
            num(&i["vrid"]).to_string(),
            text(&i["state"]).to_string(),
            num(&i["priority"]).to_string(),
            lease,
            peer,
            format!(
                "{}/{}/{}",
                num(&i["adverts_sent"]),
                num(&i["adverts_received"]),
                num(&i["adverts_dropped"])
            ),
            num(&i["transitions"]).to_string(),
        ]);
    }
    let mut o = format!("agent:\n{}", table(&rows));
    let checks = v["checks"].as_array().cloned().unwrap_or_default();
    if !checks.is_empty() {
        let mut rows = vec![
            ["CHECK", "KIND", "OK", "WEIGHT", "LAST", "ERROR"]
                .map(String::from)
                .to_vec(),
        ];
        for c in &checks {
            rows.push(vec![
                text(&c["name"]).to_string(),
                text(&c["kind"]).to_string(),
                if c["ok"] == true { "yes" } else { "NO" }.to_string(),
                c["weight"].as_i64().unwrap_or(0).to_string(),
                c["last_ms"]
                    .as_f64()
                    .map_or("-".into(), |m| format!("{m:.1} ms")),
                c["last_error"].as_str().unwrap_or("").to_string(),
            ]);
        }
        o += &table(&rows);
    }
    o
}

/// `upstreams`: one row per zone and upstream, then the forwarder's counters.
/// `GET /tls` as lines: the certificate in force; with ACME, the next attempt and why
/// (the renewal information window when the server gave one) and the last error.
fn tls_text(v: &Value) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let when = |t: &Value| match t.as_i64() {
        Some(t) if t >= now => format!("in {}", human_secs((t - now) as u64)),
        Some(t) => format!("{} ago", human_secs((now - t) as u64)),
        None => "-".into(),
    };
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|n| {
                n.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = String::new();
    let c = &v["certificate"];
    if c.is_object() {
        out += &format!("{:<12}{}\n", "certificate", strs(&c["names"]).join(", "));
        out += &format!(
            "{:<12}{} ({} days left)\n",
            "valid until",
            when(&c["not_after"]),
            c["days_left"].as_i64().unwrap_or(0)
        );
        out += &format!("{:<12}{}\n", "serial", c["serial"].as_str().unwrap_or("-"));
        out += &format!("{:<12}{}\n", "file", c["file"].as_str().unwrap_or("-"));
    } else {
        out += &format!("{:<12}none in force\n", "certificate");
    }
    let a = &v["acme"];
    if a.is_null() {
        out += "acme        not configured (the certificate is the operator's to renew)\n";
        return out;
    }
    let names = strs(&a["names"]);
    out += &format!(
        "{:<12}{}\n",
        "names",
        if names.is_empty() {
            "(no certificate yet)".to_string()
        } else {
            names.join(", ")
        }
    );
    out += &format!("{:<12}{}\n", "expires", when(&a["not_after"]));
    out += &format!(
        "{:<12}{} ({})\n",
        "next",
        when(&a["next_attempt"]),
        a["next_reason"].as_str().unwrap_or("")
    );
    if a["window_start"].is_i64() || a["window_start"].is_u64() {
        out += &format!(
            "{:<12}{} .. {} (renewal information; asked again {})\n",
            "window",
            when(&a["window_start"]),
            when(&a["window_end"]),
            when(&a["renewal_info_next"])
        );
    }
    if let Some(p) = a["profile"].as_str() {
        out += &format!("{:<12}{p}\n", "profile");
    }
    out += &format!(
        "{:<12}{} issued, {} failed since start; last issued {}\n",
        "acme",
        num(&a["issued"]),
        num(&a["failures"]),
        when(&a["last_issued"])
    );
    if let Some(e) = a["last_error"].as_str() {
        out += &format!("{:<12}{e}\n", "last error");
    }
    out
}

/// `d h m s` for a count of seconds (the two largest units).
fn human_secs(s: u64) -> String {
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s} s"),
        (0, 0, m) => format!("{m} min {} s", s % 60),
        (0, h, m) => format!("{h} h {m} min"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

fn upstreams_text(v: &Value) -> String {
    let ups = v["upstreams"].as_array().cloned().unwrap_or_default();
    let mut o = String::new();
    if ups.is_empty() {
        o += "no upstreams\n";
    } else {
        let mut rows = vec![
            [
                "ZONE",
                "UPSTREAM",
                "TRANSPORT",
                "STATE",
                "SRTT",
                "RTO",
                "REPLIES",
                "TIMEOUTS",
                "ERRORS",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for u in &ups {
            let mut addr = match u["tls_name"].as_str() {
                Some(n) if !n.is_empty() => format!("{}#{n}", text(&u["address"])),
                _ => text(&u["address"]).to_string(),
            };
            // Resolved from a forward-host:/stub-host: name.
            if let Some(h) = u["host"].as_str() {
                addr = format!("{addr} ({h})");
            }
            let zone = match text(&u["kind"]) {
                "stub" => format!("{} (stub)", text(&u["zone"])),
                _ => text(&u["zone"]).to_string(),
            };
            rows.push(vec![
                zone,
                addr,
                text(&u["transport"]).to_string(),
                text(&u["state"]).to_string(),
                u["srtt_ms"]
                    .as_u64()
                    .map_or("-".into(), |n| format!("{n} ms")),
                format!("{} ms", num(&u["rto_ms"])),
                num(&u["replies"]).to_string(),
                num(&u["timeouts"]).to_string(),
                num(&u["errors"]).to_string(),
            ]);
        }
        o += &table(&rows);
    }
    let f = &v["forwarder"];
    o += &format!(
        "forwarder: {} queries sent, {} unwanted replies, {} SERVFAIL, {} TCP retries, {} coalesced, {} in flight\n",
        num(&f["queries"]),
        num(&f["unwanted"]),
        num(&f["servfail"]),
        num(&f["tcp_retries"]),
        num(&f["coalesced"]),
        num(&f["in_flight"])
    );
    o
}

/// Audit entries, one a line: `SEQ TS ACTOR[@SOURCE] KIND DETAIL`. The entries are the
/// array `entries` (or the first array in the object, or the response if it is one).
fn audit_text(v: &Value) -> String {
    let entries = v
        .as_array()
        .or_else(|| v["entries"].as_array())
        .or_else(|| v.as_object()?.values().find_map(Value::as_array));
    let Some(entries) = entries else {
        return pretty(v);
    };
    if entries.is_empty() {
        return "no audit entries\n".into();
    }
    let mut o = String::new();
    for e in entries {
        if !e.is_object() {
            o += &format!("{e}\n");
            continue;
        }
        let who = match e["source"].as_str() {
            Some(s) => format!("{}@{s}", text(&e["actor"])),
            None => text(&e["actor"]).to_string(),
        };
        let seq = e["seq"].as_u64().map_or("-".into(), |n| n.to_string());
        let detail = match &e["detail"] {
            Value::Null => String::new(),
            d => format!(" {d}"),
        };
        o += &format!(
            "{seq} {} {who} {}{detail}\n",
            text(&e["ts"]),
            text(&e["kind"])
        );
    }
    o
}

/// Columns padded to their widest cell, two spaces apart; the last one is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut o = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line += cell;
            } else {
                line += &format!("{cell:<w$}  ", w = widths[c]);
            }
        }
        o += line.trim_end();
        o.push('\n');
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_sync_only_when_the_daemon_reports_it() {
        let base = serde_json::json!({"version": "0.1.0", "generation": 3});
        assert!(!status_text(&base).contains("sync"));
        let mut v = base.clone();
        v["sync"] = serde_json::json!({
            "digest": "0123456789abcdef0123", "following": "http://198.18.0.1:8053",
            "applied": 4, "failed": 1, "served": 0,
            "last_applied": {"digest": "x", "from": "y", "age_s": 65},
            "last_error": "http://198.18.0.1:8053: connect: refused",
        });
        let t = status_text(&v);
        assert!(
            t.contains(
                "sync        following http://198.18.0.1:8053, version 0123456789ab, last taken 1m05s ago; 4 taken, 1 failed, 0 sent; last error: http://198.18.0.1:8053: connect: refused\n"
            ),
            "{t}"
        );
    }

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn which_commands_are_api_commands() {
        for yes in [
            "status",
            "--json stats",
            "--api http://x:1 zone list",
            "--api=http://x:1 --token-file f record add a. A 1.2.3.4",
            "audit tail -n 3",
            "--json audit tail",
            "cache flush",
            "--all cache flush",
            "--type AAAA cache flush x.",
            "upstreams",
        ] {
            assert!(is_api_command(&args(yes)), "{yes}");
        }
        for no in [
            "",
            "audit verify f",
            "audit",
            "upgrade f",
            "health",
            "--json",
            "--api",
            "--version",
        ] {
            assert!(!is_api_command(&args(no)), "{no}");
        }
    }

    #[test]
    fn options_anywhere() {
        let l = parse(&args(
            "zone --json add --api=http://h:1 example.org. static --token-file /t",
        ))
        .unwrap();
        assert_eq!(
            l,
            Line {
                api: Some("http://h:1".into()),
                token_file: Some("/t".into()),
                json: true,
                words: args("zone add example.org. static"),
                ..Line::default()
            }
        );
        let l = parse(&args("audit tail -n 20")).unwrap();
        assert_eq!(l.n.as_deref(), Some("20"));
        for bad in [
            "status --token abc",
            "status --token=abc",
            "status -x",
            "status --api",
        ] {
            assert!(matches!(parse(&args(bad)), Err(Fail::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn cache_flush_bodies() {
        let body = |s: &str| {
            let l = parse(&args(s)).unwrap();
            let w: Vec<&str> = l.words.iter().map(String::as_str).collect();
            flush_body(&l, &w[2..])
        };
        assert_eq!(
            body("cache flush www.example.net.").unwrap(),
            json!({"name": "www.example.net."})
        );
        assert_eq!(
            body("cache flush --subtree example.net.").unwrap(),
            json!({"name": "example.net.", "subtree": true})
        );
        assert_eq!(
            body("cache flush x. --type=AAAA").unwrap(),
            json!({"name": "x.", "type": "AAAA"})
        );
        assert_eq!(
            body("cache flush --negative").unwrap(),
            json!({"negative": true})
        );
        assert_eq!(body("--all cache flush").unwrap(), json!({"all": true}));
        for bad in [
            "cache flush",
            "cache flush a. b.",
            "cache flush --all x.",
            "cache flush --all --negative",
            "cache flush --negative --subtree",
            "cache flush x. --subtree --type A",
        ] {
            assert!(matches!(body(bad), Err(Fail::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn cache_and_upstream_texts() {
        let v = json!({"name": "www.example.net.", "messages": [
            {"type": "A", "class": "IN", "rcode": "NOERROR", "kind": "positive", "ttl": 295,
             "stale": false, "ede": null, "answer": ["www.example.net. 295 IN A 198.18.5.1"],
             "authority": [], "additional": []}],
            "rrsets": [{"type": "A", "class": "IN", "rank": "answer-nonauth", "ttl": 295,
                        "records": ["www.example.net. 295 IN A 198.18.5.1"]}]});
        assert_eq!(
            lookup_text(&v),
            "answer www.example.net. IN A: NOERROR positive, 295 s left\n  \
             answer     www.example.net. 295 IN A 198.18.5.1\n\
             rrset www.example.net. IN A: answer-nonauth, 295 s left\n  \
             www.example.net. 295 IN A 198.18.5.1\n"
        );
        assert_eq!(
            lookup_text(&json!({"name": "x.", "messages": [], "rrsets": []})),
            "x.: not in the cache\n"
        );
        let v = json!({"forwarder": {"queries": 3, "unwanted": 0, "servfail": 1,
            "tcp_retries": 0, "coalesced": 0, "defences": 0, "in_flight": 0},
            "upstreams": [{"zone": ".", "kind": "forward", "address": "127.0.0.1:5301",
            "transport": "udp", "tls_name": null, "state": "up", "srtt_ms": 3, "rto_ms": 50,
            "replies": 2, "timeouts": 1, "errors": 0}]});
        assert_eq!(
            upstreams_text(&v),
            "ZONE  UPSTREAM        TRANSPORT  STATE  SRTT  RTO    REPLIES  TIMEOUTS  ERRORS\n\
             .     127.0.0.1:5301  udp        up     3 ms  50 ms  2        1         0\n\
             forwarder: 3 queries sent, 0 unwanted replies, 1 SERVFAIL, 0 TCP retries, 0 coalesced, 0 in flight\n"
        );
    }

    #[test]
    fn tokens() {
        assert_eq!(check_token("abc-123\n").unwrap(), "abc-123");
        assert!(check_token(" \n").is_err());
        assert!(check_token("two words").is_err());
        assert!(check_token("line1\nline2").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(duration(6), "6s");
        assert_eq!(duration(366), "6m06s");
        assert_eq!(duration(3 * 86400 + 4 * 3600 + 5 * 60 + 6), "3d 04h05m06s");
        assert_eq!(duration(3600), "1h00m00s");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_777_636_800 + 3723), "2026-05-01 13:02:03 UTC");
        assert_eq!(
            table(&[args("A BB C"), args("ccc d eeeeee")]),
            "A    BB  C\nccc  d   eeeeee\n"
        );
        assert_eq!(counts(&json!({"A": 3, "AAAA": 1})), "A 3, AAAA 1");
        assert_eq!(counts(&json!({})), "-");
    }

    #[test]
    fn audit_entries() {
        let v = json!({"entries": [
            {"seq": 7, "ts": "2026-05-01T12:00:00.123Z", "kind": "api-write", "actor": "ops",
             "source": "127.0.0.1", "detail": {"zone": "x."}, "key_id": "k", "prev": "0", "mac": "0"},
            {"seq": 8, "ts": "2026-05-01T12:00:01.000Z", "kind": "reload", "actor": "system",
             "source": null, "detail": {}}
        ]});
        assert_eq!(
            audit_text(&v),
            "7 2026-05-01T12:00:00.123Z ops@127.0.0.1 api-write {\"zone\":\"x.\"}\n\
             8 2026-05-01T12:00:01.000Z system reload {}\n"
        );
        assert_eq!(audit_text(&json!({"entries": []})), "no audit entries\n");
    }

    #[test]
    fn tls_status_text() {
        assert!(
            tls_text(&serde_json::json!({"certificate": null, "acme": null}))
                .contains("not configured")
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        // A certificate without ACME: what is in force, and where it comes from.
        let plain = serde_json::json!({"certificate": {
            "file": "/etc/skua/tls/cert.pem", "names": ["dns.example.net"],
            "serial": "0a1b", "issuer": "CN=Example CA", "not_before": now - 86_400,
            "not_after": now + 10 * 86_400 + 30, "days_left": 10,
        }, "acme": null});
        let t = tls_text(&plain);
        assert!(t.contains("certificate dns.example.net\n"), "{t}");
        assert!(
            t.contains("valid until in 10 d 0 h (10 days left)\n"),
            "{t}"
        );
        assert!(t.contains("serial      0a1b\n"), "{t}");
        assert!(t.contains("file        /etc/skua/tls/cert.pem\n"), "{t}");
        assert!(t.contains("not configured"), "{t}");
        let v = serde_json::json!({"certificate": null, "acme": {
            "names": ["dns.example.net", "doh.example.net"],
            "not_before": now - 86_400, "not_after": now + 60 * 86_400 + 30,
            "next_attempt": now + 3_600 + 30, "next_reason": "retry after a failure",
            "window_start": null, "window_end": null, "renewal_info_next": null,
            "profile": null, "last_replaced": null,
            "issued": 1, "failures": 2, "failures_by_reason": {"other": 2},
            "last_error": "validation: timeout", "last_error_reason": "other",
            "last_issued": now - 86_400,
        }});
        let t = tls_text(&v);
        assert!(t.contains("certificate none in force\n"), "{t}");
        assert!(!t.contains("window"), "{t}");
        assert!(
            t.contains("names       dns.example.net, doh.example.net\n"),
            "{t}"
        );
        assert!(t.contains("expires     in 60 d 0 h\n"), "{t}");
        assert!(
            t.contains("next        in 1 h 0 min (retry after a failure)\n"),
            "{t}"
        );
        assert!(
            t.contains("acme        1 issued, 2 failed since start; last issued 1 d 0 h ago\n"),
            "{t}"
        );
        assert!(t.contains("last error  validation: timeout\n"), "{t}");
        // The schedule from the ACME server's renewal information: the window shown.
        let mut ari = v.clone();
        ari["acme"]["next_reason"] = "renewal information".into();
        ari["acme"]["window_start"] = (now + 86_400 + 30).into();
        ari["acme"]["window_end"] = (now + 2 * 86_400 + 30).into();
        ari["acme"]["renewal_info_next"] = (now + 6 * 3600 + 30).into();
        ari["acme"]["profile"] = "shortlived".into();
        let t = tls_text(&ari);
        assert!(
            t.contains("window      in 1 d 0 h .. in 2 d 0 h (renewal information; asked again in 6 h 0 min)\n"),
            "{t}"
        );
        assert!(t.contains("profile     shortlived\n"), "{t}");
        let mut none = v.clone();
        none["acme"]["names"] = serde_json::json!([]);
        none["acme"]["last_error"] = serde_json::Value::Null;
        let t = tls_text(&none);
        assert!(
            t.contains("(no certificate yet)") && !t.contains("last error"),
            "{t}"
        );
    }
}
