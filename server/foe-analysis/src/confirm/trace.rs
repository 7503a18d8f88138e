//! The shipped binaries' exception traces: the driver's event words parsed, and their addresses mapped to lines
//! and columns of the analysed file with the binary's debug info (`addr2line`).

use crate::report::TraceEvent;
use crate::types::ExceptionKind;
use std::path::Path;

/// The name clang gives the analysed file in the debug info: the harness compiles it from standard input.
const SOURCE_NAME: &str = "<stdin>";

/// Most events one reply may carry (the driver keeps 256).
const MAX_EVENTS: usize = 256;

/// One trapped event as the driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent {
    /// The exceptions the instruction raised, as bits (invalid 1, divide-by-zero 2, overflow 4, underflow 8).
    pub kinds: u8,
    /// The instruction's address as the executable's debug info counts it; for an instruction in a shared
    /// library, the address of the call in the executable that led there (`None` when the unwinder found none).
    pub addr: Option<u64>,
    /// For an instruction in a shared library: the library symbol, or the library's file name.
    pub library: Option<String>,
}

/// Parses one event word: `KINDS@OFFSET`, or `KINDS@CALL@NAME` (CALL `-` when unknown).
fn parse_event(word: &str) -> Option<RawEvent> {
    let mut parts = word.splitn(3, '@');
    let kinds = u8::from_str_radix(parts.next()?, 16).ok()? & 0xf;
    let addr = parts.next()?;
    let library = parts.next().map(str::to_string);
    let addr = match addr {
        "-" if library.is_some() => None,
        a => Some(u64::from_str_radix(a, 16).ok()?),
    };
    (kinds != 0).then_some(RawEvent {
        kinds,
        addr,
        library,
    })
}

/// The words after `r FLAGS RESULT`: the events in order and how many more the driver dropped.
pub fn parse_events<'a>(
    words: impl Iterator<Item = &'a str>,
) -> Result<(Vec<RawEvent>, usize), String> {
    let mut events = Vec::new();
    let mut dropped = 0;
    for w in words {
        if let Some(n) = w.strip_prefix('+') {
            dropped = usize::from_str_radix(n, 16)
                .map_err(|_| format!("the shipped binary replied a bad count `{w}`"))?;
            continue;
        }
        if events.len() >= MAX_EVENTS {
            return Err("the shipped binary replied more events than it keeps".into());
        }
        events.push(parse_event(w).ok_or_else(|| format!("the shipped binary replied `{w}`"))?);
    }
    Ok((events, dropped))
}

/// The events of one run as trace events (one per kind, in [`ExceptionKind::ALL`] order, for an instruction that
/// raised several), placed by `exe`'s debug info: the innermost frame in the analysed file (an instruction
/// inlined from a helper of the file is at the helper's line; one from another file's inline function at the
/// call of it). Lines past `lines_in_file` belong to the harness's thunks and are not the file's. An event in a
/// shared library is placed at the call that led there and names the library symbol as its operation.
pub fn to_trace(
    loader: Option<&addr2line::Loader>,
    lines_in_file: u32,
    events: &[RawEvent],
) -> Vec<TraceEvent> {
    let mut out = Vec::new();
    for e in events {
        let at = e.addr.zip(loader);
        let (line, column) = at.and_then(|(a, l)| locate(l, a, lines_in_file)).unzip();
        let operation = match &e.library {
            Some(name) => format!("in {name}"),
            // An instruction of another file of the project: its function, file and line.
            None if line.is_none() => at.and_then(|(a, l)| elsewhere(l, a)).unwrap_or_default(),
            None => String::new(),
        };
        for (i, kind) in ExceptionKind::ALL.into_iter().enumerate() {
            if e.kinds >> i & 1 == 1 {
                out.push(TraceEvent {
                    kind,
                    line,
                    column: column.flatten(),
                    operation: operation.clone(),
                });
            }
        }
    }
    out
}

/// The line and column (0 when unknown) of the innermost frame at `addr` in the analysed file.
fn locate(loader: &addr2line::Loader, addr: u64, lines_in_file: u32) -> Option<(u32, Option<u32>)> {
    let mut frames = loader.find_frames(addr).ok()?;
    while let Ok(Some(frame)) = frames.next() {
        let Some(loc) = frame.location else { continue };
        if loc
            .file
            .is_some_and(|f| f == SOURCE_NAME || f.ends_with("/<stdin>"))
        {
            let line = loc.line.filter(|l| (1..=lines_in_file).contains(l))?;
            return Some((line, loc.column.filter(|c| *c > 0)));
        }
    }
    None
}

/// `in FUNCTION (FILE:LINE)` for an instruction outside the analysed file (a unit of the project linked into the
/// shipped binary): its innermost frame with a function name; with line tables only, a function not inlined
/// anywhere has no frame of its own, so the symbol table names it and the line table places it.
fn elsewhere(loader: &addr2line::Loader, addr: u64) -> Option<String> {
    let place = |loc: Option<addr2line::Location<'_>>| {
        loc.and_then(|loc| {
            let file = Path::new(loc.file?)
                .file_name()?
                .to_string_lossy()
                .into_owned();
            Some(match loc.line {
                Some(line) => format!(" ({file}:{line})"),
                None => format!(" ({file})"),
            })
        })
        .unwrap_or_default()
    };
    let mut frames = loader.find_frames(addr).ok()?;
    while let Ok(Some(frame)) = frames.next() {
        let Some(function) = frame.function.as_ref().and_then(|f| f.raw_name().ok()) else {
            continue;
        };
        return Some(format!("in {function}{}", place(frame.location)));
    }
    let function = loader.find_symbol(addr)?;
    Some(format!(
        "in {function}{}",
        place(loader.find_location(addr).ok().flatten())
    ))
}

/// The debug info of a shipped binary, or `None` (logged) when it cannot be read.
pub fn loader(exe: &Path) -> Option<addr2line::Loader> {
    addr2line::Loader::new(exe)
        .map_err(|e| tracing::warn!("cannot read the debug info of {}: {e}", exe.display()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_words_parse() {
        let (events, dropped) =
            parse_events("4@1394 c@13bc@exp 8@-@libm.so.6 +3".split(' ')).unwrap();
        assert_eq!(dropped, 3);
        assert_eq!(
            events,
            vec![
                RawEvent {
                    kinds: 4,
                    addr: Some(0x1394),
                    library: None
                },
                RawEvent {
                    kinds: 0xc,
                    addr: Some(0x13bc),
                    library: Some("exp".into())
                },
                RawEvent {
                    kinds: 8,
                    addr: None,
                    library: Some("libm.so.6".into())
                },
            ]
        );
        assert!(parse_events(["4@zz"].into_iter()).is_err());
        let t = to_trace(None, 10, &events[1..2]);
        let kinds: Vec<ExceptionKind> = t.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![ExceptionKind::Overflow, ExceptionKind::Underflow]
        );
        assert_eq!(t[0].operation, "in exp");
    }
}
