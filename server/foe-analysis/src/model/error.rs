//! Why the model cannot model a function, or why one path of it stops early. A leaf of the model: every other
//! file of it reports through [`ModelError`]. Each variant's text is what a report shows; [`reason_code`]
//! sorts a skipped function by variant.
//!
//! [`reason_code`]: ModelError::reason_code

use crate::report::ReasonCode;
use crate::types::Build;

/// What keeps the model from going on, with the text a report shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// A construct the model does not handle, in the report's words (`uses the `fp128` floating-point type`,
    /// `makes an indirect call (through a function pointer)`).
    #[error("{0}")]
    Unsupported(String),
    /// An instruction the model does not execute (its opcode's name).
    #[error("uses the `{0}` instruction")]
    Instruction(&'static str),
    /// A constrained intrinsic that rounds other than to nearest (the model computes in round-to-nearest only).
    #[error(
        "rounds with `{mode}` in `{callee}` (a rounding-mode pragma or `-frounding-math`): foe models \
         round-to-nearest only"
    )]
    RoundingMode { mode: String, callee: String },
    /// A call of an LLVM intrinsic foe neither models nor runs, said in C words where foe knows them.
    #[error("{}", intrinsic_words(callee))]
    UnmodelledIntrinsic { callee: String },
    /// The build's copy takes another number of parameters than the signature (the fast-math build dropped one).
    #[error("has {in_build} parameters in this build, {declared} in the signature")]
    ParamCount { in_build: usize, declared: usize },
    /// A parameter has another type in this build than in the signature.
    #[error("parameter `{param}` has type `{ty}` in this build")]
    ParamType { param: String, ty: String },
    /// The function is not in the build.
    #[error("`{function}` is not in the {} build", .build.label())]
    NotInBuild { function: String, build: Build },
    /// The build only declares the function.
    #[error("`{function}` has no body in the {} build", .build.label())]
    NoBody { function: String, build: Build },
    /// A memory access at an index computed from the input: the path stops there (counted apart).
    #[error("indexes memory with a symbolic index")]
    SymbolicIndex,
    /// Ends the current path, not the function, for this reason in C words (what the path did before is
    /// modelled).
    #[error("{0}")]
    PathStop(String),
    /// LLVM could not prepare a module for modelling (its target, the passes).
    #[error("{0}")]
    Llvm(String),
    /// IR the model does not expect, or a broken invariant of the model.
    #[error("internal: {0}")]
    Internal(String),
    /// One build of the pair cannot be modelled.
    #[error("cannot model the {} build: {error}", build_words(*.build))]
    InBuild {
        build: Build,
        error: Box<ModelError>,
    },
}

/// What an LLVM intrinsic call does, as a C programmer would say it (the intrinsic's name in backticks after):
/// `llvm.vector.reduce.fmin.v4f32` "takes the minimum of 4 floats as one vector operation".
fn intrinsic_words(callee: &str) -> String {
    let words = |what: &str| format!("{what} (`{callee}`), which foe does not model");
    if let Some(rest) = callee.strip_prefix("llvm.vector.reduce.") {
        let (op, ty) = rest.split_once('.').unwrap_or((rest, ""));
        let op = match op {
            "fadd" | "add" => "sum",
            "fmul" | "mul" => "product",
            "fmin" | "fminimum" | "smin" | "umin" => "minimum",
            "fmax" | "fmaximum" | "smax" | "umax" => "maximum",
            "and" => "bitwise and",
            "or" => "bitwise or",
            "xor" => "bitwise xor",
            other => other,
        };
        return words(&format!(
            "takes the {op} of {} as one vector operation",
            lanes_words(ty)
        ));
    }
    if callee.starts_with("llvm.masked.") {
        return words(
            "loads or stores some lanes of a vector (a masked vector access the vectoriser made)",
        );
    }
    if callee.starts_with("llvm.x86.") {
        return words("uses an x86 instruction built-in");
    }
    format!("calls the compiler built-in `{callee}`, which foe does not model")
}

/// `v4f32` as "4 floats", `v2f64` as "2 doubles", `v8i32` as "8 32-bit integers"; else "a vector".
fn lanes_words(ty: &str) -> String {
    let Some((count, elem)) = ty
        .strip_prefix('v')
        .and_then(|t| t.find(|c: char| !c.is_ascii_digit()).map(|i| t.split_at(i)))
    else {
        return "a vector".into();
    };
    let elem = match elem {
        "f32" => "floats".to_string(),
        "f64" => "doubles".to_string(),
        e if e.starts_with('i') => format!("{}-bit integers", &e[1..]),
        _ => return "a vector".into(),
    };
    format!("{count} {elem}")
}

/// The build as a report names it.
fn build_words(build: Build) -> &'static str {
    match build {
        Build::P => "plain",
        Build::PPrime => "fast-math",
    }
}

impl ModelError {
    /// A construct the model does not handle, described by `what`.
    pub(super) fn unsupported(what: impl Into<String>) -> ModelError {
        ModelError::Unsupported(what.into())
    }

    /// IR the model does not expect, described by `what` (without the `internal: ` the text adds).
    pub(super) fn internal(what: impl Into<String>) -> ModelError {
        ModelError::Internal(what.into())
    }

    /// The category of a function skipped for this error.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            ModelError::InBuild { error, .. } => error.reason_code(),
            ModelError::UnmodelledIntrinsic { .. } => ReasonCode::ExternalCall,
            ModelError::ParamCount { .. } => ReasonCode::SignatureDiffers,
            // A parameter of another type was `Unsupported` when reasons were sorted by their text; kept so.
            ModelError::ParamType { .. }
            | ModelError::Unsupported(_)
            | ModelError::Instruction(_)
            | ModelError::RoundingMode { .. }
            | ModelError::NotInBuild { .. }
            | ModelError::NoBody { .. }
            | ModelError::SymbolicIndex
            | ModelError::PathStop(_)
            | ModelError::Llvm(_)
            | ModelError::Internal(_) => ReasonCode::Unsupported,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::intrinsic_words;

    #[test]
    fn intrinsics_are_said_in_c_words() {
        assert_eq!(
            intrinsic_words("llvm.vector.reduce.fmin.v4f32"),
            "takes the minimum of 4 floats as one vector operation (`llvm.vector.reduce.fmin.v4f32`), which foe \
             does not model"
        );
        assert!(intrinsic_words("llvm.vector.reduce.add.v8i32")
            .contains("the sum of 8 32-bit integers"));
        assert_eq!(
            intrinsic_words("llvm.foo.f64"),
            "calls the compiler built-in `llvm.foo.f64`, which foe does not model"
        );
    }
}
