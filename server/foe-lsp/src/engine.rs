//! The seam between the server and the engine: one trait, implemented by foe-analysis's pipeline.
//!
//! The server only ever calls [`Engine::analyse`] on a blocking worker thread; tests of the scheduling logic
//! can put a scripted engine behind the same trait.

use foe_analysis::pipeline::{
    AnalysisError, AnalysisRequest, CancelToken, FunctionCache, Progress,
};
use foe_analysis::report::FileReport;

/// Analyses one file synchronously on the calling thread.
pub trait Engine: Send + Sync + 'static {
    fn analyse(
        &self,
        request: &AnalysisRequest<'_>,
        cache: &dyn FunctionCache,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<FileReport, AnalysisError>;
}

/// The real engine: [`foe_analysis::pipeline::analyse`].
pub struct FoeEngine;

impl Engine for FoeEngine {
    fn analyse(
        &self,
        request: &AnalysisRequest<'_>,
        cache: &dyn FunctionCache,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<FileReport, AnalysisError> {
        foe_analysis::pipeline::analyse(request, cache, progress, cancel)
    }
}
