//! Running the programs the tasks are made of.

use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs `cmd` to completion; an error unless it exits 0.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{:?} failed: {status}", cmd);
    }
    Ok(())
}
