//! Where a DNS name lives in ZooKeeper: its labels reversed, one node
//! each (`authcache.emy-10.joyent.us` is `/us/joyent/emy-10/authcache`),
//! and the registry id a node's instance gets.

use sha2::{Digest, Sha256};

/// The node of `domain` (lower-case, no trailing dot).
pub fn domain_path(domain: &str) -> String {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let mut path = String::with_capacity(domain.len() + 1);
    for label in domain.rsplit('.') {
        path.push('/');
        path.push_str(label);
    }
    path
}

/// The domain of node `path`; `None` for the root.
pub fn path_domain(path: &str) -> Option<String> {
    let labels: Vec<&str> = path.split('/').filter(|l| !l.is_empty()).collect();
    if labels.is_empty() {
        return None;
    }
    let mut out: Vec<&str> = labels;
    out.reverse();
    Some(out.join(".").to_ascii_lowercase())
}

/// The parent of `path` (`/a/b` → `/a`); `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    let cut = path.rfind('/')?;
    (path.len() > 1).then(|| if cut == 0 { "/" } else { &path[..cut] })
}

/// The path of child `name` of `parent`.
pub fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// The last component of `path`.
pub fn leaf(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The registry id of the instance mirroring `path`: stable, unique (a
/// hash of the path; the same host label recurs under many domains) and
/// a DNS label like every id.
pub fn instance_id(path: &str) -> String {
    let digest = Sha256::digest(path.as_bytes());
    let hex: String = digest[..10].iter().map(|b| format!("{b:02x}")).collect();
    format!("zk-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_reversal_rule() {
        assert_eq!(
            domain_path("authcache.emy-10.joyent.us"),
            "/us/joyent/emy-10/authcache"
        );
        assert_eq!(
            path_domain("/us/joyent/emy-10/authcache/a2674d3b").as_deref(),
            Some("a2674d3b.authcache.emy-10.joyent.us")
        );
        assert_eq!(domain_path("Example.Joyent.US."), "/us/joyent/example");
        assert_eq!(path_domain("/"), None);
        assert_eq!(parent("/us/joyent"), Some("/us"));
        assert_eq!(parent("/us"), Some("/"));
        assert_eq!(parent("/"), None);
        assert_eq!(leaf("/us/joyent"), "joyent");
        assert_eq!(child_path("/", "us"), "/us");
        assert_eq!(child_path("/us", "joyent"), "/us/joyent");
    }

    #[test]
    fn ids_are_stable_labels() {
        let a = instance_id("/us/joyent/example/b44c74d6");
        assert_eq!(a, instance_id("/us/joyent/example/b44c74d6"));
        assert_ne!(a, instance_id("/us/joyent/other/b44c74d6"));
        assert!(a.len() <= 63 && a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    }
}
