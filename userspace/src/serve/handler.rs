//! The query handler as the configuration asks for it.

use crate::config::Config;
use crate::handler::Handler;

/// The handler `config` asks for; `running` is the one it replaces (its
/// cookie secret is kept when no secret file is configured).
pub fn handler_for(config: &Config, running: Option<&Handler>) -> Handler {
    Handler {
        edns: config.server_edns(running.map(|h| &h.edns)),
        identity: config.identity(),
    }
}
