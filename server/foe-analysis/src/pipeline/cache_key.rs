//! Per-function cache keys: a function's IR in both builds and that of its callees, its signature, span and
//! domain, and the settings that change results.

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::ir::{self, FunctionInfo};
use inkwell::module::Module;
use inkwell::values::FunctionValue;
use std::cell::{OnceCell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

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
    p_module: &ModuleKeys<'_, 'ctx>,
    pp_module: &ModuleKeys<'_, 'ctx>,
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
    for (function, keys) in [(p_function, p_module), (pp_function, pp_module)] {
        for &f in keys.with_callees(function).iter() {
            keys.hash_function(&mut hasher, f, base);
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// The names of the functions `function` calls in `module`, transitively (in the order they are found), without
/// itself.
pub(super) fn callee_names<'ctx>(
    function: FunctionValue<'ctx>,
    keys: &ModuleKeys<'_, 'ctx>,
) -> Vec<String> {
    keys.with_callees(function)
        .iter()
        .skip(1)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .collect()
}

/// What the keys of one module's functions are made of, each read once per module: its text, what each defined
/// function calls, the functions each reaches, and each function's debug positions. (Walking every reachable
/// function's instructions per key was quadratic where function tables make every function reach every other:
/// Box2D's `recording.c`, 395 functions, 9 s of keys.)
pub(super) struct ModuleKeys<'m, 'ctx> {
    module: &'m Module<'ctx>,
    /// The module's text, printed when the first key needs it.
    text: OnceCell<ir::ModuleText>,
    /// The module's defined functions, in module order (what an indirect call may reach).
    defined: Vec<FunctionValue<'ctx>>,
    /// Each defined function's calls in instruction order: `Some(callee)` for a defined function, `None` for an
    /// indirect call.
    calls: HashMap<FunctionValue<'ctx>, Vec<Option<FunctionValue<'ctx>>>>,
    /// Each function with the functions it reaches ([`ModuleKeys::with_callees`]).
    reach: RefCell<HashMap<FunctionValue<'ctx>, Rc<[FunctionValue<'ctx>]>>>,
    /// Each function's debug positions.
    positions: RefCell<HashMap<FunctionValue<'ctx>, Vec<(u32, u32)>>>,
}

impl<'m, 'ctx> ModuleKeys<'m, 'ctx> {
    pub(super) fn of(module: &'m Module<'ctx>) -> ModuleKeys<'m, 'ctx> {
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
        ModuleKeys {
            module,
            text: OnceCell::new(),
            defined,
            calls,
            reach: Default::default(),
            positions: Default::default(),
        }
    }

    /// Feeds `function`'s textual IR to `hasher`, and its debug positions with lines counted from `base_line`
    /// (a line inserted above the key's function moves none of them; line 0, code without a source line, stays).
    fn hash_function(
        &self,
        hasher: &mut blake3::Hasher,
        function: FunctionValue<'ctx>,
        base_line: u32,
    ) {
        let text = self.text.get_or_init(|| ir::ModuleText::of(self.module));
        hasher.update(
            text.function(&function.get_name().to_string_lossy())
                .as_bytes(),
        );
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
    fn with_callees(&self, function: FunctionValue<'ctx>) -> Rc<[FunctionValue<'ctx>]> {
        if let Some(found) = self.reach.borrow().get(&function) {
            return found.clone();
        }
        let mut seen = vec![function];
        let mut known: HashSet<FunctionValue<'ctx>> = HashSet::from([function]);
        let mut i = 0;
        while i < seen.len() {
            for call in self.calls.get(&seen[i]).map_or(&[][..], Vec::as_slice) {
                let reached = match call {
                    Some(g) => std::slice::from_ref(g),
                    None => self.defined.as_slice(),
                };
                for g in reached {
                    if known.insert(*g) {
                        seen.push(*g);
                    }
                }
            }
            i += 1;
        }
        let seen: Rc<[FunctionValue<'ctx>]> = seen.into();
        self.reach.borrow_mut().insert(function, seen.clone());
        seen
    }
}
