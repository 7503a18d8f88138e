//! Hover text (short markdown without tables, readable as plain text in Neovim 0.7) and the full traces
//! behind an editor's trace command.

use super::message::{plural, short_value};
use super::render::{run_line, Style};
use super::Finding;
use crate::report::{Divergence, FileReport, FunctionReport};
use std::fmt::Write;

/// Most input values listed in a hover.
const HOVER_VALUES: usize = 6;
/// Most events of one trace listed in a hover.
const HOVER_EVENTS: usize = 4;

/// A shell word: quoted when it holds anything but letters, digits and `_.+-=:`  (`'b->mass=0x1p+0'`).
fn shell_word(w: &str) -> String {
    if w.chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.+-=:".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// The replay command of one divergence, ready for a shell.
pub fn replay_command(file: &str, function: &str, d: &Divergence) -> String {
    let inputs: Vec<String> = d
        .inputs
        .iter()
        .map(|v| format!("--input {}", shell_word(&format!("{}={}", v.name, v.value))))
        .collect();
    format!(
        "foe replay {file} --function {function} {}",
        inputs.join(" ")
    )
}

/// The hover of a divergence finding: what happens and why, one best input, both runs, the replay command.
pub fn hover_markdown(report: &FileReport, f: &FunctionReport, finding: &Finding) -> String {
    let mut md = String::new();
    let divergences = finding.divergences_in(f);
    let Some(best) = divergences.first() else {
        return md;
    };
    let _ = writeln!(
        md,
        "**foe** · `{}` · `{}`\n\n{}\n",
        f.name,
        finding.code,
        super::message::what(finding.code, best)
    );
    let mut count = format!(
        "{} diverging input{} here",
        finding.inputs,
        plural(finding.inputs)
    );
    if !f.domain.is_empty() {
        let inside = divergences.iter().filter(|d| d.in_domain).count();
        let _ = write!(
            count,
            ", {inside} inside the declared domain `{}`",
            f.domain.join(" && ")
        );
    }
    let _ = writeln!(md, "{count}. Best input:");
    for v in finding.best_inputs.iter().take(HOVER_VALUES) {
        let _ = writeln!(md, "- `{}` = {} (`{}`)", v.name, short_value(v), v.value);
    }
    if finding.best_inputs.len() > HOVER_VALUES {
        let _ = writeln!(
            md,
            "- … {} more values (see the trace command)",
            finding.best_inputs.len() - HOVER_VALUES
        );
    }
    let ftz = if report.ftz_p_prime { ", FTZ/DAZ" } else { "" };
    let _ = writeln!(
        md,
        "\nPlain build (`{}`): {}  ",
        report.flags_p.join(" "),
        run_line(&best.trace_p, &best.end_p, HOVER_EVENTS, Style::Markdown)
    );
    let _ = writeln!(
        md,
        "Fast-math build (`{}`{ftz}): {}\n",
        report.flags_p_prime.join(" "),
        run_line(
            &best.trace_p_prime,
            &best.end_p_prime,
            HOVER_EVENTS,
            Style::Markdown
        )
    );
    // The inputs and the two runs first (what a hover shows without scrolling), then why and what removes it.
    if let Some(c) = &finding.cause {
        let _ = writeln!(md, "Cause: {}\n", c.text);
        if let Some(change) = &c.build_change {
            let _ = writeln!(md, "Fix: {change}\n");
        }
    }
    for line in &finding.shipped {
        let _ = writeln!(md, "{line}  ");
    }
    if !finding.shipped.is_empty() {
        md.push('\n');
    }
    let file = std::path::Path::new(&report.file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = write!(md, "Replay: `{}`", replay_command(&file, &f.name, best));
    if let Some(v) = &f.verdict {
        let _ = write!(md, "\n\n`{}`: {}", f.name, v.line());
    }
    md
}

/// Every input of the findings with both full traces (the editor's trace command).
pub fn trace_markdown(report: &FileReport, findings: &[&Finding]) -> String {
    let mut md = String::new();
    let file = std::path::Path::new(&report.file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for (n, finding) in findings.iter().enumerate() {
        let Some(f) = report.functions.iter().find(|f| f.name == finding.function) else {
            continue;
        };
        if n > 0 {
            md.push_str("\n---\n\n");
        }
        let _ = writeln!(
            md,
            "## `{}` · `{}`\n\n{}\n",
            f.name, finding.code, finding.message
        );
        for (i, d) in finding.divergences_in(f).iter().enumerate() {
            let _ = writeln!(md, "### Input {}\n", i + 1);
            for v in &d.inputs {
                let _ = writeln!(md, "- `{}` = `{}` ({})", v.name, v.value, v.decimal);
            }
            let ftz = if report.ftz_p_prime { ", FTZ/DAZ" } else { "" };
            let _ = writeln!(
                md,
                "\nPlain build (`{}`): {}  ",
                report.flags_p.join(" "),
                run_line(&d.trace_p, &d.end_p, usize::MAX, Style::Markdown)
            );
            let _ = writeln!(
                md,
                "Fast-math build (`{}`{ftz}): {}  ",
                report.flags_p_prime.join(" "),
                run_line(
                    &d.trace_p_prime,
                    &d.end_p_prime,
                    usize::MAX,
                    Style::Markdown
                )
            );
            for line in super::message::shipped_lines(d, usize::MAX) {
                let _ = writeln!(md, "{line}  ");
            }
            let _ = writeln!(md, "First difference at event {}  ", d.first_divergence + 1);
            let _ = writeln!(md, "Replay: `{}`\n", replay_command(&file, &f.name, d));
        }
    }
    md
}
