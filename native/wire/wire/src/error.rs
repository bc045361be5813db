//! One error type; every message is one line naming what failed and where.

use std::fmt;

#[derive(Debug)]
pub struct WireError {
    /// What the user should look at: a file, an interface, an option.
    pub where_: String,
    pub message: String,
    /// What the user gave is wrong (an option, its value, a file or name it gives), as
    /// opposed to a failure while running: the tools exit 2 for these, 1 otherwise.
    pub usage: bool,
}

impl WireError {
    pub fn new(where_: impl Into<String>, message: impl Into<String>) -> Self {
        WireError { where_: where_.into(), message: message.into(), usage: false }
    }

    /// A bad argument or value (exit status 2).
    pub fn usage(where_: impl Into<String>, message: impl Into<String>) -> Self {
        WireError { usage: true, ..WireError::new(where_, message) }
    }

    /// The exit status this error ends a tool with: 2 for bad usage, 1 for a failure.
    pub fn exit_code(&self) -> u8 {
        if self.usage {
            2
        } else {
            1
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.where_.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.where_, self.message)
        }
    }
}

impl std::error::Error for WireError {}

pub type Result<T> = std::result::Result<T, WireError>;

/// A command-line parser's error (clap's) as one line: its first paragraph (a list of
/// missing options is indented under it), without its "error: " and the usage after it.
pub fn one_line(text: &str) -> String {
    let para: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    para.join(" ").trim_start_matches("error: ").to_string()
}
