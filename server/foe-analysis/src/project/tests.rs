//! Unit tests of the project's links: which unit defines a name, what a unit brings, the unit limit.

use super::*;

#[test]
fn definitions_are_found_by_their_first_line() {
    let gsl = "int\ngsl_sf_lngamma_e(const double x, gsl_sf_result * result)\n{\n";
    assert!(may_define(gsl, "gsl_sf_lngamma_e"));
    assert!(!may_define(gsl, "gsl_sf_lngamma"));
    let kr = "double polevl( x, coef, N )\ndouble x;\n";
    assert!(may_define(kr, "polevl"));
    assert!(!may_define(
        "double polevl(double, double *, int);\n",
        "polevl"
    ));
    assert!(!may_define("  y = polevl(x, P, 4);\n", "polevl"));
    assert!(may_define("double MACHEP = 1.11e-16;\n", "MACHEP"));
    assert!(!may_define("extern double MACHEP;\n", "MACHEP"));
}

/// A database in `dir` of the files `units` (name, text) and `a.c` (`file`); the analysed file's pair linked.
fn link_in(dir: &Path, units: &[(&str, &str)], file: &str) -> (CompiledPair, Linked) {
    let mut entries = Vec::new();
    for (name, text) in units.iter().chain([&("a.c", file)]) {
        std::fs::write(dir.join(name), text).unwrap();
        entries.push(serde_json::json!({
            "directory": dir,
            "file": name,
            "arguments": ["cc", "-c", name],
        }));
    }
    let db_path = dir.join("compile_commands.json");
    std::fs::write(&db_path, serde_json::to_string(&entries).unwrap()).unwrap();
    let db = CompileDb::load(&db_path).unwrap();
    let config = AnalysisConfig::default();
    let path = dir.join("a.c");
    let pair = crate::compile::compile_pair(&config, &path, file).unwrap();
    link_units(pair, &path, &config, Some(&db))
}

/// The names `ll` defines as functions.
fn defined(ll: &str) -> Vec<String> {
    ll.lines()
        .filter(|l| l.starts_with("define "))
        .filter_map(|l| l.split('@').nth(1)?.split('(').next().map(String::from))
        .collect()
}

#[test]
fn a_unit_brings_only_what_is_asked_of_it() {
    // `unused` calls into `v.c`; nothing the file reaches does, so `v.c` is not linked.
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let u = "double other(double);\n\
             double used(double x) { return x * 2; }\n\
             double unused(double x) { return other(x); }\n";
    let v = "double other(double x) { return x + 1; }\n";
    let a = "double used(double);\ndouble f(double x) { return used(x); }\n";
    let (pair, linked) = link_in(dir.path(), &[("u.c", u), ("v.c", v)], a);
    let names: Vec<_> = linked
        .units
        .iter()
        .map(|u| u.file_name().unwrap())
        .collect();
    assert_eq!(names, ["u.c"]);
    assert!(linked.unresolved.is_empty(), "{linked:?}");
    for ll in [&pair.p_ll, &pair.pp_ll] {
        let defined = defined(ll);
        assert!(defined.contains(&"used".to_string()), "{defined:?}");
        assert!(
            !defined.iter().any(|d| d.starts_with("unused")),
            "{defined:?}"
        );
    }
}

#[test]
fn a_symbol_asked_after_its_unit_was_linked_is_kept_there_with_one_copy_of_its_statics() {
    // The file calls `a` (u.c) and `b` (w.c); `b` calls `a2`, which u.c defines too but was not asked of
    // it when it was linked for `a`. The links start again with `a2` kept: both are resolved, and u.c's static
    // counter is one variable.
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let u = "static int count;\n\
             double a(double x) { count++; return x * count; }\n\
             double a2(double x) { count++; return x + count; }\n";
    let w = "double a2(double);\ndouble b(double x) { return a2(x) * 3; }\n";
    let a = "double a(double);\ndouble b(double);\n\
             double f(double x) { return a(x) + b(x); }\n";
    let (pair, linked) = link_in(dir.path(), &[("u.c", u), ("w.c", w)], a);
    let mut names: Vec<_> = linked
        .units
        .iter()
        .map(|u| u.file_name().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["u.c", "w.c"]);
    assert!(linked.unresolved.is_empty(), "{linked:?}");
    for ll in [&pair.p_ll, &pair.pp_ll] {
        let defined = defined(ll);
        for f in ["a", "a2", "b"] {
            assert!(defined.contains(&f.to_string()), "{f}: {defined:?}");
        }
        let counters = ll.lines().filter(|l| l.starts_with("@count")).count();
        assert_eq!(counters, 1, "{ll}");
    }
}

