//! Build script of every crate that links libz3 into a binary, test or example: adds the rpath that lets them
//! load the Z3 scripts/setup.sh unpacks (FOE_Z3_PREFIX in .cargo/config.toml) without LD_LIBRARY_PATH, and stops
//! the build with a plain message when that Z3 is missing or z3-sys was pointed elsewhere.
use std::{env, path::Path};

fn main() {
    let var = |name: &str| {
        println!("cargo:rerun-if-env-changed={name}");
        env::var(name).unwrap_or_default()
    };
    let prefix = var("FOE_Z3_PREFIX");
    if prefix.is_empty() {
        panic!("FOE_Z3_PREFIX is unset: build inside the workspace, whose .cargo/config.toml sets it");
    }
    let lib = format!("{prefix}/lib");
    let header = format!("{prefix}/include/z3.h");
    let one = "1".to_string();
    for (name, expected) in [
        ("Z3_LIBRARY_PATH_OVERRIDE", &lib),
        ("Z3_SYS_Z3_HEADER", &header),
        ("Z3_NO_PKG_CONFIG", &one),
    ] {
        let value = var(name);
        if &value != expected {
            panic!("{name} is {value:?}, where .cargo/config.toml (FOE_Z3_PREFIX {prefix}) sets {expected:?}");
        }
    }
    let libz3 = Path::new(&lib).join("libz3.so");
    if !libz3.is_file() || !Path::new(&header).is_file() {
        panic!("no Z3 in {prefix}: run scripts/setup.sh, which installs it there");
    }
    println!("cargo:rerun-if-changed={}", libz3.display());
    // Searched before the directories other crates add (llvm-sys adds /usr/lib/x86_64-linux-gnu, where Debian's
    // libz3-dev, if installed, has another libz3.so).
    println!("cargo:rustc-link-search=native={lib}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
}
