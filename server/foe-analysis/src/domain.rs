//! Input domains declared in the source, in a comment above a function:
//!
//! ```c
//! // foe: assume -4.5 <= v <= -0.3
//! // foe: assume 0.4 <= w <= 0.9 && r > 0
//! double turbine1(double v, double w, double r) { ... }
//! ```
//!
//! Each `assume` holds one or more `&&`-joined comparisons between a parameter and numbers (chains such as
//! `a <= x < b` allowed). Lines between the previous function and this one's declaration belong to it.
//! Guards in the code need no annotation: they are path conditions anyway.

use crate::types::{ArgValue, FunctionSignature, Input};

/// One bound on a parameter: `value` with `inclusive` (`<=`) or not (`<`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bound {
    pub value: f64,
    pub inclusive: bool,
}

/// The range of one parameter (by index into the signature's `params`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ParamRange {
    pub param: usize,
    pub lo: Option<Bound>,
    pub hi: Option<Bound>,
}

/// The declared domain of one function: a conjunction of parameter ranges.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Domain {
    pub ranges: Vec<ParamRange>,
    /// The annotations as written, for display.
    pub text: Vec<String>,
}

/// A problem with an annotation, reported to the user and otherwise ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainError {
    pub line: u32,
    pub message: String,
}

impl Domain {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether an input satisfies every declared range.
    pub fn contains(&self, input: &Input) -> bool {
        self.ranges.iter().all(|r| {
            let v = match input.0.get(r.param) {
                Some(ArgValue::F64(v)) => *v,
                Some(ArgValue::F32(v)) => *v as f64,
                Some(ArgValue::Int(v)) => *v as f64,
                _ => return true,
            };
            let lo_ok = r.lo.is_none_or(|b| {
                if b.inclusive {
                    v >= b.value
                } else {
                    v > b.value
                }
            });
            let hi_ok = r.hi.is_none_or(|b| {
                if b.inclusive {
                    v <= b.value
                } else {
                    v < b.value
                }
            });
            lo_ok && hi_ok
        })
    }

    fn range_mut(&mut self, param: usize) -> &mut ParamRange {
        if let Some(i) = self.ranges.iter().position(|r| r.param == param) {
            return &mut self.ranges[i];
        }
        self.ranges.push(ParamRange {
            param,
            lo: None,
            hi: None,
        });
        self.ranges.last_mut().expect("just pushed")
    }

    fn tighten_lo(&mut self, param: usize, b: Bound) {
        let r = self.range_mut(param);
        r.lo = Some(match r.lo {
            Some(old) if old.value > b.value || (old.value == b.value && !old.inclusive) => old,
            _ => b,
        });
    }

    fn tighten_hi(&mut self, param: usize, b: Bound) {
        let r = self.range_mut(param);
        r.hi = Some(match r.hi {
            Some(old) if old.value < b.value || (old.value == b.value && !old.inclusive) => old,
            _ => b,
        });
    }
}

/// The `foe: assume` lines of `source`, as (1-based line, text after `assume`).
pub fn assume_lines(source: &str) -> Vec<(u32, String)> {
    source
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let comment = line
                .split_once("//")
                .map(|(_, c)| c)
                .or_else(|| line.split_once("/*").map(|(_, c)| c))?;
            let rest = comment
                .trim()
                .strip_prefix("foe:")?
                .trim()
                .strip_prefix("assume")?;
            Some((
                i as u32 + 1,
                rest.trim().trim_end_matches("*/").trim().to_string(),
            ))
        })
        .collect()
}

/// The domain of the function declared at `decl_line`, from the annotations after `prev_decl_end`
/// (the last line of the previous function, 0 for the first) and before or on `decl_line`.
pub fn domain_for(
    source: &str,
    sig: &FunctionSignature,
    prev_decl_end: u32,
    decl_line: u32,
) -> (Domain, Vec<DomainError>) {
    let mut domain = Domain::default();
    let mut errors = Vec::new();
    for (line, text) in assume_lines(source) {
        if line <= prev_decl_end || line > decl_line {
            continue;
        }
        match parse_assume(&text, sig, &mut domain) {
            Ok(()) => domain.text.push(text),
            Err(message) => errors.push(DomainError { line, message }),
        }
    }
    (domain, errors)
}

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Param(usize),
    Number(f64),
}

