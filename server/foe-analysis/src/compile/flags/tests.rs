//! The flag table's tests: what a compilation-database entry keeps, and what it drops and names, per flag family.

use super::*;

fn args(list: &[&str]) -> Vec<String> {
    std::iter::once("cc")
        .chain(list.iter().copied())
        .map(String::from)
        .collect()
}

fn sorted(list: &[&str]) -> EntryFlags {
    filter(&args(list), Path::new("/repo/build"))
}

/// Every flag of `list` is a build flag, in order, and none is dropped.
fn assert_all_kept(list: &[&str]) {
    let f = sorted(list);
    assert_eq!(f.build, list);
    assert!(f.dropped.is_empty(), "{:?}", f.dropped);
}

#[test]
fn include_paths_are_kept_and_resolved() {
    let f = sorted(&[
        "-Iinc",
        "-I",
        "/abs",
        "-isystem",
        "sys",
        "-iquote",
        "q",
        "-idirafter",
        "/after",
        "-include",
        "pre.h",
        "-nostdinc",
    ]);
    assert_eq!(
        f.meaning,
        [
            "-I/repo/build/inc",
            "-I",
            "/abs",
            "-isystem",
            "/repo/build/sys",
            "-iquote",
            "/repo/build/q",
            "-idirafter",
            "/after",
            "-include",
            "/repo/build/pre.h",
            "-nostdinc"
        ]
    );
    assert!(f.dropped.is_empty(), "{:?}", f.dropped);
}

#[test]
fn defines_and_language_are_kept() {
    let f = sorted(&["-DN=3", "-D", "M", "-UX", "-std=c11", "-x", "c", "-ansi"]);
    assert_eq!(f.meaning, ["-DN=3", "-D", "M", "-UX", "-std=c11", "-ansi"]);
    assert!(f.build.is_empty() && f.dropped.is_empty());
}

#[test]
fn target_and_architecture_are_build_flags() {
    let list = [
        "-target",
        "x86_64-linux-gnu",
        "--target=x86_64-linux-gnu",
        "-m64",
        "-march=haswell",
        "-mtune=native",
        "-msse4.2",
        "-mavx2",
        "-mfma",
        "-mno-avx512f",
    ];
    let f = sorted(&list);
    assert_eq!(f.build, list);
    assert!(f.meaning.is_empty() && f.dropped.is_empty());
}

#[test]
fn floating_point_and_optimisation_flags_are_build_flags() {
    let list = [
        "-O2",
        "-Ofast",
        "-ffast-math",
        "-fno-fast-math",
        "-ffinite-math-only",
        "-fassociative-math",
        "-freciprocal-math",
        "-fno-signed-zeros",
        "-fno-trapping-math",
        "-ffp-contract=fast",
        "-fapprox-func",
        "-funsafe-math-optimizations",
        "-fdenormal-fp-math=preserve-sign",
        "-ffp-model=fast",
        "-fexcess-precision=standard",
        "-fno-math-errno",
        "-fmath-errno",
        "-fno-honor-nans",
        "-fhonor-infinities",
    ];
    assert_all_kept(&list);
}

#[test]
fn code_generation_flags_are_build_flags() {
    let list = [
        "-fno-strict-aliasing",
        "-fwrapv",
        "-funsigned-char",
        "-fsigned-char",
        "-fPIC",
        "-fpic",
        "-fno-pic",
    ];
    assert_eq!(sorted(&list).build, list);
}

#[test]
fn routine_flags_are_left_out_silently() {
    let f = sorted(&[
        "-c", "a.c", "-o", "a.o", "-g", "-ggdb3", "-Wall", "-Werror", "-w", "-MD", "-MF", "a.d",
        "-MT", "a.o", "-pipe",
    ]);
    assert_eq!(f, EntryFlags::default());
}

#[test]
fn plugins_are_dropped_and_named() {
    let f = sorted(&["-fplugin=/x/evil.so", "-fpass-plugin=/x/evil.so", "-DOK"]);
    assert_eq!(f.meaning, ["-DOK"]);
    assert_eq!(
        f.dropped,
        ["-fplugin=/x/evil.so", "-fpass-plugin=/x/evil.so"]
    );
}

