//! Per-function cache keys: a function's IR in both builds and that of its callees, its signature, span and
//! domain, and the settings that change results.

use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::ir::{self, FunctionInfo};
use crate::report::LineAnchor;
use inkwell::module::Module;
use inkwell::values::FunctionValue;
use std::cell::{OnceCell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

/// The cache key of a function: its IR in both builds (and that of the functions it calls), its signature,
/// span and domain, its share of the file's budget (`share_ms`), and the settings. Each position counts from the
/// first line of the function of the file whose lines hold it ([`SourceRanges`]: code a function inlined keeps
/// its helper's lines), so lines inserted anywhere but in those functions keep the key: the cached report is
/// moved on reuse, each position with the function whose lines hold it ([`SourceRanges::anchors`],
/// `FunctionReport::move_lines`).
/// (Counted from the key's own function, an edit in the middle of GSL's `gamma.c` changed the key of every
/// function below it that calls or inlines a function above it.)
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
    let span = info
        .span
        .as_ref()
        .map(|s| (s.body_line - s.line, s.end_line - s.line));
    hasher.update(format!("{:?}{span:?}{:?}", info.signature, domain.text).as_bytes());
    for (function, keys) in [(p_function, p_module), (pp_function, pp_module)] {
        for &f in keys.with_callees(function).iter() {
            keys.hash_function(&mut hasher, f);
            if tracing::enabled!(tracing::Level::TRACE) {
                let mut h = blake3::Hasher::new();
                keys.hash_function(&mut h, f);
                tracing::trace!(key_of = %info.signature.name, part = %f.get_name().to_string_lossy(),
                    hash = %h.finalize().to_hex(), "key part");
            }
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// The lines each function of the analysed file spans (first and last line of its positions in P, which inlines
/// nothing of the file's), sorted: C functions do not nest, so a line lies in at most one.
pub(super) struct SourceRanges(Vec<(u32, u32, String)>);

impl SourceRanges {
    pub(super) fn of(p_module: &Module<'_>) -> Arc<SourceRanges> {
        let mut ranges: Vec<(u32, u32, String)> = p_module
            .get_functions()
            .filter(|f| f.count_basic_blocks() > 0)
            .filter_map(|f| {
                let lines: Vec<u32> = ir::debug_positions(f)
                    .into_iter()
                    .map(|p| p.0)
                    .filter(|&l| l > 0)
                    .collect();
                let (first, last) = (*lines.iter().min()?, *lines.iter().max()?);
                Some((first, last, f.get_name().to_string_lossy().into_owned()))
            })
            .collect();
        ranges.sort();
        Arc::new(SourceRanges(ranges))
    }

    /// The functions whose lines hold `lines` (a report's positions), with their lines: what the report is moved
    /// from when a later text reuses it.
    pub(super) fn anchors(&self, lines: impl IntoIterator<Item = u32>) -> Vec<LineAnchor> {
        let found: std::collections::BTreeSet<usize> =
            lines.into_iter().filter_map(|l| self.find(l)).collect();
        found.into_iter().map(|i| self.anchor(i)).collect()
    }

    /// Where the function `name` lies now.
    pub(super) fn named(&self, name: &str) -> Option<LineAnchor> {
        let i = self.0.iter().position(|r| r.2 == name)?;
        Some(self.anchor(i))
    }

    fn anchor(&self, i: usize) -> LineAnchor {
        let (first, last, function) = &self.0[i];
        LineAnchor {
            function: function.clone(),
            first: *first,
            last: *last,
        }
    }

    /// The range holding `line`: the last to start at or before it, if it ends at or after it.
    fn find(&self, line: u32) -> Option<usize> {
        let i = self.0.partition_point(|r| r.0 <= line).checked_sub(1)?;
        (line > 0 && self.0[i].1 >= line).then_some(i)
    }
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
    /// The lines of the file's functions, which positions count from.
    ranges: Arc<SourceRanges>,
}

impl<'m, 'ctx> ModuleKeys<'m, 'ctx> {
    pub(super) fn of(module: &'m Module<'ctx>, ranges: Arc<SourceRanges>) -> ModuleKeys<'m, 'ctx> {
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
            ranges,
        }
    }

    /// Feeds `function`'s textual IR to `hasher`, and its debug positions, each as the function of the file
    /// whose lines hold it and the line counted from that function's first (a line inserted outside those
    /// functions moves none of them; line 0, code without a source line, and a line no function holds stay as
    /// they are).
    fn hash_function(&self, hasher: &mut blake3::Hasher, function: FunctionValue<'ctx>) {
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
            let line = match self.ranges.find(line) {
                Some(i) => {
                    let (first, _, name) = &self.ranges.0[i];
                    hasher.update(name.as_bytes());
                    hasher.update(b"\0");
                    (line - first) as i64
                }
                None if line == 0 => i64::MIN,
                None => -(line as i64),
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
