//! Compiles `src/driver.cpp` against clang's C++ libraries (Debian's `libclang-19-dev`, `libclang-cpp19-dev`,
//! `llvm-19-dev`). Where their headers are missing, foe-cc is built without a driver and says so when started;
//! foe then runs `clang` itself, as before.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src/driver.cpp");
    println!("cargo:rerun-if-env-changed=FOE_LLVM_PREFIX");
    println!("cargo:rustc-check-cfg=cfg(foe_cc_driver)");
    let prefix = std::env::var("FOE_LLVM_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-19".into());
    let prefix = Path::new(&prefix);
    let include = prefix.join("include");
    let lib = prefix.join("lib");
    let have = include.join("clang/Driver/Driver.h").is_file()
        && lib.join("libclang-cpp.so").exists()
        && lib.join("libLLVM.so").exists();
    if !have {
        println!(
            "cargo:warning=foe-cc: clang's headers or libraries are not under {} (libclang-19-dev, \
             libclang-cpp19-dev): built without a driver, foe runs clang itself",
            prefix.display()
        );
        return;
    }
    let compiler = prefix.join("bin/clang++");
    let mut build = cc::Build::new();
    if compiler.exists() {
        build.compiler(&compiler);
    }
    build
        .cpp(true)
        .file("src/driver.cpp")
        .include(&include)
        .flag("-std=c++17")
        .flag("-fno-rtti")
        .flag("-fno-exceptions")
        .flag("-Wno-unused-parameter")
        .compile("foe_cc_driver");
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=clang-cpp");
    println!("cargo:rustc-link-lib=dylib=LLVM");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    println!("cargo:rustc-env=FOE_CC_LLVM_PREFIX={}", prefix.display());
    println!("cargo:rustc-cfg=foe_cc_driver");
}