#[test]
fn pass_throughs_are_dropped_with_their_values() {
    let f = sorted(&[
        "-Xclang",
        "-load",
        "-Xclang",
        "/x/evil.so",
        "-mllvm",
        "-debug-pass=Structure",
        "-Xlinker",
        "--wrap",
        "-O1",
    ]);
    assert_eq!(
        f.dropped,
        [
            "-Xclang -load",
            "-Xclang /x/evil.so",
            "-mllvm -debug-pass=Structure",
            "-Xlinker --wrap"
        ]
    );
    assert_eq!(f.build, ["-O1"]);
}

#[test]
fn linker_choices_and_tool_directories_are_dropped() {
    let f = sorted(&[
        "-fuse-ld=/x/evil",
        "--ld-path=/x/evil",
        "-B/x/tools",
        "-B",
        "/x/tools",
        "-Wl,-plugin,/x/evil.so",
        "--sysroot=/x",
        "--sysroot",
        "/x",
        "-resource-dir",
        "/x",
    ]);
    assert_eq!(
        f.dropped,
        [
            "-fuse-ld=/x/evil",
            "--ld-path=/x/evil",
            "-B/x/tools",
            "-B /x/tools",
            "-Wl,-plugin,/x/evil.so",
            "--sysroot=/x",
            "--sysroot /x",
            "-resource-dir /x"
        ]
    );
    assert!(f.meaning.is_empty() && f.build.is_empty());
}

#[test]
fn flags_that_write_files_are_dropped() {
    let f = sorted(&[
        "-ftime-trace=/x/trace.json",
        "-ftime-trace",
        "-MJ",
        "/x/frag.json",
        "-save-temps=obj",
        "-fprofile-generate=/x",
        "-fcoverage-mapping",
        "-fcrash-diagnostics-dir=/x",
        "-fmodules-cache-path=/x",
        "--config",
        "/x/evil.cfg",
        "--config=/x/evil.cfg",
    ]);
    assert_eq!(
        f.dropped,
        [
            "-ftime-trace=/x/trace.json",
            "-ftime-trace",
            "-MJ /x/frag.json",
            "-save-temps=obj",
            "-fprofile-generate=/x",
            "-fcoverage-mapping",
            "-fcrash-diagnostics-dir=/x",
            "-fmodules-cache-path=/x",
            "--config /x/evil.cfg",
            "--config=/x/evil.cfg"
        ]
    );
}

#[test]
fn response_files_are_read_under_the_same_rule() {
    let dir = crate::scratch::tempdir("foe-test").unwrap();
    std::fs::write(dir.path().join("inner.rsp"), "-fplugin=/x/evil.so -DINNER").unwrap();
    std::fs::write(
        dir.path().join("flags.rsp"),
        "-Iinc \"-DNAME=a b\" @inner.rsp -fuse-ld=/x/evil\n-O2",
    )
    .unwrap();
    std::fs::write(dir.path().join("loop.rsp"), "@loop.rsp").unwrap();
    let f = filter(
        &args(&["@flags.rsp", "@missing.rsp", "@loop.rsp"]),
        dir.path(),
    );
    assert_eq!(
        f.meaning,
        [
            format!("-I{}/inc", dir.path().display()),
            "-DNAME=a b".into(),
            "-DINNER".into()
        ]
    );
    assert_eq!(f.build, ["-O2"]);
    assert_eq!(
        f.dropped,
        [
            "-fplugin=/x/evil.so",
            "-fuse-ld=/x/evil",
            "@missing.rsp (not a readable response file)",
            "@loop.rsp (response files nested too deep)"
        ]
    );
}

#[test]
fn the_compiler_and_inputs_are_never_kept() {
    let f = filter(
        &[
            "/x/evil-cc".to_string(),
            "a.c".into(),
            "-".into(),
            "--".into(),
            "-fplugin=x".into(),
        ],
        Path::new("/"),
    );
    assert_eq!(f, EntryFlags::default());
}

#[test]
fn unknown_machine_options_are_dropped_not_guessed() {
    let f = sorted(&[
        "-mllvm",
        "-x86-asm-syntax=intel",
        "-mstrange",
        "-march=znver3",
    ]);
    assert_eq!(f.build, ["-march=znver3"]);
    assert_eq!(f.dropped, ["-mllvm -x86-asm-syntax=intel", "-mstrange"]);
}

/// Asserts that `list` gives clang nothing and names exactly `named`.
fn all_dropped(list: &[&str], named: &[&str]) {
    let f = sorted(list);
    assert!(f.meaning.is_empty(), "kept {:?}", f.meaning);
    assert!(f.build.is_empty(), "kept {:?}", f.build);
    assert_eq!(f.dropped, named);
}

