//! The fast-math options, one row each: the flag that turns it on, what a build passes to go without it (the
//! cause probe), its words in messages, the pragma that turns it off in one block where there is one, and the
//! build change for the one no source edit reaches. Every other place reads this table.

use crate::report::Cause;

/// One fast-math option and everything foe says and does about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastMathOption {
    pub cause: Cause,
    /// The option that turns it on, on its own (`-fassociative-math`).
    pub flag: &'static str,
    /// What the fast-math build gets to go without it: the cause probe (for flush-to-zero, at the link only,
    /// where `crtfastmath.o` comes in).
    pub negation: &'static str,
    /// Plain words for messages, naming the flag.
    pub description: &'static str,
    /// The narrowest pragma that turns it off in one block, where clang has one.
    pub pragma: Option<&'static str>,
    /// What the quick fix's title says it turns off with that pragma.
    pub what: &'static str,
    /// The build change that removes it, for the option no source edit reaches.
    pub build_change: Option<&'static str>,
}

/// The options in the order their probes are tried.
pub const OPTIONS: [FastMathOption; 7] = [
    FastMathOption {
        cause: Cause::FlushToZero,
        flag: "-mdaz-ftz",
        negation: "-mno-daz-ftz",
        description: "flush-to-zero/denormals-are-zero, set at start-up by linking with -ffast-math",
        pragma: None,
        what: "flush-to-zero",
        build_change: Some(
            "link with -mno-daz-ftz (or without -ffast-math): flush-to-zero/denormals-are-zero is set for the whole \
             process at start-up, no source edit reaches it",
        ),
    },
    FastMathOption {
        cause: Cause::Reassociation,
        flag: "-fassociative-math",
        negation: "-fno-associative-math",
        description: "re-association (-fassociative-math)",
        pragma: Some("#pragma clang fp reassociate(off)"),
        what: "re-association",
        build_change: None,
    },
    FastMathOption {
        cause: Cause::Reciprocal,
        flag: "-freciprocal-math",
        negation: "-fno-reciprocal-math",
        description: "reciprocal instead of division (-freciprocal-math)",
        pragma: None,
        what: "reciprocals",
        build_change: None,
    },
    FastMathOption {
        cause: Cause::Contraction,
        flag: "-ffp-contract=fast",
        negation: "-ffp-contract=off",
        description: "fused multiply-add contraction (-ffp-contract=fast)",
        pragma: Some("#pragma clang fp contract(off)"),
        what: "contraction",
        build_change: None,
    },
    FastMathOption {
        cause: Cause::FiniteMath,
        flag: "-ffinite-math-only",
        negation: "-fno-finite-math-only",
        description: "the no-NaN/no-infinity assumption (-ffinite-math-only)",
        pragma: None,
        what: "the finite-math assumption",
        build_change: None,
    },
    FastMathOption {
        cause: Cause::SignedZeros,
        flag: "-fno-signed-zeros",
        negation: "-fsigned-zeros",
        description: "signed zeros ignored (-fno-signed-zeros)",
        pragma: None,
        what: "ignoring signed zeros",
        build_change: None,
    },
    FastMathOption {
        cause: Cause::ApproxFunc,
        flag: "-fapprox-func",
        negation: "-fno-approx-func",
        description: "approximate library functions (-fapprox-func)",
        pragma: None,
        what: "approximate functions",
        build_change: None,
    },
];

/// What `-ffast-math` does besides its options: it defines `__FAST_MATH__`, and code the preprocessor chose by it
/// differs between the builds. Its probe is P' with the macro undefined; no pragma changes what it chose.
pub const MACRO: FastMathOption = FastMathOption {
    cause: Cause::FastMathMacro,
    flag: "-D__FAST_MATH__",
    negation: "-U__FAST_MATH__",
    description: "code the preprocessor chose by `__FAST_MATH__`, which -ffast-math defines",
    pragma: None,
    what: "the `__FAST_MATH__` macro",
    build_change: Some(
        "edit that code (or build without -ffast-math): no pragma changes what the preprocessor chose",
    ),
};

/// The row of a cause that is one option, or the macro; None for the causes that are not (optimisation, several
/// together, undetermined).
pub fn option(cause: Cause) -> Option<&'static FastMathOption> {
    OPTIONS.iter().chain([&MACRO]).find(|o| o.cause == cause)
}

/// The umbrella options, the negations, and the spellings of the parts that are not a row's flag (a row's
/// negation is not always a fast-math option: `-ffp-contract=off` is a plain build's own flag).
const OTHER_SPELLINGS: [&str; 20] = [
    "-ffast-math",
    "-fno-fast-math",
    "-funsafe-math-optimizations",
    "-fno-unsafe-math-optimizations",
    "-fno-associative-math",
    "-fno-reciprocal-math",
    "-fno-finite-math-only",
    "-fno-honor-nans",
    "-fhonor-nans",
    "-fno-honor-infinities",
    "-fhonor-infinities",
    "-fsigned-zeros",
    "-fno-trapping-math",
    "-ftrapping-math",
    "-fno-math-errno",
    "-fmath-errno",
    "-ffp-contract=fast-honor-pragmas",
    "-fno-approx-func",
    "-mno-daz-ftz",
    "-Ofast",
];

/// Whether `flag` is one of clang's fast-math options (the umbrella, one of its parts or their negations,
/// `-Ofast`, an FP model or denormal mode).
pub fn is_fast_math_option(flag: &str) -> bool {
    OPTIONS.iter().any(|o| o.flag == flag)
        || OTHER_SPELLINGS.contains(&flag)
        || flag.starts_with("-ffp-model=")
        || flag.starts_with("-fdenormal-fp-math")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_the_old_list_is_a_fast_math_option() {
        for flag in [
            "-ffast-math",
            "-fno-fast-math",
            "-funsafe-math-optimizations",
            "-fno-unsafe-math-optimizations",
            "-fassociative-math",
            "-fno-associative-math",
            "-freciprocal-math",
            "-fno-reciprocal-math",
            "-ffinite-math-only",
            "-fno-finite-math-only",
            "-fno-honor-nans",
            "-fhonor-nans",
            "-fno-honor-infinities",
            "-fhonor-infinities",
            "-fno-signed-zeros",
            "-fsigned-zeros",
            "-fapprox-func",
            "-fno-approx-func",
            "-fno-trapping-math",
            "-ftrapping-math",
            "-fno-math-errno",
            "-fmath-errno",
            "-ffp-contract=fast",
            "-ffp-contract=fast-honor-pragmas",
            "-mdaz-ftz",
            "-mno-daz-ftz",
            "-Ofast",
            "-ffp-model=fast",
            "-fdenormal-fp-math=preserve-sign",
        ] {
            assert!(is_fast_math_option(flag), "{flag}");
        }
        // Contraction's negation is an ordinary flag of a plain build, not a fast-math option.
        assert!(!is_fast_math_option("-ffp-contract=off"));
        assert!(!is_fast_math_option("-O2"));
    }
}
