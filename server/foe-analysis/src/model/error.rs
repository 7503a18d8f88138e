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
    /// A call of an LLVM intrinsic foe neither models nor runs.
    #[error("calls the intrinsic `{callee}`")]
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
