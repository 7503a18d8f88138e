//! Per-function cache keys: a function's IR in both builds and that of its callees, its signature, span and
//! domain, and the settings that change results.

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::ir::{self, FunctionInfo};
use inkwell::module::Module;
use inkwell::values::FunctionValue;

/// The cache key of a function: its IR in both builds (and that of the functions it calls), its signature,
/// span and domain, its share of the file's budget (`share_ms`), and the settings. Lines count from the function's declaration, so a line inserted above
/// keeps the key (the cached report is shifted on reuse).
#[allow(clippy::too_many_arguments)]
pub(super) fn cache_key<'ctx>(
    config: &AnalysisConfig,
    share_ms: u64,
    info: &FunctionInfo,
    domain: &Domain,
    p_function: FunctionValue<'ctx>,
    pp_function: FunctionValue<'ctx>,
    p_module: (&Module<'ctx>, &ir::ModuleText),
    pp_module: (&Module<'ctx>, &ir::ModuleText),
) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(config.fingerprint().as_bytes());
    hasher.update(&share_ms.to_le_bytes());
    let base = info.span.as_ref().map_or(0, |s| s.line);
    let span = info
        .span
        .as_ref()
        .map(|s| (s.body_line - s.line, s.end_line - s.line));
    hasher.update(format!("{:?}{span:?}{:?}", info.signature, domain.text).as_bytes());
    for (function, (module, text)) in [(p_function, p_module), (pp_function, pp_module)] {
        for f in with_callees(function, module) {
            hasher.update(ir::function_fingerprint(text, f, base).as_bytes());
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// The names of the functions `function` calls in `module`, transitively (in the order they are found), without
/// itself.
pub(super) fn callee_names<'ctx>(
    function: FunctionValue<'ctx>,
    module: &Module<'ctx>,
) -> Vec<String> {
    with_callees(function, module)
        .into_iter()
        .skip(1)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .collect()
}

/// `function` and every function of the same module it calls, transitively.
fn with_callees<'ctx>(
    function: FunctionValue<'ctx>,
    module: &Module<'ctx>,
) -> Vec<FunctionValue<'ctx>> {
    let mut seen = vec![function];
    let mut i = 0;
    while i < seen.len() {
        let f = seen[i];
        for block in f.get_basic_block_iter() {
            for inst in block.get_instructions() {
                if inst.get_opcode() != inkwell::values::InstructionOpcode::Call {
                    continue;
                }
                let n = inst.get_num_operands();
                let Some(inkwell::values::Operand::Value(callee)) =
                    inst.get_operand(n.saturating_sub(1))
                else {
                    continue;
                };
                let name = callee.get_name().to_string_lossy().into_owned();
                if let Some(g) = module.get_function(&name) {
                    if g.count_basic_blocks() > 0 && !seen.contains(&g) {
                        seen.push(g);
                    }
                } else {
                    // An indirect call may reach any function of the module (one whose address a table holds).
                    for g in module.get_functions() {
                        if g.count_basic_blocks() > 0 && !seen.contains(&g) {
                            seen.push(g);
                        }
                    }
                }
            }
        }
        i += 1;
    }
    seen
}
