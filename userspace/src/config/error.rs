//! What is wrong with a configuration file: it names the file, and the
//! key or line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Syntax, type or unknown-key errors; the message carries line,
    /// column and key from the TOML parser.
    #[error("{}: {message}", file.display())]
    Parse { file: PathBuf, message: String },
    #[error("{}: {key}: {message}", file.display())]
    Invalid {
        file: PathBuf,
        key: String,
        message: String,
    },
}
