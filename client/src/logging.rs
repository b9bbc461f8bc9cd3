//! Logging set-up shared by headroom's binaries (headroomd, headroom-shim): one filter variable,
//! one format flag, colours only on a terminal.
//!
//! - The filter is `RUST_LOG` (what the manifests and the chart set), then `HEADROOM_LOG` (the
//!   shim's older name, still honoured), then the binary's default.
//! - `--log-format json` writes one JSON object per line (what log collectors parse without a
//!   regex); `text` is the human format.
//! - ANSI colours only when stderr is a terminal and `NO_COLOR` is unset: escape codes in
//!   `kubectl logs` or a log pipeline are noise.
use std::io::IsTerminal as _;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("{other:?}: expected \"text\" or \"json\"")),
        }
    }
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Text => "text",
            Self::Json => "json",
        })
    }
}

/// The filter directives in force: `rust_log`, else `headroom_log`, else `default`. Empty
/// values count as unset.
pub fn filter_directives(rust_log: Option<String>, headroom_log: Option<String>, default: &str) -> String {
    rust_log
        .filter(|v| !v.trim().is_empty())
        .or(headroom_log.filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| default.to_string())
}

/// Installs the global subscriber (stderr). A second call does nothing.
pub fn init(format: LogFormat, default: &str) {
    let directives = filter_directives(
        std::env::var("RUST_LOG").ok(),
        std::env::var("HEADROOM_LOG").ok(),
        default,
    );
    let filter = tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|e| {
        eprintln!("ignoring log filter {directives:?} ({e}); using {default:?}");
        tracing_subscriber::EnvFilter::new(default)
    });
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_first_then_headroom_log_then_the_default() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(filter_directives(s("info"), s("debug"), "warn"), "info");
        assert_eq!(filter_directives(None, s("debug"), "warn"), "debug");
        assert_eq!(filter_directives(s(""), s("debug"), "warn"), "debug");
        assert_eq!(filter_directives(None, None, "warn"), "warn");
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert!("yaml".parse::<LogFormat>().is_err());
    }
}
