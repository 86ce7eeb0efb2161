//! Where the kernel objects live across restarts: the program, its maps
//! and its links pinned in one directory of a bpf filesystem
//! (`[xdp] pin_dir`). While they are pinned the program stays attached
//! and keeps answering from its table with no process running, and a
//! restarted controller adopts them instead of loading and filling new
//! ones (see `FastPath::adopt`). Removing the directory's entries
//! detaches the program and frees the maps.
//!
//! Layout: `program`, `map_<NAME>` per map the controller uses, and
//! `link_<interface>_<mode>` per attachment (mode `driver` or `generic`).

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PinDirError {
    #[error("[xdp] pin_dir {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("[xdp] pin_dir {}: not on a bpf filesystem (mount one: `mount -t bpf bpf {}`)", path.display(), path.display())]
    NotBpffs { path: PathBuf },
}

#[derive(Clone, Debug)]
pub struct PinDir {
    dir: PathBuf,
}

impl PinDir {
    /// Creates `dir` if needed; it must be on a bpf filesystem.
    pub fn open(dir: &Path) -> Result<PinDir, PinDirError> {
        let io = |source| PinDirError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        if !super::sys::is_bpffs(dir).map_err(io)? {
            return Err(PinDirError::NotBpffs {
                path: dir.to_path_buf(),
            });
        }
        Ok(PinDir {
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn program(&self) -> PathBuf {
        self.dir.join("program")
    }

    pub fn map(&self, name: &str) -> PathBuf {
        self.dir.join(format!("map_{name}"))
    }

    pub fn link(&self, interface: &str, mode: &str) -> PathBuf {
        self.dir.join(format!("link_{interface}_{mode}"))
    }

    /// The pinned links: (interface, mode, path).
    pub fn links(&self) -> Vec<(String, String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let rest = name.strip_prefix("link_")?;
                let (interface, mode) = rest.rsplit_once('_')?;
                Some((interface.to_string(), mode.to_string(), e.path()))
            })
            .collect()
    }

    /// Unpins everything: links go (the program is detached), then the
    /// program and maps are freed once nothing else holds them.
    pub fn clear(&self) -> io::Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&self.dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        // Links first: the interfaces stop running the program before
        // its maps lose their names.
        entries.sort_by_key(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("link_"))
        });
        for p in entries {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
