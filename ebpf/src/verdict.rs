//! How the global functions (each verified on its own) report: 0, or a
//! [`PassReason`] plus one.

use xdpdns_common::PassReason;

/// The parser and the reply builder (and `edns::xdpdns_build_opt`) are
/// global BPF functions: the verifier checks each once, on its own,
/// instead of following every path of the parser through the reply
/// builder (the product would exceed its instruction budget), and each
/// gets its own stack frame. The parser and the reply builder return 0,
/// or a [`PassReason`] plus one.
#[inline(always)]
pub(crate) fn pass_code(code: u32) -> Result<(), PassReason> {
    match code {
        0 => Ok(()),
        c => Err(match c - 1 {
            0 => PassReason::NotDns,
            1 => PassReason::NotQuery,
            2 => PassReason::Miss,
            3 => PassReason::QueryType,
            4 => PassReason::Edns,
            5 => PassReason::Size,
            7 => PassReason::Source,
            8 => PassReason::Destination,
            _ => PassReason::ParseError,
        }),
    }
}

#[inline(always)]
pub(crate) fn code_of(r: Result<(), PassReason>) -> u32 {
    match r {
        Ok(()) => 0,
        Err(reason) => reason as u32 + 1,
    }
}
