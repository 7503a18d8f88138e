//! Tests of the instrumentation passes on clang's IR.

use super::*;

const LL: &str = r#"
define double @f(double %x, <2 x double> %v, float %y) {
  %a = fadd double %x, 1.0
  %b = fneg double %a
  %c = fcmp olt double %b, 0.0
  %d = fmul <2 x double> %v, %v
  %e = call double @llvm.sqrt.f64(double %a)
  %f = fptosi double %e to i32
  %g = fpext float %y to double
  %h = call double @exp(double %g)
  %i = call double @g(double %h)
  %j = sitofp i32 %f to double
  ret double %i
}
define internal double @g(double %x) {
  %r = fdiv double %x, 3.0
  ret double %r
}
@counter = global i32 0
declare double @exp(double)
declare double @llvm.sqrt.f64(double)
"#;

#[test]
fn instruments_fp_operations_once() {
    let ctx = Context::create();
    let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
    let mut sites = SiteTable::default();
    assert_eq!(instrument_module(&m, Build::PPrime, &mut sites).unwrap(), 9);
    let ops: Vec<_> = sites
        .iter()
        .map(|(_, s)| (s.function.as_str(), s.operation.as_str()))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("f", "fadd"),
            ("f", "fcmp olt"),
            ("f", "fmul <2 x double>"),
            ("f", "call sqrt"),
            ("f", "fptosi"),
            ("f", "fpext"),
            ("f", "call exp"),
            ("f", "sitofp"),
            ("g", "fdiv"),
        ]
    );
    assert!(sites
        .iter()
        .all(|(_, s)| s.build == Build::PPrime && s.line.is_none()));
    // Idempotent: a second pass finds everything marked.
    assert_eq!(instrument_module(&m, Build::PPrime, &mut sites).unwrap(), 0);
    m.verify().unwrap();
    let text = m.print_to_string().to_string();
    assert_eq!(text.matches("call void @__foe_check(i32").count(), 9);
    // The check follows its instruction.
    assert!(
        text.contains(
            "%a = fadd double %x, 1.000000e+00, !foe.site !0\n  call void @__foe_check(i32 0)"
        ),
        "{text}"
    );
}

#[test]
fn a_module_has_fp_operations_where_instrumenting_it_would_make_a_site() {
    let ctx = Context::create();
    let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
    assert!(has_fp_operations(&m));
    // Integer code, and floats only loaded, stored and passed to a function the module defines: no site.
    let integers = r#"
define i32 @h(i32 %x, ptr %p) {
  %v = load double, ptr %p
  store double %v, ptr %p
  call void @k(double %v)
  %y = mul i32 %x, 3
  ret i32 %y
}
define void @k(double %d) {
  ret void
}
"#;
    let m = crate::ir::parse_module(&ctx, integers, "i").unwrap();
    assert!(!has_fp_operations(&m));
    let mut sites = SiteTable::default();
    assert_eq!(instrument_module(&m, Build::P, &mut sites).unwrap(), 0);
}

#[test]
fn constrained_intrinsics_are_sites_named_as_their_plain_forms() {
    // What `#pragma clang fp exceptions(strict)` makes of a block: metadata arguments, a constant converted
    // at run time, a signalling comparison, an intrinsic counterpart; the noalias declaration takes metadata
    // only and is no FP operation.
    let ll = r#"
define double @f(double %x, i32 %n) #0 {
  %c = call double @llvm.experimental.constrained.sitofp.f64.i32(i32 3, metadata !"round.tonearest", metadata !"fpexcept.strict") #0
  %a = call double @llvm.experimental.constrained.fadd.f64(double %x, double %c, metadata !"round.tonearest", metadata !"fpexcept.strict") #0
  %l = call i1 @llvm.experimental.constrained.fcmps.f64(double %a, double %x, metadata !"olt", metadata !"fpexcept.strict") #0
  %s = call double @llvm.experimental.constrained.sqrt.f64(double %a, metadata !"round.tonearest", metadata !"fpexcept.strict") #0
  %i = call i32 @llvm.experimental.constrained.fptosi.i32.f64(double %s, metadata !"fpexcept.strict") #0
  call void @llvm.experimental.noalias.scope.decl(metadata !0)
  ret double %s
}
declare double @llvm.experimental.constrained.sitofp.f64.i32(i32, metadata, metadata)
declare double @llvm.experimental.constrained.fadd.f64(double, double, metadata, metadata)
declare i1 @llvm.experimental.constrained.fcmps.f64(double, double, metadata, metadata)
declare double @llvm.experimental.constrained.sqrt.f64(double, metadata, metadata)
declare i32 @llvm.experimental.constrained.fptosi.i32.f64(double, metadata)
declare void @llvm.experimental.noalias.scope.decl(metadata)
attributes #0 = { strictfp }
!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"#;
    let ctx = Context::create();
    let m = crate::ir::parse_module(&ctx, ll, "t").unwrap();
    let mut sites = SiteTable::default();
    assert_eq!(instrument_module(&m, Build::P, &mut sites).unwrap(), 5);
    let ops: Vec<_> = sites.iter().map(|(_, s)| s.operation.as_str()).collect();
    assert_eq!(ops, ["sitofp", "fadd", "fcmp olt", "call sqrt", "fptosi"]);
    m.verify().unwrap();
}

