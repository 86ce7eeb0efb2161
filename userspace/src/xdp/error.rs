//! What can go wrong talking to the kernel.

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error("loading the XDP object: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("XDP program: {0}")]
    Program(#[from] aya::programs::ProgramError),
    #[error("BPF map: {0}")]
    Map(#[from] aya::maps::MapError),
    #[error("attaching to {interface} in {mode} mode: {source}")]
    Attach {
        interface: String,
        mode: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("waiting for a grace period: {0}")]
    Grace(#[source] std::io::Error),
    #[error("counting CPUs: {0}")]
    Cpus(#[source] std::io::Error),
    #[error("the object lacks map {0}")]
    MissingMap(&'static str),
    #[error("running a frame through the program: {0}")]
    TestRun(#[source] std::io::Error),
    #[error("pinning {}: {source}", path.display())]
    Pin {
        path: std::path::PathBuf,
        #[source]
        source: aya::pin::PinError,
    },
    #[error("pinned program: {0}")]
    Link(#[from] aya::programs::links::LinkError),
    #[error("{0}")]
    PinDir(#[from] super::pins::PinDirError),
    #[error("the pinned objects cannot be adopted: {0}")]
    NotAdoptable(String),
    #[error("unpinning: {0}")]
    Unpin(#[source] std::io::Error),
    #[error("the kernel table's contents are not known: a whole table must be installed")]
    TableUnknown,
    #[error("writing an overlay generation: {0}")]
    Overlay(String),
    #[error("writing the tiny-name slot table: {0}")]
    Slots(String),
}