/// Parses `a <= x <= b && y > 0` into `domain`.
fn parse_assume(text: &str, sig: &FunctionSignature, domain: &mut Domain) -> Result<(), String> {
    for conjunct in text.split("&&") {
        let tokens = tokenize(conjunct)?;
        if tokens.len() < 3 || tokens.len() % 2 == 0 {
            return Err(format!(
                "expected a comparison such as `0 <= x < 1`, found `{}`",
                conjunct.trim()
            ));
        }
        let term = |t: &str| -> Result<Term, String> {
            if let Some(v) = crate::fpfmt::parse_f64(t) {
                return Ok(Term::Number(v));
            }
            sig.params
                .iter()
                .position(|p| p.name == t)
                .map(Term::Param)
                .ok_or_else(|| format!("`{t}` is neither a number nor a parameter of {}", sig.name))
        };
        let mut left = term(&tokens[0])?;
        for pair in tokens[1..].chunks(2) {
            let op = pair[0].as_str();
            let right = term(&pair[1])?;
            apply(domain, &left, op, &right)?;
            left = right;
        }
    }
    Ok(())
}

fn apply(domain: &mut Domain, left: &Term, op: &str, right: &Term) -> Result<(), String> {
    let (inclusive, less) = match op {
        "<=" => (true, true),
        "<" => (false, true),
        ">=" => (true, false),
        ">" => (false, false),
        "==" => {
            return match (left, right) {
                (Term::Param(p), Term::Number(v)) | (Term::Number(v), Term::Param(p)) => {
                    let b = Bound {
                        value: *v,
                        inclusive: true,
                    };
                    domain.tighten_lo(*p, b);
                    domain.tighten_hi(*p, b);
                    Ok(())
                }
                _ => Err("`==` needs a parameter and a number".into()),
            }
        }
        other => return Err(format!("unknown comparison `{other}`")),
    };
    match (left, right) {
        // x < v  or  x > v
        (Term::Param(p), Term::Number(v)) => {
            let b = Bound {
                value: *v,
                inclusive,
            };
            if less {
                domain.tighten_hi(*p, b)
            } else {
                domain.tighten_lo(*p, b)
            }
        }
        // v < x  or  v > x
        (Term::Number(v), Term::Param(p)) => {
            let b = Bound {
                value: *v,
                inclusive,
            };
            if less {
                domain.tighten_lo(*p, b)
            } else {
                domain.tighten_hi(*p, b)
            }
        }
        (Term::Number(_), Term::Number(_)) => {}
        (Term::Param(_), Term::Param(_)) => {
            return Err("comparisons between two parameters are not supported".into())
        }
    }
    Ok(())
}

fn tokenize(text: &str) -> Result<Vec<String>, String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if "<>=!".contains(c) {
            let mut op = c.to_string();
            if chars.get(i + 1) == Some(&'=') {
                op.push('=');
                i += 1;
            }
            tokens.push(op);
            i += 1;
        } else {
            let start = i;
            // a number may carry a sign or exponent sign: keep '-'/'+' that follow 'e'/'p' or start a term
            while i < chars.len() && !chars[i].is_whitespace() && !"<>=!".contains(chars[i]) {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        }
    }
    if tokens.iter().any(|t| t == "=" || t == "!" || t == "!=") {
        return Err("only <, <=, >, >= and == are supported".into());
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Param, ParamType, ReturnType};

    fn sig() -> FunctionSignature {
        let p = |n: &str| Param::new(n, ParamType::F64);
        FunctionSignature {
            name: "t".into(),
            params: vec![p("v"), p("w"), p("r")],
            ret: ReturnType::F64,
        }
    }

    #[test]
    fn parses_chains_and_conjunctions() {
        let src = "// foe: assume -4.5 <= v <= -0.3\n/* foe: assume 0.4 <= w && w < 0.9 */\n// foe: assume r > 3.8\ndouble t(double v, double w, double r);\n";
        let (d, errors) = domain_for(src, &sig(), 0, 4);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(d.text.len(), 3);
        let v = &d.ranges[0];
        assert_eq!(
            v.lo,
            Some(Bound {
                value: -4.5,
                inclusive: true
            })
        );
        assert_eq!(
            v.hi,
            Some(Bound {
                value: -0.3,
                inclusive: true
            })
        );
        let inside = Input(vec![
            ArgValue::F64(-1.0),
            ArgValue::F64(0.5),
            ArgValue::F64(4.0),
        ]);
        let outside = Input(vec![
            ArgValue::F64(-1.0),
            ArgValue::F64(0.9),
            ArgValue::F64(4.0),
        ]);
        assert!(d.contains(&inside));
        assert!(!d.contains(&outside));
    }

    #[test]
    fn reports_unknown_names() {
        let (_, errors) = domain_for("// foe: assume 0 < q\nint f();", &sig(), 0, 2);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.contains("`q`"));
    }
}
