//! One error type; every message is one line naming what failed and where.

use std::fmt;

#[derive(Debug)]
pub struct WireError {
    /// What the user should look at: a file, an interface, an option.
    pub where_: String,
    pub message: String,
}

impl WireError {
    pub fn new(where_: impl Into<String>, message: impl Into<String>) -> Self {
        WireError { where_: where_.into(), message: message.into() }
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
