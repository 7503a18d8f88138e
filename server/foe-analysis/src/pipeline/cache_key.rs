//! Per-function cache keys: a function's IR in both builds and that of its callees, its signature, span and
//! domain, and the settings that change results.

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::ir::{self, FunctionInfo};
use inkwell::module::Module;
use inkwell::values::FunctionValue;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

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
    p_module: (&CallGraph<'ctx>, &ir::ModuleText),
    pp_module: (&CallGraph<'ctx>, &ir::ModuleText),
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
    for (function, (graph, text)) in [(p_function, p_module), (pp_function, pp_module)] {
        for f in graph.with_callees(function) {
            graph.hash_function(&mut hasher, text, f, base);
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// The names of the functions `function` calls in `module`, transitively (in the order they are found), without
/// itself.
pub(super) fn callee_names<'ctx>(function: FunctionValue<'ctx>, graph: &CallGraph<'ctx>) -> Vec<String> {
    graph
        .with_callees(function)
        .into_iter()
        .skip(1)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .collect()
}

/// What each defined function of a module calls, read once per module: the per-function walks of every
/// reachable function's instructions were quadratic where function tables make every function reach every other
/// (Box2D's `recording.c`: 395 functions, 9 s of keys).
pub(super) struct CallGraph<'ctx> {
    /// The module's defined functions, in module order (what an indirect call may reach).
    defined: Vec<FunctionValue<'ctx>>,
    /// Each defined function's calls in instruction order: `Some(callee)` for a defined function, `None` for an
    /// indirect call.
    calls: HashMap<FunctionValue<'ctx>, Vec<Option<FunctionValue<'ctx>>>>,
    /// Each function's debug positions, read when a key first needs them.
    positions: RefCell<HashMap<FunctionValue<'ctx>, Vec<(u32, u32)>>>,
}

impl<'ctx> CallGraph<'ctx> {
    pub(super) fn of(module: &Module<'ctx>) -> CallGraph<'ctx> {
        let defined: Vec<FunctionValue<'ctx>> = module
            .get_functions()
            .filter(|f| f.count_basic_blocks() > 0)
            .collect();
        let mut calls = HashMap::new();
        for &f in &defined {
            let mut out = Vec::new();
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
                    match module.get_function(&name) {
                        Some(g) if g.count_basic_blocks() > 0 => out.push(Some(g)),
                        Some(_) => {}
                        // An indirect call may reach any function of the module (one whose address a table holds).
                        None => out.push(None),
                    }
                }
            }
            calls.insert(f, out);
        }
        CallGraph {
            defined,
            calls,
            positions: Default::default(),
        }
    }

    /// Feeds `function`'s textual IR to `hasher`, and its debug positions with lines counted from `base_line`
    /// (a line inserted above the key's function moves none of them; line 0, code without a source line, stays).
    fn hash_function(
        &self,
        hasher: &mut blake3::Hasher,
        text: &ir::ModuleText,
        function: FunctionValue<'ctx>,
        base_line: u32,
    ) {
        hasher.update(text.function(&function.get_name().to_string_lossy()).as_bytes());
        let mut positions = self.positions.borrow_mut();
        let positions = positions
            .entry(function)
            .or_insert_with(|| ir::debug_positions(function));
        for &(line, column) in positions.iter() {
            let line = match line {
                0 => i64::MIN,
                l => l as i64 - base_line as i64,
            };
            hasher.update(&line.to_le_bytes());
            hasher.update(&column.to_le_bytes());
        }
    }

    /// `function` and every function of the module it calls, transitively, in the order they are found.
    fn with_callees(&self, function: FunctionValue<'ctx>) -> Vec<FunctionValue<'ctx>> {
        let mut seen = vec![function];
        let mut known: HashSet<FunctionValue<'ctx>> = HashSet::from([function]);
        let mut i = 0;
        while i < seen.len() {
            for call in self.calls.get(&seen[i]).map_or(&[][..], Vec::as_slice) {
                match call {
                    Some(g) => {
                        if known.insert(*g) {
                            seen.push(*g);
                        }
                    }
                    None => {
                        for g in &self.defined {
                            if known.insert(*g) {
                                seen.push(*g);
                            }
                        }
                    }
                }
            }
            i += 1;
        }
        seen
    }
}