#[test]
fn plugins_through_xclang_are_dropped() {
    all_dropped(
        &[
            "-Xclang",
            "-load",
            "-Xclang",
            "x.so",
            "-Xclang",
            "-plugin",
            "-Xclang",
            "evil",
            "-Xclang",
            "-add-plugin",
            "-Xclang=-load",
            "-Xclang=x.so",
        ],
        &[
            "-Xclang -load",
            "-Xclang x.so",
            "-Xclang -plugin",
            "-Xclang evil",
            "-Xclang -add-plugin",
            "-Xclang=-load",
            "-Xclang=x.so",
        ],
    );
}

#[test]
fn linker_plugins_and_paths_are_dropped() {
    all_dropped(
        &[
            "-Wl,-plugin=x.so",
            "--ld-path=/x/ld",
            "-Xlinker",
            "-plugin",
            "-Xlinker",
            "x.so",
            "-fuse-ld=lld",
        ],
        &[
            "-Wl,-plugin=x.so",
            "--ld-path=/x/ld",
            "-Xlinker -plugin",
            "-Xlinker x.so",
            "-fuse-ld=lld",
        ],
    );
}

#[test]
fn profiling_and_coverage_outputs_are_dropped() {
    let list = [
        "-fprofile-generate=/x/prof",
        "-fprofile-generate",
        "-fprofile-instr-generate=/x/p.profraw",
        "-fprofile-instr-generate",
        "-fprofile-use=/x/p.profdata",
        "-fcoverage-compilation-dir=/x",
        "-fcs-profile-generate=/x",
    ];
    all_dropped(&list, &list);
}

#[test]
fn dependency_and_output_files_are_never_given_to_clang() {
    // foe names its own outputs: these are left out silently, in either spelling
    all_dropped(
        &[
            "-MD",
            "-MMD",
            "-MF",
            "/x/a.d",
            "-MF/x/b.d",
            "-o",
            "/x/a.o",
            "-o/x/b.o",
            "--output=/x/c.o",
            "--output",
            "/x/d.o",
            "-MT",
            "a.o",
            "-MQ/x",
        ],
        &[],
    );
    // a routine flag whose value is a flag: named, never given
    all_dropped(
        &["-o", "-fplugin=x.so", "-MF", "-"],
        &["-o -fplugin=x.so", "-MF -"],
    );
    // what makes clang list dependencies instead of compiling, or write them by another name
    all_dropped(
        &[
            "-M",
            "-MM",
            "--write-dependencies",
            "--write-user-dependencies",
            "-dependency-file",
            "/x/d",
        ],
        &[
            "-M",
            "-MM",
            "--write-dependencies",
            "--write-user-dependencies",
            "-dependency-file /x/d",
        ],
    );
}

#[test]
fn temporaries_reports_and_crash_files_are_dropped() {
    all_dropped(
        &[
            "-save-temps=obj",
            "-save-temps",
            "-fcrash-diagnostics-dir=/x",
            "-fmodules-cache-path=/x",
            "--serialize-diagnostics",
            "/x/d.dia",
            "-serialize-diagnostics",
            "/x/e.dia",
            "-ftime-report",
            "-ftime-report=per-pass",
            "-fproc-stat-report=/x",
            "-fdebug-compilation-dir=/x",
            "-fdebug-prefix-map=/x=/y",
        ],
        &[
            "-save-temps=obj",
            "-save-temps",
            "-fcrash-diagnostics-dir=/x",
            "-fmodules-cache-path=/x",
            "--serialize-diagnostics /x/d.dia",
            "-serialize-diagnostics /x/e.dia",
            "-ftime-report",
            "-ftime-report=per-pass",
            "-fproc-stat-report=/x",
            "-fdebug-compilation-dir=/x",
            "-fdebug-prefix-map=/x=/y",
        ],
    );
    // split debug info (a .dwo beside the object): foe gives its own -g
    all_dropped(&["-gsplit-dwarf", "-gsplit-dwarf=single", "-g3"], &[]);
}

#[test]
fn assembler_preprocessor_and_llvm_pass_throughs_are_dropped() {
    all_dropped(
        &[
            "-Wa,-o,/x/a.o",
            "-Wa,--defsym,X=1",
            "-Xassembler",
            "-o",
            "-Xpreprocessor",
            "-MD",
            "-Wp,-MD,/x/a.d",
            "-mllvm",
            "-load=/x/e.so",
            "-Xanalyzer",
            "x",
        ],
        &[
            "-Wa,-o,/x/a.o",
            "-Wa,--defsym,X=1",
            "-Xassembler -o",
            "-Xpreprocessor -MD",
            "-Wp,-MD,/x/a.d",
            "-mllvm -load=/x/e.so",
            "-Xanalyzer x",
        ],
    );
}

