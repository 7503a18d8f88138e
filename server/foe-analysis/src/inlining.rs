//! Which functions hold inlined copies of which others, read from a build's debug info (the `inlinedAt` chains
//! of its instruction locations). A static helper that the fast-math build inlined into every caller has no
//! copy of its own there; its operations are analysed inside those callers, and this tells which.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

/// A `DILocation`: its scope and the location it was inlined at, if any.
struct Location {
    scope: u32,
    inlined_at: Option<u32>,
}

/// Helper name → the functions defined in `ll` whose bodies hold code inlined from it (directly or through other
/// inlined helpers). Functions that only call the helper are not listed.
pub fn inlined_helpers(ll: &str) -> BTreeMap<String, BTreeSet<String>> {
    static LOCATION: OnceLock<Regex> = OnceLock::new();
    static SCOPE: OnceLock<Regex> = OnceLock::new();
    static SUBPROGRAM: OnceLock<Regex> = OnceLock::new();
    static DEFINE: OnceLock<Regex> = OnceLock::new();
    static DBG: OnceLock<Regex> = OnceLock::new();
    let get = |cell: &'static OnceLock<Regex>, pattern: &str| -> &'static Regex {
        cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
    };
    let location = get(
        &LOCATION,
        r"^!(\d+) = (?:distinct )?!DILocation\(.*?scope: !(\d+)(?:, inlinedAt: !(\d+))?",
    );
    let lexical = get(
        &SCOPE,
        r"^!(\d+) = (?:distinct )?!DILexicalBlock(?:File)?\(scope: !(\d+)",
    );
    let subprogram = get(
        &SUBPROGRAM,
        r#"^!(\d+) = (?:distinct )?!DISubprogram\(name: "([^"]+)""#,
    );
    let define = get(&DEFINE, r#"^define [^@]*@"?([\w.$]+)"?\("#);
    let dbg = get(&DBG, r"!dbg !(\d+)");
    let num = |s: &str| s.parse::<u32>().unwrap_or(0);

    let mut locations: HashMap<u32, Location> = HashMap::new();
    let mut parents: HashMap<u32, u32> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    // Function name → the location ids its instructions carry.
    let mut bodies: Vec<(String, Vec<u32>)> = Vec::new();
    let mut current: Option<(String, Vec<u32>)> = None;
    for line in ll.lines() {
        if let Some(body) = current.as_mut() {
            if line == "}" {
                bodies.extend(current.take());
                continue;
            }
            body.1.extend(dbg.captures_iter(line).map(|c| num(&c[1])));
            continue;
        }
        if let Some(c) = define.captures(line) {
            if line.trim_end().ends_with('{') {
                current = Some((c[1].to_string(), Vec::new()));
            }
        } else if let Some(c) = location.captures(line) {
            locations.insert(
                num(&c[1]),
                Location {
                    scope: num(&c[2]),
                    inlined_at: c.get(3).map(|m| num(m.as_str())),
                },
            );
        } else if let Some(c) = lexical.captures(line) {
            parents.insert(num(&c[1]), num(&c[2]));
        } else if let Some(c) = subprogram.captures(line) {
            names.insert(num(&c[1]), c[2].to_string());
        }
    }

    let subprogram_of = |mut scope: u32| -> Option<&String> {
        for _ in 0..64 {
            if let Some(name) = names.get(&scope) {
                return Some(name);
            }
            scope = *parents.get(&scope)?;
        }
        None
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (function, ids) in bodies {
        let mut seen = BTreeSet::new();
        for id in ids {
            if !seen.insert(id) {
                continue;
            }
            // Every scope along the inlined-at chain but the last (the function itself) was inlined.
            let mut at = locations.get(&id);
            for _ in 0..64 {
                let Some(loc) = at else { break };
                let Some(next) = loc.inlined_at else { break };
                if let Some(helper) = subprogram_of(loc.scope) {
                    if *helper != function {
                        out.entry(helper.clone())
                            .or_default()
                            .insert(function.clone());
                    }
                }
                at = locations.get(&next);
            }
        }
    }
    out
}

/// Callee name → the functions defined in `ll` that call it directly (the plain build at `-O0` inlines nothing,
/// so there a helper's operations run inside its callers' executions through these calls).
pub fn direct_callers(ll: &str) -> BTreeMap<String, BTreeSet<String>> {
    static DEFINE: OnceLock<Regex> = OnceLock::new();
    static CALL: OnceLock<Regex> = OnceLock::new();
    let define =
        DEFINE.get_or_init(|| Regex::new(r#"^define [^@]*@"?([\w.$]+)"?\("#).expect("valid regex"));
    let call = CALL.get_or_init(|| {
        Regex::new(r#"\b(?:call|invoke)\b[^@]*@"?([\w.$]+)"?\("#).expect("valid regex")
    });
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in ll.lines() {
        if line == "}" {
            current = None;
        } else if let Some(caller) = &current {
            for c in call.captures_iter(line) {
                if c[1] != *caller {
                    out.entry(c[1].to_string())
                        .or_default()
                        .insert(caller.clone());
                }
            }
        } else if let Some(c) = define.captures(line) {
            current = Some(c[1].to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LL: &str = r#"define double @outer(double %x) !dbg !10 {
entry:
  %a = fmul double %x, %x, !dbg !20
  %b = fadd double %a, 1.0, !dbg !21
  ret double %b, !dbg !22
}
!10 = distinct !DISubprogram(name: "outer", scope: !1, file: !1, line: 9)
!11 = distinct !DISubprogram(name: "square", scope: !1, file: !1, line: 2)
!12 = distinct !DISubprogram(name: "inner", scope: !1, file: !1, line: 5)
!13 = distinct !DILexicalBlock(scope: !11, file: !1, line: 3, column: 5)
!20 = !DILocation(line: 3, column: 12, scope: !13, inlinedAt: !23)
!21 = !DILocation(line: 10, column: 3, scope: !10)
!22 = !DILocation(line: 11, column: 3, scope: !10)
!23 = distinct !DILocation(line: 6, column: 10, scope: !12, inlinedAt: !24)
!24 = distinct !DILocation(line: 10, column: 10, scope: !10)
"#;

    #[test]
    fn follows_inlined_at_chains_through_lexical_blocks() {
        let map = inlined_helpers(LL);
        assert_eq!(map["square"], BTreeSet::from(["outer".to_string()]));
        assert_eq!(map["inner"], BTreeSet::from(["outer".to_string()]));
        assert!(!map.contains_key("outer"));
    }

    #[test]
    fn lists_direct_callers() {
        let ll =
            "define double @f(double %x) {\n  %r = call double @g(double %x)\n  ret double %r\n}\n";
        let map = direct_callers(ll);
        assert_eq!(map["g"], BTreeSet::from(["f".to_string()]));
    }
}

/// For each function `ll` defines with internal linkage (C's `static`), the functions of `ll` that call it
/// directly; a static function nobody calls directly (reached through a table only) is left out.
pub fn static_callers(ll: &str) -> BTreeMap<String, BTreeSet<String>> {
    static INTERNAL: OnceLock<Regex> = OnceLock::new();
    let internal = INTERNAL.get_or_init(|| {
        Regex::new(r#"^define (?:[\w]+ )*?internal [^@]*@"?([\w.$]+)"?\("#).expect("valid regex")
    });
    let statics: BTreeSet<&str> = ll
        .lines()
        .filter_map(|line| internal.captures(line))
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    direct_callers(ll)
        .into_iter()
        .filter(|(callee, _)| statics.contains(callee.as_str()))
        .collect()
}

/// Function name → the functions defined in `ll` that may call it through a table: they read a global whose
/// initializer holds the function's address (`@table = internal constant [2 x ptr] [ptr @f, ptr @g]`). A
/// may-call relation: a function that reads the table is taken to call every function in it.
pub fn table_callers(ll: &str) -> BTreeMap<String, BTreeSet<String>> {
    static GLOBAL: OnceLock<Regex> = OnceLock::new();
    static REF: OnceLock<Regex> = OnceLock::new();
    static DEFINE: OnceLock<Regex> = OnceLock::new();
    let global = GLOBAL.get_or_init(|| Regex::new(r#"^@"?([\w.$]+)"? = "#).expect("valid regex"));
    let reference = REF.get_or_init(|| Regex::new(r#"@"?([\w.$]+)"?"#).expect("valid regex"));
    let define =
        DEFINE.get_or_init(|| Regex::new(r#"^define [^@]*@"?([\w.$]+)"?\("#).expect("valid regex"));
    let defined: BTreeSet<&str> = ll
        .lines()
        .filter_map(|l| define.captures(l))
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    // Global → the defined functions its initializer names.
    let mut tables: HashMap<&str, Vec<&str>> = HashMap::new();
    for line in ll.lines() {
        let Some(name) = global.captures(line).and_then(|c| c.get(1)) else {
            continue;
        };
        let rest = &line[name.end()..];
        let named: Vec<&str> = reference
            .captures_iter(rest)
            .filter_map(|c| c.get(1).map(|m| m.as_str()))
            .filter(|f| defined.contains(f))
            .collect();
        if !named.is_empty() {
            tables.insert(name.as_str(), named);
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<&str> = None;
    for line in ll.lines() {
        if line == "}" {
            current = None;
        } else if let Some(caller) = current {
            for c in reference.captures_iter(line) {
                for f in tables.get(&c[1]).into_iter().flatten() {
                    if *f != caller {
                        out.entry(f.to_string())
                            .or_default()
                            .insert(caller.to_string());
                    }
                }
            }
        } else if let Some(c) = define.captures(line) {
            current = c.get(1).map(|m| m.as_str());
        }
    }
    out
}

#[cfg(test)]
mod static_tests {
    #[test]
    fn static_functions_and_their_direct_callers() {
        let ll = "define internal double @helper(double %x) #0 {\n  ret double %x\n}\n\
                  define dso_local double @api(double %x) #0 {\n  %r = call double @helper(double %x)\n  ret double %r\n}\n\
                  define internal fastcc double @unused(double %x) {\n  ret double %x\n}\n\
                  define dso_local double @other(double %x) {\n  %r = call double @api(double %x)\n  ret double %r\n}\n";
        let callers = super::static_callers(ll);
        assert_eq!(callers.len(), 1, "{callers:?}");
        assert_eq!(
            callers["helper"].iter().collect::<Vec<_>>(),
            vec!["api"],
            "external `api` and the uncalled static are left out"
        );
    }

    #[test]
    fn functions_named_in_a_table_are_called_by_those_that_read_it() {
        let ll = "@table = internal constant [2 x ptr] [ptr @scale_up, ptr @halve], align 16\n\
                  define dso_local double @through(double %0) #0 {\n  %3 = load ptr, ptr @table, align 16\n  \
                  %5 = call double %3(double %0)\n  ret double %5\n}\n\
                  define internal double @scale_up(double %0) #0 {\n  ret double %0\n}\n\
                  define internal double @halve(double %0) #0 {\n  ret double %0\n}\n";
        let callers = super::table_callers(ll);
        assert_eq!(callers.len(), 2, "{callers:?}");
        assert!(callers["scale_up"].contains("through") && callers["halve"].contains("through"));
    }
}