#[test]
fn past_the_unit_limit_only_what_some_unit_may_define_is_beyond_it() {
    // `f` calls one function from each of MAX_UNITS + 1 units, the first of which calls `report`, which no
    // unit defines: the last unit is past the limit, and so is `report` when it comes up, but it is
    // unresolved as it would be below the limit (a shipped run that stops at it is compared like the
    // instrumented one, which stops there too).
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let n = MAX_UNITS + 1;
    let mut a = String::new();
    let mut body = String::from("double f(double x) {\n  double s = 0;\n");
    let mut entries = Vec::new();
    for i in 0..n {
        a.push_str(&format!("double g{i}(double);\n"));
        body.push_str(&format!("  s += g{i}(x);\n"));
        let unit = format!("u{i}.c");
        std::fs::write(
            dir.path().join(&unit),
            format!(
                "void report(void);\ndouble g{i}(double x) {{ {} return x * {i}; }}\n",
                if i == 0 { "if (x < 0) report();" } else { "" }
            ),
        )
        .unwrap();
        entries.push(unit);
    }
    a.push_str(&body);
    a.push_str("  return s;\n}\n");
    let file = dir.path().join("a.c");
    std::fs::write(&file, &a).unwrap();
    entries.push("a.c".into());
    let db_json: Vec<serde_json::Value> = entries
        .iter()
        .map(|f| {
            serde_json::json!({
                "directory": dir.path(),
                "file": f,
                "arguments": ["cc", "-c", f],
            })
        })
        .collect();
    let db_path = dir.path().join("compile_commands.json");
    std::fs::write(&db_path, serde_json::to_string(&db_json).unwrap()).unwrap();
    let db = CompileDb::load(&db_path).unwrap();
    let config = AnalysisConfig::default();
    let pair = crate::compile::compile_pair(&config, &file, &a).unwrap();
    let (_, linked) = link_units(pair, &file, &config, Some(&db));
    assert_eq!(linked.units.len(), MAX_UNITS);
    assert_eq!(linked.beyond_cap.len(), 1, "{linked:?}");
    assert!(linked.beyond_cap.iter().all(|g| g.starts_with('g')));
    assert!(linked.unresolved.contains("report"));
    assert!(!linked.beyond_cap.contains("report"));
}

#[test]
fn a_unit_names_its_external_definitions_and_keeps_no_debug_info() {
    let p_ll = "define dso_local double @polevl(double %0) #0 !dbg !8 {\n  ret double %0, !dbg !11\n}\n\
                define internal double @helper(double %0) {\n  ret double %0\n}\n\
                @MACHEP = dso_local global double 1.0\n@hidden = internal global i32 0\n\
                @extern_datum = external global double\ndeclare double @declared(double)\n\
                !llvm.dbg.cu = !{!0}\n!llvm.module.flags = !{!3}\n\
                !0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: \"clang\", \
                isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false)\n\
                !1 = !DIFile(filename: \"u.c\", directory: \"/tmp\")\n!3 = !{i32 2, !\"Debug Info Version\", i32 3}\n\
                !8 = distinct !DISubprogram(name: \"polevl\", scope: !1, file: !1, line: 1, type: !9, \
                scopeLine: 1, spFlags: DISPFlagDefinition, unit: !0)\n!9 = !DISubroutineType(types: !10)\n\
                !10 = !{null}\n!11 = !DILocation(line: 2, column: 3, scope: !8)\n";
    let pair = CompiledPair {
        p_ll: p_ll.to_string(),
        pp_ll: p_ll.to_string(),
    };
    let unit = Unit::from_ir(&pair).expect("unit");
    let mut names: Vec<&str> = unit.defines.iter().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["MACHEP", "polevl"]);
    let context = Context::create();
    for (bitcode, build) in [(&unit.p, "P"), (&unit.pp, "P'")] {
        let m = parse_bitcode(&context, bitcode, build).expect("bitcode");
        assert!(m.get_function("polevl").is_some());
        assert!(!m.print_to_string().to_string().contains("!dbg"), "{build}");
    }
}

#[test]
fn a_cached_unit_is_compiled_again_when_a_header_it_includes_changes() {
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    let u = "#include \"u.h\"\ndouble used(double x) { return x * K; }\n";
    let a = "double used(double);\ndouble f(double x) { return used(x); }\n";
    for (k, constant) in [("2.0", "2.000000e+00"), ("3.0", "3.000000e+00")] {
        std::fs::write(dir.path().join("u.h"), format!("#define K {k}\n")).unwrap();
        let (pair, linked) = link_in(dir.path(), &[("u.c", u)], a);
        assert_eq!(linked.units.len(), 1, "{linked:?}");
        for ll in [&pair.p_ll, &pair.pp_ll] {
            assert!(
                ll.contains(constant),
                "the unit as `u.h` now reads (K = {k}) is linked:\n{ll}"
            );
        }
    }
}