#[test]
fn driver_options_are_dropped() {
    all_dropped(
        &[
            "--driver-mode=cl",
            "-ccc-install-dir",
            "/x",
            "-ccc-gcc-name",
            "/x/gcc",
            "-ccc-print-phases",
            "-fsanitize-ignorelist=/x/list",
            "-fsanitize=address",
            "-fembed-bitcode",
            "-fembed-bitcode=all",
            "-fintegrated-cc1",
            "--gcc-install-dir=/x",
            "--gcc-triple=x",
        ],
        &[
            "--driver-mode=cl",
            "-ccc-install-dir /x",
            "-ccc-gcc-name /x/gcc",
            "-ccc-print-phases",
            "-fsanitize-ignorelist=/x/list",
            "-fsanitize=address",
            "-fembed-bitcode",
            "-fembed-bitcode=all",
            "-fintegrated-cc1",
            "--gcc-install-dir=/x",
            "--gcc-triple=x",
        ],
    );
}

#[test]
fn joined_and_separate_spellings_are_sorted_alike() {
    for (joined, separate, named) in [
        (&["-B/x"][..], &["-B", "/x"][..], ["-B/x", "-B /x"]),
        (&["-MJ/x"], &["-MJ", "/x"], ["-MJ/x", "-MJ /x"]),
        (
            &["--config=/x"],
            &["--config", "/x"],
            ["--config=/x", "--config /x"],
        ),
        (
            &["--sysroot=/x"],
            &["--sysroot", "/x"],
            ["--sysroot=/x", "--sysroot /x"],
        ),
        (
            &["-isysroot/x"],
            &["-isysroot", "/x"],
            ["-isysroot/x", "-isysroot /x"],
        ),
        (&["-L/x"], &["-L", "/x"], ["-L/x", "-L /x"]),
    ] {
        let mut both = joined.to_vec();
        both.extend(separate);
        all_dropped(&both, &named);
    }
    let f = sorted(&["-Iinc", "-I", "inc", "-DA=1", "-D", "A=1"]);
    assert_eq!(
        f.meaning,
        [
            "-I/repo/build/inc",
            "-I",
            "/repo/build/inc",
            "-DA=1",
            "-D",
            "A=1"
        ]
    );
}

#[test]
fn a_kept_flag_s_value_is_only_a_value() {
    // a target triple becomes paths (the GCC installation, `<triple>-ld`): a plain word or nothing
    all_dropped(
        &[
            "--target=x86_64-/../../x/evil",
            "-target",
            "../x/evil",
            "-march=/x",
            "-mtune=$(id)",
            "-std=c11/x",
            "-fvisibility=hidden/x",
        ],
        &[
            "--target=x86_64-/../../x/evil",
            "-target ../x/evil",
            "-march=/x",
            "-mtune=$(id)",
            "-std=c11/x",
            "-fvisibility=hidden/x",
        ],
    );
    // a value that is a flag: clang would read it as the value, foe's lists could part them
    all_dropped(
        &[
            "-target",
            "-fplugin=x.so",
            "-D",
            "-fplugin=x.so",
            "-I",
            "-Xclang",
        ],
        &["-target -fplugin=x.so", "-D -fplugin=x.so", "-I -Xclang"],
    );
    // `-O` begins other options (`-ObjC` compiles the file as Objective-C)
    all_dropped(
        &["-ObjC", "-ObjC++", "-O/x", "-Ox"],
        &["-ObjC", "-ObjC++", "-O/x", "-Ox"],
    );
    let kept = [
        "--target=x86_64-pc-linux-gnu",
        "-target",
        "aarch64-linux-gnu",
        "-march=armv8.2-a+fp16",
        "-fdenormal-fp-math=preserve-sign,preserve-sign",
        "-O",
        "-O3",
        "-Os",
        "-Oz",
        "-Og",
        "-Ofast",
        "-fno-builtin-memcpy",
        "-fstack-protector-strong",
    ];
    assert_all_kept(&kept);
}

#[test]
fn each_dropped_flag_is_named_once() {
    let f = sorted(&["-fplugin=a.so", "-fplugin=a.so", "-fplugin=b.so"]);
    assert_eq!(f.dropped, ["-fplugin=a.so", "-fplugin=b.so"]);
}