#[test]
fn calls_foe_does_not_run_are_replaced_by_stops() {
    let ctx = Context::create();
    let m = crate::ir::parse_module(
        &ctx,
        r#"
define double @f(double %x) {
  %a = call double @exp(double %x)
  %b = call double @gsl_error(double %a)
  %c = fadd double %b, 1.0
  ret double %c
}
declare double @exp(double)
declare double @gsl_error(double)
"#,
        "t",
    )
    .unwrap();
    let mut sites = SiteTable::default();
    assert_eq!(replace_stopping_calls(&m, Build::P, &mut sites).unwrap(), 1);
    assert_eq!(sites.stop(0).map(|s| s.callee.as_str()), Some("gsl_error"));
    m.verify().unwrap();
    let text = m.print_to_string().to_string();
    assert!(text.contains("call double @exp(double %x)"), "{text}");
    assert!(!text.contains("call double @gsl_error"), "{text}");
    assert!(text.contains("call void @__foe_stop(i32 0)"), "{text}");
    assert!(text.contains("fadd double undef, 1.0"), "{text}");
}

#[test]
fn prefixes_definitions_and_builds_entries() {
    let ctx = Context::create();
    let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
    prefix_symbols(&m, Build::P);
    assert!(m.get_function("__foe_p.f").is_some());
    assert!(m.get_function("__foe_p.g").is_some());
    assert!(
        m.get_function("exp").is_some(),
        "declarations keep their names"
    );
    assert_eq!(
        m.get_global("__foe_p.counter").map(|g| g.get_linkage()),
        Some(Linkage::Internal)
    );
    let sig = FunctionSignature {
        name: "f".into(),
        params: vec![],
        ret: ReturnType::F64,
    };
    // The interface does not match: unavailable, not an error.
    assert!(add_entry(&m, Build::P, 0, &sig).unwrap().is_err());
    let g = FunctionSignature {
        name: "g".into(),
        params: vec![crate::types::Param::new("x", ParamType::F64)],
        ret: ReturnType::F64,
    };
    let entry = add_entry(&m, Build::P, 1, &g).unwrap().unwrap();
    add_entry_table(&m, &[(None, None), (Some(entry), Some(entry))]);
    finish_module(&m).unwrap();
    assert!(m.get_global(ENTRY_TABLE).is_some());
}

#[test]
fn intrinsics_the_shipped_code_calls_by_name_reach_the_library_s_definition() {
    // P' of a Cephes file: `llvm.exp` becomes a call of `exp` in the shipped binary, which links Cephes'
    // `exp`; `llvm.sqrt` becomes `sqrtsd`. The worker calls the same.
    const LL: &str = r#"
define double @f(double %x) {
  %a = call fast double @llvm.exp.f64(double %x)
  %b = call fast double @llvm.sqrt.f64(double %a)
  %c = call fast double @llvm.log.f64(double %b)
  ret double %c
}
define double @exp(double %x) "foe-replaces-c-library" {
  %r = fmul double %x, 2.0
  ret double %r
}
define double @log(double %x) {
  ret double %x
}
declare double @llvm.exp.f64(double)
declare double @llvm.sqrt.f64(double)
declare double @llvm.log.f64(double)
"#;
    let ctx = Context::create();
    let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
    // `log` is the file's own, not the library's: the intrinsic stays libm's, as the worker always did.
    assert_eq!(call_replacements(&m), 1);
    let text = m.print_to_string().to_string();
    assert!(text.contains("call fast double @exp(double %x)"), "{text}");
    assert!(text.contains("@llvm.sqrt.f64(double %a)"), "{text}");
    assert!(text.contains("@llvm.log.f64(double %b)"), "{text}");
    m.verify().unwrap();
}

#[test]
fn only_what_the_entries_reach_is_linked() {
    const HOSTILE: &str = r#"
@run_evil = internal global ptr @evil, section ".init_array"
@llvm.used = appending global [1 x ptr] [ptr @run_evil], section "llvm.metadata"
@llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @evil, ptr null }]
@__foe_entries = external global [0 x ptr]
@malloc = alias void (), ptr @evil
module asm ".section .preinit_array"

define internal void @evil() {
  ret void
}
define double @unreached(double %x) {
  store ptr null, ptr @__foe_entries
  ret double %x
}
define double @g(double %x) section ".fini_array" {
  %r = fmul double %x, 2.0
  ret double %r
}
"#;
    let ctx = Context::create();
    let m = crate::ir::parse_module(&ctx, HOSTILE, "t").unwrap();
    isolate_user_code(&m);
    let mut sites = SiteTable::default();
    instrument_module(&m, Build::P, &mut sites).unwrap();
    prefix_symbols(&m, Build::P);
    let g = FunctionSignature {
        name: "g".into(),
        params: vec![crate::types::Param::new("x", ParamType::F64)],
        ret: ReturnType::F64,
    };
    let entry = add_entry(&m, Build::P, 0, &g).unwrap().unwrap();
    internalize(&m, &[entry]).unwrap();
    add_entry_table(&m, &[(Some(entry), Some(entry))]);
    keep_only_entries(&m).unwrap();
    finish_module(&m).unwrap();
    let text = m.print_to_string().to_string();
    for gone in [
        "@evil",
        "run_evil",
        "global_ctors",
        "@malloc",
        "unreached",
        "module asm",
        "init_array",
        "fini_array",
    ] {
        assert!(!text.contains(gone), "{gone} is still linked:\n{text}");
    }
    assert!(m.get_function("__foe_p.g").is_some(), "{text}");
    assert!(m.get_global(ENTRY_TABLE).is_some());
}
