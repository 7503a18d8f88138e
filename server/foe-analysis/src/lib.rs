//! foe-analysis: the engine that finds where `-ffast-math` changes a C program's floating-point exceptions.
//!
//! Data flow: [`compile`] (clang, twice) → [`ir`] (load both builds) → [`model`] (exception conditions over
//! the reals per FP operation and path) → [`solve`] (Z3, exact rounding) → [`instrument`] + [`exec`]
//! (native runs of both builds in a sandboxed worker) → [`search`] (neighbourhoods, trace comparison)
//! → [`report`]. [`pipeline`] ties them together. Nothing here knows about LSP.

pub mod accuracy;
pub mod compile;
pub mod config;
pub mod confirm;
pub mod domain;
pub mod exec;
pub mod fast_math;
pub mod findings;
pub mod fix;
pub mod fpfmt;
pub mod headers;
pub mod inlining;
pub mod instrument;
pub mod ir;
pub mod link;
pub mod model;
pub mod pipeline;
pub mod process;
pub mod project;
pub mod report;
pub mod rng;
pub mod round;
pub mod sandbox;
pub mod scalar;
pub mod scratch;
pub mod search;
pub mod solve;
pub mod sym;
pub mod types;

pub use config::AnalysisConfig;
pub use pipeline::{analyse, AnalysisError, AnalysisRequest};
pub use report::{FileReport, FunctionReport};
