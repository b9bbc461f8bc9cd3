//! `-o json|yaml|wide`, as kubectl has it, for every listing of headroomctl and kubectl-headroom.
//! JSON and YAML are the value itself through its serde impls (for headroomd's messages pbjson:
//! the proto3 JSON mapping, every field), never a map built here; the default and `wide` are
//! kubectl's table ([`crate::kubectl::table`]).

use clap::{Args, ValueEnum};
use serde::Serialize;

/// What `-o` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The response message, proto3 JSON mapping.
    Json,
    /// The same value as YAML.
    Yaml,
    /// The table with more columns.
    Wide,
}

/// `-o/--output` of a listing.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct Output {
    /// Output format: json, yaml or wide (default: a table).
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<Format>,
}

impl Output {
    /// Whether the table gets its wide columns.
    pub fn wide(self) -> bool {
        self.output == Some(Format::Wide)
    }

    /// `message` as JSON or YAML, `None` when a table is asked for.
    pub fn document<M: Serialize>(self, message: &M) -> anyhow::Result<Option<String>> {
        Ok(match self.output {
            Some(Format::Json) => Some(serde_json::to_string_pretty(message)?),
            Some(Format::Yaml) => Some(serde_yaml::to_string(message)?),
            Some(Format::Wide) | None => None,
        })
    }

    /// Prints `message` as asked, or the table `table(wide)`.
    pub fn print<M: Serialize>(self, message: &M, table: impl FnOnce(bool) -> String) -> anyhow::Result<()> {
        match self.document(message)? {
            Some(text) => println!("{}", text.trim_end()),
            None => println!("{}", table(self.wide())),
        }
        Ok(())
    }

    /// One message of a stream: JSON one object per line, YAML one document each.
    pub fn stream_item<M: Serialize>(self, message: &M) -> anyhow::Result<Option<String>> {
        Ok(match self.output {
            Some(Format::Json) => Some(serde_json::to_string(message)?),
            Some(Format::Yaml) => Some(format!("---\n{}", serde_yaml::to_string(message)?.trim_end())),
            Some(Format::Wide) | None => None,
        })
    }
}
