//! The quick fix that turns fast-math off for one function, as plain text edits (no LSP types).
//!
//! Measured with clang 19: `#pragma float_control(precise, on)` is accepted at the start of a compound
//! statement and restores plain semantics in that block; `precise` turns contraction back on, so
//! `#pragma clang fp contract(off)` follows it. push/pop only works at file scope, `optnone` unoptimises the
//! whole function, and GCC's `optimize("no-fast-math")` is ignored by clang, so the pragma pair is the fix.
//!
//! The exception-preserving pragmas clang documents for a block: under `-ffast-math` clang 19 accepts
//! `#pragma clang fp exceptions(strict)` alone and `#pragma float_control(except, on)` only after
//! `float_control(precise, on)` ("illegal when precise is disabled"); `STDC FENV_ACCESS ON` is rejected. Both turn
//! the block's operations into `llvm.experimental.constrained.*` calls, which foe's model does not read yet, so an
//! edit with them could not be re-analysed (the function would be skipped). Measured on turbine1's 20 confirmed
//! set differences (the shipped binaries re-run on their inputs): the precise pair leaves 17, precise + except
//! leaves 17 as well, and either with the fast-math build linked with `-mno-daz-ftz` leaves 0. What is left is
//! flush-to-zero/denormals-are-zero, which `crtfastmath.o` sets for the whole process when linking with
//! `-ffast-math`: no pragma reaches it; [`build_change`] names the link flag that does.

use crate::report::{Cause, Divergence, FunctionSpan};

/// The build change that removes a divergence of this cause, for causes no source edit can reach.
pub fn build_change(cause: Cause) -> Option<&'static str> {
    match cause {
        Cause::FlushToZero => Some(
            "link with -mno-daz-ftz (or without -ffast-math): flush-to-zero/denormals-are-zero is set for the whole \
             process at start-up, no source edit reaches it",
        ),
        _ => None,
    }
}

/// Whether the precise pragmas can remove a divergence of this cause (everything but what the link sets).
pub fn source_edit_reaches(cause: Cause) -> bool {
    build_change(cause).is_none()
}

/// What re-analysing a function after its fast-math-off edit says of the edit, which targets every divergence a
/// source edit can reach ([`source_edit_reaches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixVerdict {
    /// Everything the edit targets is gone; `build_only` divergences are left whose cause only a build change
    /// reaches ([`build_change`]).
    Verified { build_only: usize },
    /// `remaining` divergences the edit targets are still there (those of undetermined cause count: nothing says
    /// a build change would remove them).
    Remains { remaining: usize },
}

/// Judges the edit by the divergences left in the edited function.
pub fn judge(left: &[Divergence]) -> FixVerdict {
    let remaining = left.iter().filter(|d| source_edit_reaches(d.cause)).count();
    if remaining == 0 {
        FixVerdict::Verified {
            build_only: left.len(),
        }
    } else {
        FixVerdict::Remains { remaining }
    }
}

/// Inserts `text` before the byte at (line, column), both 1-based; column counts bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceEdit {
    pub line: u32,
    pub column: u32,
    pub text: String,
}

/// The pragmas that restore plain floating-point semantics in a block.
pub const PRECISE_PRAGMAS: [&str; 2] = [
    "#pragma float_control(precise, on)",
    "#pragma clang fp contract(off)",
];

/// The edit that puts [`PRECISE_PRAGMAS`] at the start of the function's body, or None when the body's
/// opening brace cannot be found from the debug info's lines.
pub fn fast_math_off_edit(text: &str, span: &FunctionSpan) -> Option<SourceEdit> {
    let lines: Vec<&str> = text.split('\n').collect();
    // The brace is on the scope line in clang's debug info; allow it to sit a few lines later (K&R styles).
    let first = span.line.min(span.body_line).max(1) as usize;
    for line_no in first..=(span.body_line as usize + 3).min(lines.len()) {
        let line = lines[line_no - 1];
        let Some(col) = line.find('{') else { continue };
        if line_no < span.body_line as usize && !line[col + 1..].trim().is_empty() {
            continue;
        }
        if lines
            .get(line_no)
            .is_some_and(|next| next.contains("float_control(precise, on)"))
        {
            return None; // already fixed
        }
        let indent: String = lines
            .get(line_no)
            .map(|next| next.chars().take_while(|c| c.is_whitespace()).collect())
            .filter(|s: &String| !s.is_empty())
            .unwrap_or_else(|| "  ".into());
        let rest_is_blank = line[col + 1..].trim().is_empty();
        let mut insert = String::new();
        for pragma in PRECISE_PRAGMAS {
            insert.push('\n');
            insert.push_str(&indent);
            insert.push_str(pragma);
        }
        if !rest_is_blank {
            insert.push('\n');
            insert.push_str(&indent);
        }
        return Some(SourceEdit {
            line: line_no as u32,
            column: col as u32 + 2,
            text: insert,
        });
    }
    None
}

/// Applies edits (given against the original text) to `text`.
pub fn apply_edits(text: &str, edits: &[SourceEdit]) -> String {
    let mut offsets: Vec<(usize, &str)> = edits
        .iter()
        .filter_map(|e| byte_offset(text, e.line, e.column).map(|o| (o, e.text.as_str())))
        .collect();
    offsets.sort_by_key(|o| std::cmp::Reverse(o.0));
    let mut out = text.to_string();
    for (offset, insert) in offsets {
        out.insert_str(offset, insert);
    }
    out
}

/// The byte offset of a 1-based (line, column).
pub fn byte_offset(text: &str, line: u32, column: u32) -> Option<usize> {
    let mut offset = 0;
    for (i, l) in text.split('\n').enumerate() {
        if i + 1 == line as usize {
            let col = (column.max(1) - 1) as usize;
            return (col <= l.len()).then_some(offset + col);
        }
        offset += l.len() + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_after_the_opening_brace() {
        let src = "double f(double x) {\n    return 2*x*0.5;\n}\n";
        let edit = fast_math_off_edit(
            src,
            &FunctionSpan {
                line: 1,
                body_line: 1,
                end_line: 2,
            },
        )
        .unwrap();
        let fixed = apply_edits(src, &[edit]);
        assert_eq!(
            fixed,
            "double f(double x) {\n    #pragma float_control(precise, on)\n    #pragma clang fp contract(off)\n    return 2*x*0.5;\n}\n"
        );
        assert!(fast_math_off_edit(
            &fixed,
            &FunctionSpan {
                line: 1,
                body_line: 1,
                end_line: 4
            }
        )
        .is_none());
    }

    #[test]
    fn splits_one_line_bodies() {
        let src = "double f(double x) { return x; }\n";
        let edit = fast_math_off_edit(
            src,
            &FunctionSpan {
                line: 1,
                body_line: 1,
                end_line: 1,
            },
        )
        .unwrap();
        let fixed = apply_edits(src, &[edit]);
        assert!(fixed.contains("{\n  #pragma float_control(precise, on)\n  #pragma clang fp contract(off)\n   return x; }"), "{fixed}");
    }
}
