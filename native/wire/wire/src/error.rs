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
